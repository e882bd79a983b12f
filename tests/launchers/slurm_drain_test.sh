#!/usr/bin/env bash
# `run --slurm-drain` under a real Slurm (Debian's slurm-wlm 22.05; a private single-node cluster
# from scripts/slurm-local.sh). A drained node takes no new job, so everything runs the way the
# README's sbatch recipe does: the steps of one allocation (salloc -N1 -n2; steps of a running job
# still start on a node that is being drained), plus a run on the node outside any job, as a
# HealthCheckProgram would.
#   (a) failing gate: rank 1 freezes in the sweep (NCCLSMOKE_TEST_PAUSE_AT=sweep): the run fails
#       with PEER_STALLED naming the node; rank 0 drains it: `scontrol show node` shows DRAIN and
#       Reason "ncclsmoke PEER_STALLED run <run id>"; the verdict's slurm-drain phase says so;
#       suspects.txt names the node.
#   (b) passing run (a step of the same allocation): resumes the node (no DRAIN any more), and
#       the verdict's slurm-drain phase says "resumed".
#   (c) someone else's drain (Reason "ops: bad DIMM"): a passing run leaves it drained, reason
#       and all.
#   (d) a drain of ncclsmoke's, resumed by a passing 1-rank run on the node outside any job
#       (--node-name as a HealthCheckProgram would give it).
#   (e) the drain budget (--slurm-drain-budget 1), counted across runs: the cluster has two more
#       nodes that no slurmd serves (NCCLSMOKE_SLURM_EXTRA_NODES: DOWN, but scontrol drains and
#       lists them like any node). Two failing 2-rank runs outside a job, each with its frozen
#       rank on another of them (--node-name): the first drains fake-a; the second names fake-b
#       but leaves it in service, `scontrol show node` shows no DRAIN on it, and the verdict's
#       slurm-drain phase reads degraded and says the budget is spent and who holds it.
# Bounded (each step under `timeout`); the node is resumed at the end whatever happened.
# Usage: slurm_drain_test.sh [--binary] NCCLSMOKE_BINARY   Exit: 0 pass, 1 fail, 77 skipped.
set -uo pipefail

[[ ${1:-} == --binary ]] && shift
bin=${1:?usage: slurm_drain_test.sh [--binary] NCCLSMOKE_BINARY}
bin=$(readlink -f "$bin")
# Two nodes besides the real one, for the budget's case (e).
export NCCLSMOKE_SLURM_EXTRA_NODES="fake-a fake-b"
# shellcheck source=tests/launchers/slurm_cluster.sh
source "$(dirname "$0")/slurm_cluster.sh" ncclsmoke-slurm-drain
cat "$tmp/up.out"
node=$(hostname -s)
# The node back to service whatever happened (before slurm_cluster.sh's cleanup stops Slurm).
restore() { timeout 10 scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true; }
trap 'restore; cleanup' EXIT

failed=0
fail() { echo "FAIL: $*"; failed=1; }
node_line() { timeout 10 scontrol show node -o "$node" 2>&1; }
state_of() { node_line | grep -o 'State=[^ ]*' | head -1; }
reason_of() { node_line | sed -n 's/.* Reason=\(.*\)$/\1/p' | sed 's/ \[[^]]*\]$//'; }
phase_detail() {  # verdict.json -> the slurm-drain phase as "status: detail"
  "$py" -c 'import json,sys
v=json.load(open(sys.argv[1]))
p=[p for p in v["phases"] if p["name"]=="slurm-drain"]
print(p[0]["status"] + ": " + p[0]["detail"] if p else "none")' "$1" 2>&1
}

# The steps, run inside one allocation (salloc runs this on the submit host, which is the node).
cat >"$tmp/steps.sh" <<'EOF'
#!/usr/bin/env bash
# $1 = binary, $2 = work dir. Each step writes $2/<case>/rc.
set -u
bin=$1 work=$2
run=(run --transports socket --connect-timeout 20 --join-timeout 20 --mesh-timeout 5
     --pair-timeout 2 --op-timeout 4 --transport-timeout 20 --timeout 45 --slurm-drain)
step() {  # case-name pause-rank [sweep flags...]
  local c=$1 victim=$2; shift 2
  mkdir -p "$work/$c"
  timeout -k 5 70 srun -N1 -n2 --mpi=none --kill-on-bad-exit=1 --job-name="ncclsmoke-$c" \
    sh -c 'if [ "$SLURM_PROCID" = "$0" ]; then export NCCLSMOKE_TEST_PAUSE_AT=sweep; fi; exec "$@"' \
    "$victim" "$bin" "${run[@]}" --out-dir "$work/$c" "$@" >"$work/$c/srun.log" 2>&1
  echo $? >"$work/$c/rc"
}
wait_for() { local i; for ((i = 0; i < 300; i++)); do [[ -e $1 ]] && return 0; sleep 0.1; done; return 1; }
echo "allocation $SLURM_JOB_ID on $SLURM_JOB_NODELIST" >"$work/alloc"
# (a) failing: rank 1 freezes 0.3 s into a long sweep.
step a 1 --min-bytes 64M --max-bytes 64M --iters 400 --warmup-iters 1
touch "$work/a.done"; wait_for "$work/b.go" || exit 3
# (b) passing: resumes the node ncclsmoke drained.
step b none --min-bytes 64K --max-bytes 256K --iters 2 --warmup-iters 0
touch "$work/b.done"; wait_for "$work/c.go" || exit 3
# (c) passing, the node drained by someone else: left as it is.
step c none --min-bytes 64K --max-bytes 256K --iters 2 --warmup-iters 0
touch "$work/c.done"
EOF
chmod +x "$tmp/steps.sh"

