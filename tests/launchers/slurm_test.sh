#!/usr/bin/env bash
# ncclsmoke under a real Slurm (Debian's slurm-wlm 22.05), on a private single-node cluster that
# scripts/slurm-local.sh starts in a temp dir. Slurm gives tasks no MASTER_ADDR/MASTER_PORT, so
# the world must come from Slurm's own variables (master: first host of SLURM_STEP_NODELIST; port:
# derived from SLURM_JOB_ID), and two jobs on one node must not meet in one store.
#   (a) srun -n 4 with MASTER_ADDR/MASTER_PORT unset: exit 0, pass, 4 ranks, world from Slurm.
#   (b) two 4-task jobs at once on the one node (their tasks meet at a barrier before exec, so
#       they truly overlap): both pass, on different ports, each verdict naming its own job id.
# Usage: slurm_test.sh [--binary] NCCLSMOKE_BINARY   Exit: 0 pass, 1 fail, 77 skipped (no Slurm, not root).
set -uo pipefail

[[ ${1:-} == --binary ]] && shift  # the form the other launcher tests take
bin=${1:?usage: slurm_test.sh [--binary] NCCLSMOKE_BINARY}
bin=$(readlink -f "$bin")
# shellcheck source=tests/launchers/slurm_cluster.sh
source "$(dirname "$0")/slurm_cluster.sh" ncclsmoke-slurm-test
cat "$tmp/up.out"
node=$(hostname -s)

# Small sweep, short deadlines: the test is about the world and the store, not bandwidth.
run_flags=(run --transports socket --min-bytes 64K --max-bytes 256K --iters 2 --warmup-iters 0
           --connect-timeout 20 --join-timeout 20 --timeout 60 --quiet)
srun_flags=(-N 1 -n 4 --mpi=none --kill-on-bad-exit=1 --time=2 --job-name=ncclsmoke-test)

# Checks one case's verdicts. Args: case name, out dir, expected job id (or ""), expected host.
check() {
  "$py" - "$@" <<'EOF'
import json, os, socket, sys
name, out, job, node = sys.argv[1:5]
errors = []
path = os.path.join(out, "verdict.json")
try:
    v = json.load(open(path))
except Exception as e:
    leftovers = sorted(os.listdir(out)) if os.path.isdir(out) else []
    print(f"  {name}: no rank-0 verdict at {path} ({e}); files: {leftovers}")
    shown = [f for f in leftovers if f.endswith(".json")]
    if len(shown) > 2:
        print(f"    ({len(shown) - 2} more local verdicts not shown)")
    for f in shown[:2]:
        if True:
            try:
                lv = json.load(open(os.path.join(out, f)))
                print(f"    {f}: {lv.get('verdict')} world={lv.get('world')} findings="
                      f"{[(x.get('code'), x.get('message')) for x in lv.get('findings', [])]}")
            except Exception as e2:
                print(f"    {f}: unreadable ({e2})")
    sys.exit(1)
w = v.get("world", {})
print(f"  {name}: verdict={v.get('verdict')} ranks={len(v.get('ranks', []))} world={json.dumps(w)}")
if v.get("verdict") != "pass":
    errors.append(f"verdict is {v.get('verdict')!r}, findings "
                  f"{[(x.get('code'), x.get('message')) for x in v.get('findings', [])]}")
if len(v.get("ranks", [])) != 4 or w.get("size") != 4:
    errors.append(f"expected 4 ranks, got ranks={len(v.get('ranks', []))} world.size={w.get('size')}")
if w.get("source") != "slurm":
    errors.append(f"world.source is {w.get('source')!r}, expected 'slurm'")
# Master: the first host of the step's nodelist (here the one node), by name or by address.
addrs = {node}
try:
    addrs |= {a[4][0] for a in socket.getaddrinfo(node, None)}
except OSError:
    pass
if w.get("master_addr") not in addrs:
    errors.append(f"world.master_addr {w.get('master_addr')!r} is not the nodelist's host {node} {sorted(addrs)}")
port = w.get("master_port", 0)
if not (1024 <= port <= 65535) or port == 29500:
    errors.append(f"world.master_port {port} is not a port derived from the job id (29500 is the fixed default)")
# Where each field came from: a per-field sources map in the world (any key holding a dict with
# master_addr and master_port), naming the nodelist and the job id.
srcs = next((x for k, x in w.items() if isinstance(x, dict) and "master_addr" in x and "master_port" in x), None)
if srcs is None:
    errors.append("world has no per-field sources map (e.g. world.sources = {master_addr: "
                  "'SLURM_STEP_NODELIST', master_port: 'SLURM_JOB_ID'}), so it cannot say where master came from")
else:
    print(f"  {name}: master_addr from {srcs['master_addr']!r}, master_port from {srcs['master_port']!r}")
    if "NODELIST" not in str(srcs["master_addr"]):
        errors.append(f"master_addr came from {srcs['master_addr']!r}, not the nodelist")
    if "SLURM_JOB_ID" not in str(srcs["master_port"]) and "JOB_ID" not in str(srcs["master_port"]).upper():
        errors.append(f"master_port came from {srcs['master_port']!r}, not the job id")
jid = w.get("job_id", "")
print(f"  {name}: job_id={jid!r} (from {w.get('job_id_source')!r}), expected SLURM_JOB_ID={job or '?'}")
if job and jid != job and not jid.startswith(job + "."):
    errors.append(f"world.job_id {jid!r} is not this job's SLURM_JOB_ID {job} (or {job}.<step>)")
store = w.get("store")
if store is not None:
    print(f"  {name}: store={json.dumps(store)}")
    if store.get("port") != port:
        errors.append(f"store.port {store.get('port')} differs from world.master_port {port}")
else:
    errors.append("world.store is absent (expected host/port/hosted_by/dialect/era/key_prefix)")
for e in errors:
    print(f"  {name}: FAIL: {e}")
print(f"PORT {port}")
sys.exit(1 if errors else 0)
EOF
}

