#!/usr/bin/env bash
# A rank that stops on its own error says so first: rank 0's global verdict carries that rank's
# own finding (its code and hint), not a PEER_LOST guess. Cases (4 ranks on loopback):
#   world_size  rank 2 alone has WORLD_SIZE 5          -> WORLD_MISMATCH naming rank 2
#   port_range  rank 3 alone gets a mesh port range whose only port is taken -> its mesh error
set -uo pipefail
bin=${1:?usage: own_error_test.sh NCCLSMOKE_BINARY}
py=/usr/bin/python3
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
fails=0
run_case() {  # run_case NAME EXPECTED_CODE EXPECTED_RANK EXTRA_FOR_RANK EXTRA_ARGS...
  local name=$1 code=$2 bad=$3 extra_rank=$4
  shift 4
  local dir=$work/$name port
  mkdir -p "$dir"
  port=$(free_port)
  pids=()
  for r in 0 1 2 3; do
    local ws=4 args=()
    if [ "$r" = "$bad" ]; then read -r -a args <<<"$extra_rank"; fi
    [ "$name" = world_size ] && [ "$r" = "$bad" ] && ws=5 && args=()
    timeout 60 "$bin" run --launcher flags --rank "$r" --world-size "$ws" --master-addr 127.0.0.1 \
      --master-port "$port" --store-bind 127.0.0.1 --out-dir "$dir" --join-timeout 5 \
      --mesh-timeout 3 --transports none --quiet "${args[@]}" "$@" >"$dir/rank$r.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}" 2>/dev/null
  if "$py" - "$dir/verdict.json" "$code" "$bad" <<'PY'
import json, sys
path, code, bad = sys.argv[1], sys.argv[2], int(sys.argv[3])
v = json.load(open(path))
found = [(f["code"], f["ranks"]) for f in v["findings"]]
print("  findings:", found)
own = [f for f in v["findings"] if f["code"] == code and bad in f["ranks"]]
lost = [f for f in v["findings"] if f["code"] == "PEER_LOST" and bad in f["ranks"]]
ok = bool(own) and not lost and v["verdict"] == "fail"
print("  own finding:", bool(own), "| PEER_LOST about it:", bool(lost), "| verdict:", v["verdict"])
sys.exit(0 if ok else 1)
PY
  then echo "PASS $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
run_case world_size WORLD_MISMATCH 2 ""
# A one-port range whose port another socket holds: rank 3 cannot listen for the mesh.
blocker_port=$(free_port)
"$py" -c "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $blocker_port)); s.listen(); time.sleep(60)" &
blocker=$!
sleep 0.3
run_case port_range MESH_BLOCKED 3 "--mesh-port-range $blocker_port-$blocker_port"
kill "$blocker" 2>/dev/null
[ $fails = 0 ] && echo "own_error: PASS" || echo "own_error: FAIL ($fails)"
exit $((fails > 0))
