#!/usr/bin/env bash
# Makes a self-contained ncclsmoke for a GPU machine that cannot build it (the GPU check machine
# is offline and lacks the Debian -dev packages): a Release build without the MPI and libfabric
# transports (not what the GPU check measures), plus every shared library it loads beyond glibc
# and the C++ runtime, in one folder. bench/gpu/check.sh uses that folder when it finds it and
# cannot build on the spot. CUDA and NCCL are never bundled: they are loaded at run time from the
# GPU machine itself.
#
#   bash bench/gpu/bundle.sh                # → build-gpubundle/bundle/{ncclsmoke,lib*.so*}
#   bash bench/gpu/check.sh                 # there, from the repository root (carry the folder)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${NCCLSMOKE_BUNDLE_BUILD:-$ROOT/build-gpubundle/cmake}"
OUT="$ROOT/build-gpubundle/bundle"
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNCCLSMOKE_TESTS=OFF \
  -DNCCLSMOKE_BENCH=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON >"$BUILD/configure.log" 2>&1 ||
  { echo "bundle: configure failed, see $BUILD/configure.log" >&2; exit 1; }
cmake --build "$BUILD" --target ncclsmoke -j "$(nproc)"
rm -rf "$OUT"
mkdir -p "$OUT"
cp "$BUILD/ncclsmoke" "$OUT/"
# Libraries every Linux has in a compatible version stay behind; the rest travel.
ldd "$BUILD/ncclsmoke" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|libutil.so*|libanl.so*|libnss_*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
    *) cp -L "$lib" "$OUT/" ;;
  esac
done
echo "bundle: $OUT ($(du -sh "$OUT" | cut -f1)): $(ls "$OUT" | tr '\n' ' ')"
