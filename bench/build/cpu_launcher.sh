#!/usr/bin/env bash
# CMAKE_<LANG>_COMPILER_LAUNCHER for bench/build/build_bench.sh: runs one compile or link and
# appends "<user+sys CPU seconds> <wall seconds> <output file>" to $NCCLSMOKE_CPU_LOG.
out=?
prev=
for a in "$@"; do
  [ "$prev" = -o ] && out=$a
  prev=$a
done
t=$(mktemp)
rc=0
/usr/bin/time -f '%U %S %e' -o "$t" "$@" || rc=$?
read -r u s e <"$t" && awk -v u="$u" -v s="$s" -v e="$e" -v o="$out" \
  'BEGIN { printf "%.2f %.2f %s\n", u + s, e, o }' >>"${NCCLSMOKE_CPU_LOG:-/dev/null}"
rm -f "$t"
exit "$rc"
