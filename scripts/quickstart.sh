#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job on this machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
exec "$root/build/ncclsmoke" store selftest
