#!/usr/bin/env bash
# Installs the Debian packages of one profile (each includes the ones above it):
#   runtime  what the binary and the main job need at run time (the shared libraries it links)
#   build    runtime + compilers and -dev packages to build the `ncclsmoke` binary (README command 1)
#   test     build + everything the test suite and the benchmarks use (README command 2, CI):
#            Slurm, Prometheus and the Pushgateway, Chromium, PostgreSQL, torch, libfabric's and
#            Open MPI's tools, iptables, debootstrap, kubectl and node
# Usage: install-deps.sh [runtime|build|test] (default: test). `--list PROFILE` prints the
# profile's packages, one per line, and installs nothing (the Dockerfiles' lists are checked
# against it by tests/deploy). Idempotent: a machine that has every package skips apt entirely.
set -euo pipefail

runtime=(
  ca-certificates
  libfabric1 libopenmpi3 libyaml-cpp0.7 libsqlite3-0 libcurl4 libpq5 libfmt9 libspdlog1.10 libssl3
)
build=(
  build-essential cmake ninja-build pkg-config
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libvalijson-dev
  libsqlite3-dev libcurl4-openssl-dev libyaml-cpp-dev libpq-dev libssl-dev
  libfabric-dev libopenmpi-dev
)
test=(
  clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-torch python3-jsonschema
  libfabric-bin openmpi-bin iperf3
  iproute2 iptables
  sqlite3 chromium fonts-dejavu-core prometheus prometheus-pushgateway yamllint shellcheck
  util-linux
  slurm-wlm munge
  postgresql
  debootstrap
)

list=0
if [ "${1:-}" = "--list" ]; then list=1; shift; fi
profile=${1:-test}
case "$profile" in
  runtime) packages=("${runtime[@]}") ;;
  build) packages=("${runtime[@]}" "${build[@]}") ;;
  test) packages=("${runtime[@]}" "${build[@]}" "${test[@]}") ;;
  *) echo "install-deps: unknown profile '$profile' (use runtime, build or test)" >&2; exit 2 ;;
esac
if ((list)); then printf '%s\n' "${packages[@]}"; exit 0; fi

# kubectl (with its built-in kustomize) renders the manifests; node + npm validate them
# (tests/deploy). Images that already carry them (a newer kubectl, nodesource's node) keep theirs;
# elsewhere Debian's are installed.
if [ "$profile" = test ]; then
  command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)
  command -v node >/dev/null 2>&1 || packages+=(nodejs)
  command -v npm >/dev/null 2>&1 || packages+=(npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps ($profile): installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
