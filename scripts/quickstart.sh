#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job on this machine: a local
# 4-rank smoke run recorded in a run history, and the regression report over that history (each
# run of this script adds one run to it). Exits with the smoke run's code (README: exit codes).
# It installs only the `build` profile (no Slurm, Prometheus, Chromium, PostgreSQL or torch) and
# builds only the binary: the test suite is README command 2's (scripts/test.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh" build
"$root/scripts/build.sh" --target ncclsmoke
smoke="$root/build/smoke"
mkdir -p "$smoke"
rc=0
"$root/build/ncclsmoke" launch -n 4 --out-dir "$smoke" --history "$smoke/history.db" || rc=$?
if "$root/build/ncclsmoke" report --history "$smoke/history.db" --since 14d \
     --html "$smoke/report.html" --markdown "$smoke/report.md" >/dev/null; then
  echo "verdict: $smoke/verdict.json; history: $smoke/history.db; report: $smoke/report.html"
fi
exit "$rc"
