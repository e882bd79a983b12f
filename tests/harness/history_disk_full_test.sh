#!/usr/bin/env bash
# A history on a full filesystem: `history import` exits 7 (history unusable) with the "no space
# left on the history's filesystem (DIR)" hint instead of a bare "disk I/O error"; `publish` exits
# 6 and says where the verdict stays; once space is freed the next publish stores the run. The
# full filesystem is a 256 KiB tmpfs inside a private mount namespace (unshare -m), so nothing is
# mounted on the host. Needs root; skipped (77) otherwise.
set -uo pipefail
bin=${1:?usage: history_disk_full_test.sh NCCLSMOKE_BINARY}
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
# Each run's rank 0 serves its store on a port the kernel just handed out on 127.0.0.1, never the
# default 29500: tests run in parallel and share this machine's ports (the mount namespace does not
# separate them).
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p "$work/full"
mount -t tmpfs -o size=256k tmpfs "$work/full" || { echo "SKIP: cannot mount tmpfs"; exit 77; }
for i in 1 2; do
  mkdir -p "$work/ok$i"
  timeout 60 "$bin" run --launcher flags --rank 0 --world-size 1 --master-addr 127.0.0.1 \
    --master-port "$(free_port)" --store-bind 127.0.0.1 --transports none --quiet \
    --out-dir "$work/ok$i" >"$work/run$i.log" 2>&1
  [ -s "$work/ok$i/verdict.json" ] || { echo "FAIL: run $i wrote no verdict"; cat "$work/run$i.log"; umount "$work/full"; exit 1; }
done
db=$work/full/h.db
timeout 60 "$bin" history import --history "$db" "$work/ok1/verdict.json" >"$work/i1.log" 2>&1
check "import, space left" 0 $? "$work/i1.log" "1 run added"
dd if=/dev/zero of="$work/full/filler" bs=4k count=1000 >/dev/null 2>&1 || true
timeout 60 "$bin" history import --history "$db" "$work/ok2/verdict.json" >"$work/i2.log" 2>&1
check "import, full disk" 7 $? "$work/i2.log" "no space left on the history's filesystem ($work/full)"
timeout 60 "$bin" publish "$work/ok2/verdict.json" --history "$db" >"$work/p1.log" 2>&1
check "publish, full disk" 6 $? "$work/p1.log" "the verdict stays in $work/ok2/verdict.json"
rm -f "$work/full/filler"
timeout 60 "$bin" publish "$work/ok2/verdict.json" --history "$db" >"$work/p2.log" 2>&1
check "publish, space freed" 0 $? "$work/p2.log" "(2 runs)"
umount "$work/full"
exit $((fails > 0))
INNER
unshare -m --propagation private bash "$work/inner.sh" "$bin" "$work"
rc=$?
[ $rc = 0 ] && echo "history_disk_full: PASS" || echo "history_disk_full: FAIL ($rc)"
exit $rc
