#!/usr/bin/env bash
# Builds the Debian package: the `ncclsmoke` target in build/ (scripts/build.sh), then
# `cpack -G DEB` into build/package/. Prints the file, its size and its Depends line.
#   scripts/package.sh [OUT_DIR]
# Install it with `apt-get install ./build/package/ncclsmoke_<version>_amd64.deb`: apt pulls the
# run-time libraries named in Depends (install-deps.sh runtime lists the same ones).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLSMOKE_BUILD_DIR:-$root/build}
out=${1:-$build/package}
command -v dpkg-shlibdeps >/dev/null ||
  { echo "package.sh: dpkg-shlibdeps is missing (apt-get install dpkg-dev)" >&2; exit 2; }
"$root/scripts/build.sh" --target ncclsmoke
mkdir -p "$out"
(cd "$build" && cpack -G DEB -B "$out" >"$out/cpack.log" 2>&1) ||
  { cat "$out/cpack.log" >&2; echo "package.sh: cpack failed (log above)" >&2; exit 1; }
rm -rf "$out/_CPack_Packages"
deb=$(ls -t "$out"/ncclsmoke_*.deb | head -1)
echo "package: $deb ($(stat -c %s "$deb") bytes)"
echo "Depends: $(dpkg-deb -f "$deb" Depends)"
