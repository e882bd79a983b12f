#!/usr/bin/env bash
# Makes a self-contained ncclsmoke for a GPU machine that cannot build it (the GPU check machine
# is offline and lacks the Debian -dev packages): a Release build without the MPI and libfabric
# transports (not what the GPU check measures), plus every shared library it loads beyond glibc
# and the C++ runtime, in one folder. bench/gpu/check.sh uses that folder when it finds it and
# cannot build on the spot. CUDA and NCCL are never bundled: they are loaded at run time from the
# GPU machine itself.
#
#   flock /tmp/ncclsmoke-build.lock bash bench/gpu/bundle.sh   # → build-gpubundle/bundle/
#   CHECK_ARCHIVE=$OUT/gpucheck.tar.gz bash bench/gpu/check.sh  # there (carry build-gpubundle/bundle)
# check.sh uses the bundle as it is (no build) when its binary runs there; the binary is stripped
# and the folder must stay under the device tool's 64 MiB carry limit, which this script checks.
# MANIFEST.txt in the folder names the commit, the build date and the libraries.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${NCCLSMOKE_BUNDLE_BUILD:-$ROOT/build-gpubundle/cmake}"
OUT="$ROOT/build-gpubundle/bundle"
mkdir -p "$BUILD"
# pkg-config sees every package but libfabric (libpq, for the history's PostgreSQL backend, is
# REQUIRED through it), so the fabric transport stays out; MPI is disabled outright.
PCDIR="$BUILD/pkgconfig-without-libfabric"
rm -rf "$PCDIR"
mkdir -p "$PCDIR"
IFS=: read -r -a pc_dirs <<<"$(pkg-config --variable pc_path pkg-config)"
for d in "${pc_dirs[@]}"; do
  for pc in "$d"/*.pc; do
    [ -f "$pc" ] || continue
    case "$(basename "$pc")" in libfabric*) continue ;; esac
    [ -e "$PCDIR/$(basename "$pc")" ] || ln -s "$pc" "$PCDIR/"
  done
done
PKG_CONFIG_LIBDIR="$PCDIR" PKG_CONFIG_PATH="" \
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNCCLSMOKE_TESTS=OFF \
  -DNCCLSMOKE_BENCH=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=OFF >"$BUILD/configure.log" 2>&1 ||
  { echo "bundle: configure failed, see $BUILD/configure.log" >&2; exit 1; }
grep -q 'libfabric not found' "$BUILD/configure.log" ||
  echo "bundle: warning: libfabric was found; the fabric transport (and libfabric) travel too" >&2
cmake --build "$BUILD" --target ncclsmoke -j "$(nproc)"
rm -rf "$OUT"
mkdir -p "$OUT"
cp "$BUILD/ncclsmoke" "$OUT/"
command -v strip >/dev/null 2>&1 && strip --strip-unneeded "$OUT/ncclsmoke"
# Libraries every Linux has in a compatible version stay behind; the rest travel.
ldd "$BUILD/ncclsmoke" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|libutil.so*|libanl.so*|libnss_*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
    *) cp -L "$lib" "$OUT/" ;;
  esac
done
# It must run from the folder alone (what check.sh tries first).
if ! version=$(env LD_LIBRARY_PATH="$OUT" "$OUT/ncclsmoke" --version 2>&1); then
  echo "bundle: $OUT/ncclsmoke does not run with LD_LIBRARY_PATH=$OUT: $version" >&2
  exit 1
fi
{
  echo "$version"
  echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null) (uncommitted changes: $(git -C "$ROOT" status --porcelain 2>/dev/null | grep -c .))"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(grep -m1 PRETTY_NAME /etc/os-release | cut -d= -f2 | tr -d \")"
  ls -l "$OUT"
} >"$OUT/MANIFEST.txt"
kib=$(du -sk "$OUT" | cut -f1)
if [ "$kib" -gt $(( 60 * 1024 )) ]; then
  echo "bundle: $OUT is ${kib} KiB, over the 60 MiB kept under the 64 MiB carry limit" >&2
  exit 1
fi
echo "bundle: $OUT (${kib} KiB, $version): $(find "$OUT" -maxdepth 1 -type f -printf '%f ')"
