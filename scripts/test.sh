#!/usr/bin/env bash
# README command 2: install dependencies, build, and run the whole test suite (ctest).
# Extra arguments go to ctest (e.g. -R store_contract).
# A test that skips (exit 77: a tool, a privilege or a library it needs is missing) fails the
# command unless tests/expected-skips.txt names it with the reason: on a machine where
# `install-deps.sh test` ran, a skip means something the suite needs is absent, and a green run
# that silently tested less is what this refuses.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh" test
"$root/scripts/build.sh" -DNCCLSMOKE_TESTS=ON -DNCCLSMOKE_BENCH=ON
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
cd "$root/build"
log=$(mktemp /tmp/ncclsmoke-ctest.XXXXXX)
trap 'rm -f "$log"' EXIT
rc=0
ctest --output-on-failure --timeout 600 -j "${NCCLSMOKE_TEST_JOBS:-2}" "$@" | tee "$log" || rc=$?
# ctest's closing list: "  713 - Name (Skipped)".
mapfile -t skipped < <(sed -n 's/^[[:space:]]*[0-9]\+ - \(.*\) (Skipped)$/\1/p' "$log")
unexpected=()
for t in "${skipped[@]}"; do
  grep -qxF "$t" <(sed 's/[[:space:]]*#.*//; /^$/d' "$root/tests/expected-skips.txt") || unexpected+=("$t")
done
if ((${#unexpected[@]})); then
  echo "test.sh: ${#unexpected[@]} test(s) skipped that tests/expected-skips.txt does not expect" \
       "(run one with ctest -V -R NAME to see what it missed):"
  printf '  %s\n' "${unexpected[@]}"
  ((rc)) || rc=1
fi
exit "$rc"
