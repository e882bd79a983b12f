#!/usr/bin/env bash
# Never a silent pass: with --out-dir on a full filesystem, `run` and `launch` exit 8
# (kExitVerdictNotWritten) and say which path could not be written; a healthy directory still
# exits 0. The full filesystem is a 64 KiB tmpfs, filled up, inside a private mount namespace
# (unshare -m), so nothing is mounted on the host. Needs root; skipped (77) otherwise.
set -uo pipefail
bin=${1:?usage: verdict_disk_full_test.sh NCCLSMOKE_BINARY}
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
  echo "SKIP: needs root and unshare"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/inner.sh" <<'INNER'
set -uo pipefail
bin=$1 work=$2
fails=0
check() {  # check NAME WANT_CODE GOT_CODE LOG PATTERN
  if [ "$3" = "$2" ] && grep -q -- "$5" "$4"; then echo "PASS $1 (exit $3)";
  else echo "FAIL $1: exit $3 (want $2), output:"; sed 's/^/  | /' "$4"; fails=$((fails + 1)); fi
}
# Each `run`'s rank 0 serves its store on a port the kernel just handed out on 127.0.0.1, never the
# default 29500: tests run in parallel and share this machine's ports (the mount namespace does not
# separate them). `launch` on one node picks a free port itself.
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p "$work/full" "$work/ok"
mount -t tmpfs -o size=64k tmpfs "$work/full" || { echo "SKIP: cannot mount tmpfs"; exit 77; }
mkdir -p "$work/full/out"
dd if=/dev/zero of="$work/full/filler" bs=4k count=1000 >/dev/null 2>&1 || true
timeout 60 "$bin" run --launcher flags --rank 0 --world-size 1 --master-addr 127.0.0.1 \
  --master-port "$(free_port)" --store-bind 127.0.0.1 --transports none \
  --out-dir "$work/full/out" >"$work/run.log" 2>&1
check "run, full disk" 8 $? "$work/run.log" "was NOT written to $work/full/out/verdict"
timeout 60 "$bin" run --launcher flags --rank 0 --world-size 1 --master-addr 127.0.0.1 \
  --master-port "$(free_port)" --store-bind 127.0.0.1 --transports none \
  --out-dir "$work/ok" >"$work/ok.log" 2>&1
check "run, healthy disk" 0 $? "$work/ok.log" "ncclsmoke pass"
timeout 120 "$bin" launch -n 2 --transports none --out-dir "$work/full/out" >"$work/launch.log" 2>&1
check "launch, full disk" 8 $? "$work/launch.log" "could not write its verdict"
umount "$work/full"
exit $((fails > 0))
INNER
unshare -m --propagation private bash "$work/inner.sh" "$bin" "$work"
rc=$?
[ $rc = 0 ] && echo "verdict_disk_full: PASS" || echo "verdict_disk_full: FAIL ($rc)"
exit $rc
