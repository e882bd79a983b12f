#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the benchmarks need. Idempotent: a
# machine that has them all skips apt entirely.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libvalijson-dev
  libsqlite3-dev libcurl4-openssl-dev libyaml-cpp-dev
  python3 python3-torch python3-jsonschema
  libfabric-dev libfabric-bin libopenmpi-dev openmpi-bin iperf3
  iproute2 iptables
  sqlite3 chromium fonts-dejavu-core prometheus prometheus-pushgateway yamllint shellcheck
  util-linux
  slurm-wlm munge
  postgresql libpq-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# kubectl (with its built-in kustomize) renders the manifests; node + npm validate them
# (tests/deploy). Images that already carry them (a newer kubectl, nodesource's node) keep theirs;
# elsewhere Debian's are installed.
extra=()
command -v kubectl >/dev/null 2>&1 || extra+=(kubernetes-client)
command -v node >/dev/null 2>&1 || extra+=(nodejs)
command -v npm >/dev/null 2>&1 || extra+=(npm)
if ((${#extra[@]})); then
  echo "install-deps: installing ${extra[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${extra[@]}"
fi