w=$tmp/w
mkdir -p "$w"
timeout -k 5 240 salloc -N1 -n2 --time=5 --job-name=ncclsmoke-drain-test \
  "$tmp/steps.sh" "$bin" "$w" >"$tmp/salloc.log" 2>&1 &
salloc_pid=$!
wait_file() { local i; for ((i = 0; i < ${2:-900}; i++)); do [[ -e $1 ]] && return 0; kill -0 $salloc_pid 2>/dev/null || return 1; sleep 0.1; done; return 1; }

# --- (a) ------------------------------------------------------------------------------------------
if ! wait_file "$w/a.done" 1200; then
  fail "(a) the failing step never finished; salloc log:"; sed 's/^/    /' "$tmp/salloc.log" | tail -20
else
  cat "$w/alloc" 2>/dev/null
  rc=$(cat "$w/a/rc")
  echo "(a) failing step: srun exit $rc; $(state_of); Reason: $(reason_of)"
  run_id=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$w/a/verdict.json" 2>/dev/null)
  "$py" -c 'import json,sys
v=json.load(open(sys.argv[1])); print("    verdict", v["verdict"], [(f["code"], f["ranks"], f["hosts"]) for f in v["findings"]])' "$w/a/verdict.json" 2>&1
  echo "    slurm-drain phase: $(phase_detail "$w/a/verdict.json")"
  echo "    suspects.txt: $(cat "$w/a/suspects.txt" 2>&1)"
  [[ $(state_of) == *DRAIN* ]] || fail "(a) node $node is not drained: $(node_line)"
  [[ $(reason_of) == "ncclsmoke PEER_STALLED run $run_id" ]] ||
    fail "(a) drain reason is '$(reason_of)', expected 'ncclsmoke PEER_STALLED run $run_id'"
  [[ $(phase_detail "$w/a/verdict.json") == "pass: drained $node"* ]] ||
    fail "(a) the verdict does not record the drain: $(phase_detail "$w/a/verdict.json")"
  grep -q "^$node # .*PEER_STALLED.* run $run_id" "$w/a/suspects.txt" 2>/dev/null ||
    fail "(a) suspects.txt does not name $node"
  grep -q "slurm-drain: drained $node" "$w/a/srun.log" || fail "(a) the log does not say the node was drained"
fi
touch "$w/b.go"

# --- (b) ------------------------------------------------------------------------------------------
if ! wait_file "$w/b.done" 900; then
  fail "(b) the passing step never finished"; sed 's/^/    /' "$tmp/salloc.log" | tail -20
else
  echo "(b) passing step: srun exit $(cat "$w/b/rc"); $(state_of); slurm-drain phase: $(phase_detail "$w/b/verdict.json")"
  [[ $(cat "$w/b/rc") == 0 ]] || fail "(b) the passing step exited $(cat "$w/b/rc"): $(tail -5 "$w/b/srun.log")"
  [[ $(state_of) != *DRAIN* ]] || fail "(b) node $node still drained: $(node_line)"
  [[ $(phase_detail "$w/b/verdict.json") == "pass: resumed $node"* ]] ||
    fail "(b) the verdict does not record the resume"
  [[ ! -s $w/b/suspects.txt && -e $w/b/suspects.txt ]] || fail "(b) a passing run's suspects.txt is not empty"
fi

# --- (c) ------------------------------------------------------------------------------------------
timeout 10 scontrol update NodeName="$node" State=DRAIN Reason="ops: bad DIMM" || fail "(c) could not drain for the test"
touch "$w/c.go"
if ! wait_file "$w/c.done" 900; then
  fail "(c) the step never finished"; sed 's/^/    /' "$tmp/salloc.log" | tail -20
else
  echo "(c) passing step on a node drained by ops: srun exit $(cat "$w/c/rc"); $(state_of); Reason: $(reason_of); phase: $(phase_detail "$w/c/verdict.json")"
  [[ $(state_of) == *DRAIN* && $(reason_of) == "ops: bad DIMM" ]] ||
    fail "(c) someone else's drain was touched: $(node_line)"
  [[ $(phase_detail "$w/c/verdict.json") == *"kept $node"* ]] || fail "(c) the verdict does not say the drain was kept"
fi
wait $salloc_pid 2>/dev/null

