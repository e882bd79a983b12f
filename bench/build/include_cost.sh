#!/usr/bin/env bash
# Which heavy headers each source of the `ncclsmoke` target pulls in, before and after: the
# `-H` evidence behind the build-cost figures (docs/benchmarks.md, Build cost).
#
#   bench/build/include_cost.sh REV [REV ...]      (`.` = the working tree)
#
# For each revision: configures a scratch tree (file by file, no unity) and runs every compile
# command of the binary's libraries with `-E -H` (preprocessing only: seconds in all). Prints per
# revision how many sources include CLI11, fmt's implementation (format-inl.h, compiled into
# every file in header-only mode), nlohmann/json (the full header, not json_fwd.hpp), valijson,
# and the mean count of distinct headers per source.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${BUILD_BENCH_DIR:-/tmp/ncclsmoke-build-bench}
(($#)) || { echo "include_cost: name at least one revision (or . for the working tree)" >&2; exit 2; }
mkdir -p "$work"
printf '%-10s %7s %7s %10s %9s %9s %13s\n' revision sources CLI11 format-inl json.hpp valijson "headers/file"
for rev in "$@"; do
  name=$( [ "$rev" = . ] && echo worktree || git -C "$root" rev-parse --short "$rev")
  src="$work/inc-src-$name" bld="$work/inc-build-$name"
  rm -rf "$src" "$bld"; mkdir -p "$src"
  if [ "$rev" = . ]; then
    (cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$src")
  else
    git -C "$root" archive "$rev" | tar -x -C "$src"
  fi
  cmake -S "$src" -B "$bld" -DCMAKE_UNITY_BUILD=OFF -DNCCLSMOKE_TESTS=OFF -DNCCLSMOKE_BENCH=OFF \
    >/dev/null
  # The binary's own sources: every module folder, no tests or benchmarks.
  /usr/bin/python3 - "$bld/compile_commands.json" "$src" >"$work/inc-cmds-$name" <<'EOF'
import json, sys, shlex
src = sys.argv[2]
for e in json.load(open(sys.argv[1])):
    f = e["file"]
    if f.startswith(src + "/") and not f.startswith((src + "/tests/", src + "/bench/")):
        args = shlex.split(e["command"])
        out = [a for i, a in enumerate(args) if a != "-o" and (i == 0 or args[i - 1] != "-o")]
        print(json.dumps({"dir": e["directory"], "args": out}))
EOF
  n=0 cli=0 fmtinl=0 js=0 vj=0 total=0
  while read -r line; do
    hdrs=$(/usr/bin/python3 -c '
import json, subprocess, sys
e = json.loads(sys.argv[1])
r = subprocess.run(e["args"] + ["-E", "-H", "-o", "/dev/null"], cwd=e["dir"], capture_output=True, text=True)
seen = set()
for l in r.stderr.splitlines():
    if l.startswith("."):
        seen.add(l.lstrip(". ").strip())
print("\n".join(sorted(seen)))' "$line")
    n=$((n + 1))
    total=$((total + $(grep -c . <<<"$hdrs")))
    grep -q '/CLI/CLI.hpp$' <<<"$hdrs" && cli=$((cli + 1))
    grep -q '/fmt/format-inl.h$' <<<"$hdrs" && fmtinl=$((fmtinl + 1))
    grep -q '/nlohmann/json.hpp$' <<<"$hdrs" && js=$((js + 1))
    grep -q '/valijson/' <<<"$hdrs" && vj=$((vj + 1))
  done <"$work/inc-cmds-$name"
  printf '%-10s %7d %7d %10d %9d %9d %13d\n' "$name" "$n" "$cli" "$fmtinl" "$js" "$vj" $((total / (n ? n : 1)))
done
