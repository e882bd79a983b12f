#!/usr/bin/env bash
# The Debian package, installed into a clean root and run from there.
#   package_test.sh BUILD_DIR VERSION
# 1. `cpack -G DEB` in BUILD_DIR (the binary is already built) gives ncclsmoke_VERSION_amd64.deb.
# 2. Its Depends names run-time libraries only: no -dev package, nothing of CUDA or NCCL (dlopened,
#    so only Suggests), not libfabric1 nor libopenmpi3 (dlopened by their transports, so
#    Recommends), and every package it names exists in this machine's apt sources.
# 3. `dpkg --root` installs it into an empty root (its own dpkg database, nothing else): the package
#    carries /usr/bin/ncclsmoke and nothing outside /usr.
# 4. The shared-library closure of that binary (ldd) is covered by Depends: every library resolves,
#    and the package owning it is in the recursive Depends of the package (or is essential). A
#    library that is linked but missing from Depends fails here, as it would on a clean machine.
# 5. The installed binary runs the main job: `ncclsmoke launch -n 4` exits 0 with a pass verdict.
# 6. Without libfabric and Open MPI (their files hidden in a private mount namespace) the binary
#    still starts and passes the main job, and a run asking for the fabric and mpi transports
#    reports both skipped, naming the library it could not load.
# A missing tool (dpkg-shlibdeps, cpack, unshare) fails the test, naming the package to install.
set -uo pipefail
build=$1 version=$2
need() { command -v "$1" >/dev/null || { echo "FAIL: $1 is not installed ($2; scripts/install-deps.sh test installs it)"; exit 1; }; }
need dpkg-shlibdeps dpkg-dev
need cpack cmake
need file file
need unshare util-linux
work=$(mktemp -d /tmp/ncclsmoke-package.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# 1. the file
if ! (cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1); then
  cat "$work/cpack.log"; echo "FAIL: cpack -G DEB failed in $build"; exit 1
fi
deb="$work/out/ncclsmoke_${version}_amd64.deb"
[ -f "$deb" ] || { ls "$work/out"; echo "FAIL: no $deb"; exit 1; }
echo "ok: $(basename "$deb"), $(stat -c %s "$deb") bytes"

# 2. Depends
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
echo "Suggests: $(dpkg-deb -f "$deb" Suggests)"
[ -n "$depends" ] || bad "the package has no Depends (CPACK_DEBIAN_PACKAGE_SHLIBDEPS off?)"
mapfile -t dep_names < <(tr ',|' '\n\n' <<<"$depends" | sed 's/(.*)//; s/[[:space:]]//g' | sed '/^$/d' | sort -u)
for p in "${dep_names[@]}"; do
  case "$p" in
    *-dev|*nccl*|*cuda*|*cudart*) bad "Depends names '$p': not a run-time library the binary needs" ;;
  esac
  apt-cache show "$p" >/dev/null 2>&1 || bad "Depends names '$p', which no apt source has"
done
for lib in libfabric1 libopenmpi3; do
  grep -qx "$lib" <<<"$(printf '%s\n' "${dep_names[@]}")" &&
    bad "Depends names $lib: the binary opens it at run time, so it is only recommended"
  grep -q "\b$lib\b" <<<"$(dpkg-deb -f "$deb" Recommends)" || bad "Recommends lacks $lib"
done
for lib in libcurl4 libsqlite3-0 libpq5 libc6; do
  # A here-string, not `printf | grep -q`: grep -q exits at the first match, printf then dies of
  # SIGPIPE and pipefail turns the match into a failure (CI saw "Depends lacks libsqlite3-0").
  grep -qx "$lib" <<<"$(printf '%s\n' "${dep_names[@]}")" || bad "Depends lacks $lib (the binary links it)"
done

# 3. install into an empty root with dpkg's own database
r="$work/root"
mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$r/var/lib/dpkg/triggers"
: >"$r/var/lib/dpkg/status"
# The root has no libraries of its own: dependencies are checked against the closure below.
if ! dpkg --root="$r" --force-depends --log=/dev/null -i "$deb" >"$work/dpkg.log" 2>&1; then
  cat "$work/dpkg.log"; bad "dpkg --root -i failed"
fi
grep -q "install ok installed" <<<"$(dpkg-query --root="$r" -W -f='${Status}\n' ncclsmoke 2>/dev/null)" ||
  bad "dpkg --root does not list ncclsmoke as installed"
bin="$r/usr/bin/ncclsmoke"
[ -x "$bin" ] || bad "the package does not install /usr/bin/ncclsmoke"
outside=$(dpkg-deb -c "$deb" | awk '{print $6}' | grep -v '^\./usr/' | grep -v '^\./$' || true)
[ -z "$outside" ] && echo "ok: files only under /usr" || bad "files outside /usr: $outside"

# 4. the shared-library closure against Depends
closure="$work/closure"
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances "${dep_names[@]}" 2>/dev/null |
  sed -n 's/^\([^ <][^ :]*\).*/\1/p; s/^<\([^>]*\)>$/\1/p; s/^ *\(Pre\)\{0,1\}Depends: <\{0,1\}\([^ <>]*\).*/\2/p' | sort -u >"$closure"
