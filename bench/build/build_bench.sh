#!/usr/bin/env bash
# Build cost, before and after: for each revision, a clean configure and build of the `ncclsmoke`
# target alone, then the rest of the full build (tests and benchmarks included), each as wall
# time and CPU-seconds (user + sys of every compile and link), and the ten costliest files.
#
#   bench/build/build_bench.sh [-j N] [--target-only] [--quickstart] [--ctest] REV [REV ...]
#
#   --quickstart  also README command 1 (scripts/quickstart.sh) on a fresh clone of REV, with the
#                 packages already present (install-deps.sh finds them and skips apt)
#   --ctest       also, in the full build, `ctest -j2` (the whole suite, as CI runs it) and
#                 `ctest -L unit -j2`, each as wall time (and CPU-seconds of the processes)
#
# REV is a git revision of this repository, or `.` for the working tree as it is (uncommitted
# changes included). Each is built in its own fresh folder under $BUILD_BENCH_DIR
# (/tmp/ncclsmoke-build-bench); the per-file CPU log is kept there (cpu-<rev>.log). Builds run one
# after another, so two revisions never share the CPUs. Prints one table at the end.
# $BUILD_BENCH_CMAKE_ARGS: extra configure arguments for every revision (e.g.
# -DCMAKE_UNITY_BUILD_BATCH_SIZE=16), to compare build settings on one revision.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${BUILD_BENCH_DIR:-/tmp/ncclsmoke-build-bench}
jobs=$(nproc)
target_only=0 quickstart=0 run_ctest=0
revs=()
while (($#)); do
  case "$1" in
    -j) jobs=$2; shift 2 ;;
    --target-only) target_only=1; shift ;;
    --quickstart) quickstart=1; shift ;;
    --ctest) run_ctest=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) revs+=("$1"); shift ;;
  esac
done
((${#revs[@]})) || { echo "build_bench: name at least one revision (or . for the working tree)" >&2; exit 2; }
mkdir -p "$work"
launcher="$root/bench/build/cpu_launcher.sh"

# timed LABEL CMD...: runs CMD, appends "LABEL wall cpu" to $work/times
timed() {
  local label=$1; shift
  local t; t=$(mktemp)
  /usr/bin/time -f '%e %U %S' -o "$t" "$@" >"$work/last.log" 2>&1 || { cat "$work/last.log" >&2; rm -f "$t"; return 1; }
  read -r e u s <"$t"; rm -f "$t"
  awk -v l="$label" -v e="$e" -v u="$u" -v s="$s" 'BEGIN { printf "%s %.1f %.1f\n", l, e, u + s }' >>"$work/times"
}

: >"$work/times"
for rev in "${revs[@]}"; do
  name=$( [ "$rev" = . ] && echo worktree || git -C "$root" rev-parse --short "$rev")
  src="$work/src-$name" bld="$work/build-$name" log="$work/cpu-$name.log"
  rm -rf "$src" "$bld"; : >"$log"
  if [ "$rev" = . ]; then
    mkdir -p "$src"
    (cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$src")
  else
    mkdir -p "$src" && git -C "$root" archive "$rev" | tar -x -C "$src"
  fi
  export NCCLSMOKE_CPU_LOG="$log"
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  timed "$name configure" cmake -S "$src" -B "$bld" "${gen[@]}" \
    -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_C_COMPILER_LAUNCHER="$launcher" \
    ${BUILD_BENCH_CMAKE_ARGS:-}
  timed "$name target" cmake --build "$bld" -j "$jobs" --target ncclsmoke
  steps_target=$(wc -l <"$log")
  ((target_only)) || timed "$name rest" cmake --build "$bld" -j "$jobs"
  if ((run_ctest && !target_only)); then
    # Both timed runs are the README's: unlimited open files, two jobs, a 600 s guard.
    (ulimit -n "$(ulimit -Hn)" 2>/dev/null; cd "$bld" &&
      timed "$name ctest-j2" ctest --timeout 600 -j 2 --output-junit "$work/ctest-$name.xml" ) ||
      echo "   ctest -j2 had failures: $work/last.log"
    cp "$work/last.log" "$work/ctest-$name.log"
    (ulimit -n "$(ulimit -Hn)" 2>/dev/null; cd "$bld" && timed "$name ctest-unit" ctest --timeout 600 -L unit -j 2) ||
      echo "   ctest -L unit had failures: $work/last.log"
    echo "   ten slowest ctest entries (s):"
    sed -n 's/.*Test *#[0-9]*: \([^ ]*\) .*Passed *\([0-9.]*\) sec.*/\2 \1/p' "$work/ctest-$name.log" |
      sort -rn | head -10 | sed 's/^/   /'
  fi
  if ((quickstart)); then
    # README command 1 as a new user runs it: a fresh clone, nothing built.
    qs="$work/quickstart-$name"
    rm -rf "$qs"
    if [ "$rev" = . ]; then cp -a "$src" "$qs"; else git clone -q "$root" "$qs" && git -C "$qs" checkout -q "$rev"; fi
    unset NCCLSMOKE_CPU_LOG
    timed "$name quickstart" bash "$qs/scripts/quickstart.sh" || echo "   quickstart failed: $work/last.log"
    export NCCLSMOKE_CPU_LOG="$log"
  fi
  echo "== $name: $steps_target compile/link steps for ncclsmoke, $(wc -l <"$log") for the full build"
  echo "   ten costliest (CPU-s, wall-s, output):"
  sort -rn "$log" | head -10 | sed "s|$bld/||; s/^/   /"
done
echo
echo "revision  step  wall_s  cpu_s"
cat "$work/times"
# full = target + rest
awk '$2 == "target" { t[$1] = $3; c[$1] = $4 } $2 == "rest" { printf "%s full %.1f %.1f\n", $1, t[$1] + $3, c[$1] + $4 }' "$work/times"
