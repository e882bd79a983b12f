#!/usr/bin/env bash
# The Debian package, installed into a clean root and run from there.
#   package_test.sh BUILD_DIR VERSION
# 1. `cpack -G DEB` in BUILD_DIR (the binary is already built) gives ncclsmoke_VERSION_amd64.deb.
# 2. Its Depends names run-time libraries only: no -dev package, nothing of CUDA or NCCL (dlopened,
#    so only Suggests), and every package it names exists in this machine's apt sources.
# 3. `dpkg --root` installs it into an empty root (its own dpkg database, nothing else): the package
#    carries /usr/bin/ncclsmoke and nothing outside /usr.
# 4. The shared-library closure of that binary (ldd) is covered by Depends: every library resolves,
#    and the package owning it is in the recursive Depends of the package (or is essential). A
#    library that is linked but missing from Depends fails here, as it would on a clean machine.
# 5. The installed binary runs the main job: `ncclsmoke launch -n 4` exits 0 with a pass verdict.
# Exits 77 (skipped) when dpkg-shlibdeps or cpack is absent.
set -uo pipefail
build=$1 version=$2
command -v dpkg-shlibdeps >/dev/null || { echo "SKIP: dpkg-shlibdeps is not installed (dpkg-dev)"; exit 77; }
command -v cpack >/dev/null || { echo "SKIP: cpack is not installed (cmake)"; exit 77; }
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
for lib in libfabric1 libopenmpi3 libcurl4 libsqlite3-0 libpq5 libc6; do
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
exit $fail
