#!/usr/bin/env bash
# Builds the wire codec fuzz target with libFuzzer + ASan + UBSan and runs it for a bounded time
# on a seed corpus of golden requests, then replays the grown corpus through a plain build.
# Usage: run_fuzz.sh [SOURCE_ROOT] [SECONDS]   (exit 77 = skipped: no clang++)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
seconds=${2:-${NCCLSMOKE_FUZZ_SECONDS:-20}}

cxx=""
for c in clang++ clang++-14 clang++-15 clang++-16; do
  if command -v "$c" >/dev/null; then cxx=$c; break; fi
done
if [ -z "$cxx" ]; then
  echo "SKIP: clang++ not found; the libFuzzer target needs clang (apt install clang libclang-rt-dev)"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ncclsmoke-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
flags=(-std=c++20 -g -O1 -I"$root")
srcs=("$root/rendezvous/wire.cpp" "$root/tests/fuzz/wire_fuzz.cpp")

echo "building with $cxx in $work"
"$cxx" "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "${srcs[@]}" -o "$work/wire_fuzz"
"$cxx" "${flags[@]}" -fsanitize=address,undefined -fno-sanitize-recover=undefined \
  -DWIRE_FUZZ_STANDALONE "${srcs[@]}" -o "$work/wire_fuzz_replay"

"$work/wire_fuzz_replay" --write-seeds "$work/corpus"
# -rss_limit_mb bounds memory; -max_len lets streams of several requests through.
status=0
"$work/wire_fuzz" "$work/corpus" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=1024 \
  -timeout=10 -print_final_stats=1 -artifact_prefix="$work/" >"$work/fuzz.log" 2>&1 || status=$?
tail -n 25 "$work/fuzz.log"
if [ "$status" -ne 0 ]; then
  echo "FAIL: the fuzzer found a crash or an invariant violation (exit $status)"
  keep="$PWD/wire_fuzz_artifacts"  # ctest runs this in the build folder
  for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [ -e "$a" ] || continue
    echo "reproducer $(basename "$a") (kept in $keep; replay: wire_fuzz_replay FILE):"
    od -An -tx1 "$a" | head -n 8
    mkdir -p "$keep" && cp "$a" "$keep/"
  done
  exit 1
fi
"$work/wire_fuzz_replay" "$work/corpus"
echo "PASS: $seconds s of fuzzing, corpus of $(ls "$work/corpus" | wc -l) inputs replayed"
