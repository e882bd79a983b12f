#!/usr/bin/env bash
# `promtool check metrics` on every metric text `ncclsmoke publish` produces: the textfile output
# and the stdout output, for each sample verdict (pass, fail with findings and a NaN gate, odd
# label values, inconclusive with no transports).
# With README (the project's README.md), every family the outputs hold must be named in its
# metric list (the "Publishing" section).
# Usage: check_metrics.sh NCCLSMOKE WRITE_SAMPLES [README]   (exit 77: promtool absent)
set -u
ncclsmoke=$1
write_samples=$2
readme=${3-}
if ! command -v promtool >/dev/null; then
  echo "SKIP: promtool not found (Debian package 'prometheus')"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$write_samples" "$tmp" || exit 1
failures=0
checked=0
for verdict in "$tmp"/*.json; do
  name=$(basename "$verdict" .json)
  mkdir -p "$tmp/$name"
  "$ncclsmoke" publish "$verdict" --textfile "$tmp/$name" --cluster 'east "1"\b' --fail-on none \
    >"$tmp/$name.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] || [ ! -s "$tmp/$name/ncclsmoke.prom" ]; then
    echo "FAIL: publish $name exited $rc or wrote no textfile:"; cat "$tmp/$name.log"
    failures=$((failures + 1)); continue
  fi
  "$ncclsmoke" publish "$verdict" --fail-on none >"$tmp/$name.stdout.prom" 2>/dev/null
  if ! cmp -s "$tmp/$name.stdout.prom" <(sed 's/cluster="east \\"1\\"\\\\b"/cluster="default"/' "$tmp/$name/ncclsmoke.prom"); then
    echo "FAIL: $name: stdout metrics differ from the textfile beyond the cluster label"
    failures=$((failures + 1))
  fi
  for f in "$tmp/$name/ncclsmoke.prom" "$tmp/$name.stdout.prom"; do
    checked=$((checked + 1))
    if ! out=$(promtool check metrics <"$f" 2>&1); then
      echo "FAIL: promtool check metrics on $name ($(basename "$f")):"; echo "$out"
      failures=$((failures + 1))
    elif [ -n "$out" ]; then
      echo "FAIL: promtool reported problems on $name:"; echo "$out"
      failures=$((failures + 1))
    fi
  done
  grep -q '^ncclsmoke_verdict{' "$tmp/$name/ncclsmoke.prom" || { echo "FAIL: $name: no ncclsmoke_verdict"; failures=$((failures + 1)); }
done
if [ -n "$readme" ]; then
  section=$(sed -n '/^## Publishing/,/^## /p' "$readme")
  families=$(cat "$tmp"/*/ncclsmoke.prom | sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' | sort -u)
  for fam in $families; do
    if ! grep -q "\`$fam[\`{]" <<<"$section"; then
      echo "FAIL: README.md's metric list (## Publishing) does not name $fam"
      failures=$((failures + 1))
    fi
  done
  echo "README metric list: $(wc -w <<<"$families") families checked"
fi
echo "checked $checked metric outputs, $failures failure(s)"
[ "$checked" -ge 8 ] && [ "$failures" -eq 0 ]