dpkg-query -W -f='${Package} ${Essential}\n' | awk '$2 == "yes" {print $1}' >>"$closure"
ldd_out=$(ldd "$bin" 2>&1)
if grep -qE "libfabric|libmpi|libopen-(pal|rte)|libpmix" <<<"$ldd_out"; then
  bad "the binary links libfabric or Open MPI: $(grep -E 'libfabric|libmpi|libopen-|libpmix' <<<"$ldd_out" | tr '\n' ' ')"
fi
if grep -q "not found" <<<"$ldd_out"; then bad "unresolved libraries: $(grep 'not found' <<<"$ldd_out" | tr '\n' ' ')"; fi
checked=0
while read -r path; do
  real=$(readlink -f "$path")
  # Merged /usr: ldd may name /lib/... where dpkg registered /usr/lib/... (or the other way).
  owner=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$real" 2>/dev/null || dpkg -S "/usr$path" 2>/dev/null ||
    dpkg -S "${path#/usr}" 2>/dev/null)
  owner=${owner%%:*}
  [ -n "$owner" ] || { bad "$path is owned by no package (built by hand?)"; continue; }
  # Depends may name a virtual package (libspdlog1.10-fmt9) that the owner provides.
  provides=$(dpkg-query -W -f='${Provides}' "$owner" 2>/dev/null | tr ',' '\n' | sed 's/(.*)//; s/[[:space:]]//g')
  if ! grep -qx "$owner" "$closure" && ! grep -qxF -f <(printf '%s\n' $provides) "$closure" 2>/dev/null; then
    bad "$path comes from $owner, which Depends does not pull in"
  fi
  checked=$((checked + 1))
done < <(awk '/=>/ {print $3} !/=>/ && $1 ~ /^\// {print $1}' <<<"$ldd_out" | sort -u)
echo "ok: $checked shared libraries, each from a package in the Depends closure"

# 5. the main job from the installed binary
if ! (cd "$work" && timeout 120 "$bin" launch -n 4 --out-dir "$work/smoke" >"$work/launch.log" 2>&1); then
  tail -20 "$work/launch.log"; bad "the installed ncclsmoke launch -n 4 failed"
fi
status=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' \
  "$work/smoke/verdict.json" 2>/dev/null)
[ "$status" = pass ] && echo "ok: installed binary's launch -n 4: verdict pass" ||
  bad "the installed binary's verdict is '${status:-missing}', not pass"
# 6. without libfabric and Open MPI: each of their files is covered by an empty one, in a mount
# namespace of this test's own (nothing changes outside it).
hide=$(ls /usr/lib/x86_64-linux-gnu/libfabric.so* /usr/lib/x86_64-linux-gnu/libmpi.so* \
  /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so* 2>/dev/null | tr '\n' ' ')
cat >"$work/without.sh" <<'INNER'
set -u
bin=$1 work=$2; shift 2
: >"$work/empty"
for f in "$@"; do mount --bind "$work/empty" "$f" || { echo "cannot hide $f"; exit 90; }; done
timeout 120 "$bin" launch -n 4 --out-dir "$work/bare" >"$work/bare.log" 2>&1 || exit 91
# One rank that the mpi transport takes for mpirun's (OMPI_COMM_WORLD_*): its MPI child must say
# it cannot load libmpi.
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0 timeout 120 "$bin" run --launcher flags --rank 0 \
  --world-size 1 --master-addr 127.0.0.1 --master-port "$port" --transports socket,fabric,mpi \
  --max-bytes 1M --out-dir "$work/bare2" >"$work/bare2.log" 2>&1
exit 0
INNER
# shellcheck disable=SC2086
unshare -m --propagation private bash "$work/without.sh" "$bin" "$work" $hide
rc=$?
if [ $rc != 0 ]; then
  tail -20 "$work/bare.log" 2>/dev/null; bad "without libfabric and Open MPI the installed binary failed (exit $rc)"
else
  /usr/bin/python3 - "$work/bare/verdict.json" "$work/bare2/verdict.json" <<'PY' || bad "without libfabric and Open MPI: the verdicts above are not what they should be"
import json, sys
ok = True
main = json.load(open(sys.argv[1]))
if main["verdict"] != "pass":
    print(f"FAIL: launch -n 4 verdict {main['verdict']!r}, not pass"); ok = False
else:
    print("ok: without libfabric and Open MPI, launch -n 4: verdict pass")
both = json.load(open(sys.argv[2]))
phases = {p["name"]: p for p in both.get("phases", [])}
for name, lib in (("socket", None), ("fabric", "libfabric.so.1"), ("mpi", "libmpi.so.40")):
    p = phases.get("transport:" + name)
    if p is None:
        print(f"FAIL: no transport:{name} phase in {sys.argv[2]}"); ok = False; continue
    want = "pass" if lib is None else "skipped"
    if p.get("status") != want or (lib and lib not in p.get("detail", "")):
        print(f"FAIL: transport:{name} is {p.get('status')!r} ({p.get('detail')!r}); "
              f"want {want}{' naming ' + lib if lib else ''}"); ok = False
    else:
        print(f"ok: transport:{name} {p['status']}: {p.get('detail', '')[:160]}")
sys.exit(0 if ok else 1)
PY
fi
exit $fail
