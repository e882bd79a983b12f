#!/usr/bin/env bash
# Configures and builds into build/ (Release-with-debug-info).
# Usage: build.sh [--target T]... [cmake -D arguments...]
#   --target T   build only T (README command 1 builds only `ncclsmoke`); default: everything
#   other arguments go to cmake's configure step (e.g. -DNCCLSMOKE_TESTS=OFF); given ones
#   re-run it, so a build folder configured without tests gains them when test.sh asks
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLSMOKE_BUILD_DIR:-$root/build}
targets=()
cmake_args=()
while (($#)); do
  case "$1" in
    --target) [ $# -ge 2 ] || { echo "build.sh: --target needs a target name" >&2; exit 2; }
              targets+=(--target "$2"); shift 2 ;;
    *) cmake_args+=("$1"); shift ;;
  esac
done
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" "${cmake_args[@]}"
elif ((${#cmake_args[@]})); then
  cmake -S "$root" -B "$build" "${cmake_args[@]}"
fi
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
