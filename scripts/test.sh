#!/usr/bin/env bash
# README command 2: install dependencies, build, and run the whole test suite (ctest).
# Extra arguments go to ctest (e.g. -R store_contract).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh" test
"$root/scripts/build.sh" -DNCCLSMOKE_TESTS=ON -DNCCLSMOKE_BENCH=ON
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
cd "$root/build"
exec ctest --output-on-failure --timeout 600 -j "${NCCLSMOKE_TEST_JOBS:-2}" "$@"
