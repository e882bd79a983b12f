#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job on this machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
mkdir -p "$root/build/smoke"
exec "$root/build/ncclsmoke" launch -n 4 --out-dir "$root/build/smoke"