# --- (d) a passing run outside any job (HealthCheckProgram style) resumes ncclsmoke's drain -------
timeout 10 scontrol update NodeName="$node" State=DRAIN Reason="ncclsmoke SLOW_HOST run earlier" ||
  fail "(d) could not drain for the test"
mkdir -p "$w/d"
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
timeout -k 5 60 "$bin" run --launcher flags --rank 0 --world-size 1 --master-addr 127.0.0.1 \
  --master-port "$port" --node-name "$node" --transports socket --min-bytes 64K --max-bytes 64K \
  --iters 2 --warmup-iters 0 --timeout 30 --quiet --slurm-drain --out-dir "$w/d" >"$w/d/log" 2>&1
rc=$?
echo "(d) 1-rank run on the node outside a job: exit $rc; $(state_of); phase: $(phase_detail "$w/d/verdict.json")"
[[ $rc == 0 && $(state_of) != *DRAIN* ]] || fail "(d) ncclsmoke's drain was not resumed: $(node_line); $(tail -3 "$w/d/log")"

# --- (e) the drain budget, across runs --------------------------------------------------------
# One failing run: rank 1 stands for node $2 and freezes in the sweep; rank 0 is on the real node.
budget_run() {  # case-dir frozen-node
  local dir=$w/$1 victim_node=$2 port pid0 pid1
  mkdir -p "$dir"
  port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  local common=(run --launcher flags --world-size 2 --master-addr 127.0.0.1 --master-port "$port"
                --transports socket --min-bytes 64M --max-bytes 64M --iters 400 --warmup-iters 1
                --connect-timeout 20 --join-timeout 20 --mesh-timeout 5 --pair-timeout 2
                --op-timeout 4 --transport-timeout 20 --timeout 45 --pairwise=never --quiet
                --slurm-drain --slurm-drain-budget 1)
  # The budget's scope is the job's partition, as a step of a job in partition test reads it.
  SLURM_JOB_PARTITION=test timeout -k 5 70 "$bin" "${common[@]}" --rank 0 --node-name "$node" \
    --out-dir "$dir" >"$dir/rank0.log" 2>&1 &
  pid0=$!
  NCCLSMOKE_TEST_PAUSE_AT=sweep timeout -k 5 70 "$bin" "${common[@]}" --rank 1 --node-name "$victim_node" \
    --out-dir "$dir/r1" >"$dir/rank1.log" 2>&1 &
  pid1=$!
  wait $pid0
  echo $? >"$dir/rc"
  # The frozen rank never ends on its own.
  { kill -KILL $pid1; pkill -KILL -f -- "--out-dir $dir/r1"; wait $pid1; } 2>/dev/null
}
node_state() { timeout 10 scontrol show node -o "$1" 2>&1 | grep -o 'State=[^ ]*' | head -1; }
budget_run e1 fake-a
echo "(e1) failing run, frozen rank on fake-a: exit $(cat "$w/e1/rc"); fake-a $(node_state fake-a); phase: $(phase_detail "$w/e1/verdict.json")"
echo "    suspects.txt: $(cat "$w/e1/suspects.txt" 2>&1)"
[[ $(node_state fake-a) == *DRAIN* ]] || fail "(e1) fake-a is not drained: $(timeout 10 scontrol show node -o fake-a)"
[[ $(phase_detail "$w/e1/verdict.json") == "pass: drained fake-a"* ]] ||
  fail "(e1) the verdict does not record fake-a's drain: $(phase_detail "$w/e1/verdict.json"); $(tail -3 "$w/e1/rank0.log")"
budget_run e2 fake-b
echo "(e2) failing run, frozen rank on fake-b: exit $(cat "$w/e2/rc"); fake-b $(node_state fake-b); phase: $(phase_detail "$w/e2/verdict.json")"
echo "    suspects.txt: $(cat "$w/e2/suspects.txt" 2>&1)"
grep -q "^fake-b # " "$w/e2/suspects.txt" 2>/dev/null || fail "(e2) suspects.txt does not name fake-b"
[[ $(node_state fake-b) != *DRAIN* ]] || fail "(e2) fake-b was drained past the budget: $(timeout 10 scontrol show node -o fake-b)"
[[ $(node_state fake-a) == *DRAIN* ]] || fail "(e2) fake-a's drain is gone"
detail=$(phase_detail "$w/e2/verdict.json")
[[ $detail == "degraded: not drained fake-b: the drain budget is spent (--slurm-drain-budget 1: 1 of the 3 nodes of partition test; ncclsmoke holds 1 drained: fake-a)"* ]] ||
  fail "(e2) the verdict does not say why fake-b stays in service: $detail"
grep -q "slurm-drain: not drained fake-b: the drain budget is spent" "$w/e2/rank0.log" ||
  fail "(e2) the log does not say fake-b was held back: $(grep slurm-drain "$w/e2/rank0.log")"

restore
echo "restored: $(state_of)"
if ((failed)); then echo "slurm_drain: FAIL"; exit 1; fi
echo "slurm_drain: PASS"