failed=0

# --- (a) one job, 4 tasks, no MASTER_ADDR/MASTER_PORT anywhere -------------------------------
d1=$tmp/a
mkdir -p "$d1"
t0=$(date +%s.%N)
# shellcheck disable=SC2016  # expanded by the task's shell, not here
timeout -k 5 90 env -u MASTER_ADDR -u MASTER_PORT srun "${srun_flags[@]}" \
  sh -c '[ "$SLURM_PROCID" = 0 ] && echo "$SLURM_JOB_ID" >"$0/slurm_job_id"; shift; exec "$@"' "$d1" \
  _ "$bin" "${run_flags[@]}" --out-dir "$d1" >"$d1/srun.log" 2>&1
rc_a=$?
t1=$(date +%s.%N)
echo "(a) srun -n 4 exited $rc_a in $("$py" -c "print(f'{$t1 - $t0:.2f}')") s; srun output:"
sed 's/^/    /' "$d1/srun.log" | tail -n 20
job_a=$(cat "$d1/slurm_job_id" 2>/dev/null || true)
out_a=$(check "(a)" "$d1" "$job_a" "$node")
rc_ca=$?
echo "$out_a" | grep -v '^PORT '
if ((rc_a == 0 && rc_ca == 0)); then
  echo "CASE a (srun -n 4, no MASTER_*): PASS job $job_a"
else
  echo "CASE a (srun -n 4, no MASTER_*): FAIL (srun exit $rc_a, verdict check exit $rc_ca)"
  failed=1
fi

# --- (b) two jobs at once on the one node ------------------------------------------------------
bar=$tmp/barrier
mkdir -p "$bar"
# Every task of both jobs checks in and waits (at most 30 s) for all 8, then execs ncclsmoke: the
# two stores and both jobs' ranks are certainly alive at the same time.
# shellcheck disable=SC2016  # expanded by each task's shell
barrier='d=$0; b=$1; shift
[ "$SLURM_PROCID" = 0 ] && echo "$SLURM_JOB_ID" >"$d/slurm_job_id"
touch "$b/$SLURM_JOB_ID.$SLURM_PROCID"
i=0; while [ "$(ls "$b" | wc -l)" -lt 8 ]; do
  i=$((i+1)); [ $i -gt 300 ] && { echo "barrier: job $SLURM_JOB_ID task $SLURM_PROCID saw only $(ls "$b" | wc -l)/8 tasks of the two jobs after 30 s: they did not run at once" >&2; exit 3; }
  sleep 0.1; done
exec "$@"'
pids=()
for j in b1 b2; do
  mkdir -p "$tmp/$j"
  timeout -k 5 90 env -u MASTER_ADDR -u MASTER_PORT srun "${srun_flags[@]}" \
    sh -c "$barrier" "$tmp/$j" "$bar" "$bin" "${run_flags[@]}" --out-dir "$tmp/$j" \
    >"$tmp/$j/srun.log" 2>&1 &
  pids+=($!)
done
rcs=()
for p in "${pids[@]}"; do wait "$p"; rcs+=($?); done
ports=()
case_b_ok=1
for i in 0 1; do
  j=b$((i + 1))
  echo "(b) job $j: srun exited ${rcs[$i]}; srun output:"
  sed 's/^/    /' "$tmp/$j/srun.log" | tail -n 20
  jid=$(cat "$tmp/$j/slurm_job_id" 2>/dev/null || true)
  out=$(check "(b) $j" "$tmp/$j" "$jid" "$node")
  rc=$?
  echo "$out" | grep -v '^PORT '
  ports+=("$(echo "$out" | sed -n 's/^PORT //p')")
  ((rcs[i] == 0 && rc == 0)) || case_b_ok=0
done
if [[ -n ${ports[0]} && ${ports[0]} == "${ports[1]}" ]]; then
  echo "(b) FAIL: both jobs used port ${ports[0]}: their ranks can meet in one store"
  case_b_ok=0
fi
jb1=$(cat "$tmp/b1/slurm_job_id" 2>/dev/null || true)
jb2=$(cat "$tmp/b2/slurm_job_id" 2>/dev/null || true)
if ((case_b_ok)); then
  echo "CASE b (two jobs at once): PASS jobs $jb1/$jb2 on ports ${ports[0]}/${ports[1]}"
else
  echo "CASE b (two jobs at once): FAIL (jobs '$jb1'/'$jb2', srun exits ${rcs[*]}, ports '${ports[0]}'/'${ports[1]}')"
  failed=1
fi

((failed)) && { echo "slurm_test: FAIL"; exit 1; }
echo "slurm_test: PASS"
