#!/usr/bin/env bash
# A config error under a real Slurm keeps the world it could read. A real
# `srun -N1 --ntasks-per-node=2` with MASTER_PORT=tcp://10.0.0.1:29500 (a Kubernetes-style service
# link leaking into a Slurm job): SLURM_PROCID, SLURM_NTASKS and SLURM_JOB_ID are valid, so each
# task must write its own verdict.rank<N>.json (never verdict.invalid-config.<pid>.json) with
# reporting_rank N, world.size 2, world.source slurm, the job's id, and a CONFIG_INVALID finding
# naming MASTER_PORT; rank 0 also writes verdict.json; the log says "rank N", never "rank ?".
# Usage: slurm_config_error_test.sh [--binary] NCCLSMOKE_BINARY   Exit: 0 pass, 1 fail, 77 skipped.
set -uo pipefail

[[ ${1:-} == --binary ]] && shift
bin=${1:?usage: slurm_config_error_test.sh [--binary] NCCLSMOKE_BINARY}
bin=$(readlink -f "$bin")
# shellcheck source=tests/launchers/slurm_cluster.sh
source "$(dirname "$0")/slurm_cluster.sh" ncclsmoke-slurm-config

out=$tmp/out
mkdir -p "$out"
# Task 0 records the job id so the verdicts can be checked against it.
# shellcheck disable=SC2016  # expanded by the task's shell
timeout -k 5 90 env MASTER_PORT=tcp://10.0.0.1:29500 srun -N 1 --ntasks-per-node=2 --mpi=none \
  --time=2 --job-name=ncclsmoke-config-test \
  sh -c '[ "$SLURM_PROCID" = 0 ] && echo "$SLURM_JOB_ID" >"$0/slurm_job_id"; shift; exec "$@"' "$out" \
  _ "$bin" run --transports socket --timeout 30 --out-dir "$out" >"$tmp/srun.log" 2>&1
rc=$?
echo "srun exited $rc; output:"
sed 's/^/    /' "$tmp/srun.log" | tail -n 30

"$py" - "$out" "$tmp/srun.log" "$rc" <<'EOF'
import glob, json, os, sys
out, log_path, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
errors = []
files = sorted(os.listdir(out))
print(f"files: {files}")
job = open(os.path.join(out, "slurm_job_id")).read().strip() if "slurm_job_id" in files else ""
if not job:
    errors.append("task 0 did not record SLURM_JOB_ID (did srun start the tasks?)")
if glob.glob(os.path.join(out, "verdict.invalid-config.*.json")):
    errors.append("a verdict.invalid-config.<pid>.json was written though every rank was readable")
if rc == 0:
    errors.append("srun exited 0 for an invalid configuration")

def check(name, want_rank):
    path = os.path.join(out, name)
    try:
        v = json.load(open(path))
    except Exception as e:
        errors.append(f"{name}: missing or unreadable ({e})")
        return
    w = v.get("world", {})
    codes = [(f.get("code"), f.get("message", "")) for f in v.get("findings", [])]
    print(f"{name}: verdict={v.get('verdict')} reporting_rank={v.get('reporting_rank')} "
          f"world={json.dumps(w)} findings={codes}")
    if want_rank is not None and v.get("reporting_rank") != want_rank:
        errors.append(f"{name}: reporting_rank {v.get('reporting_rank')!r}, expected {want_rank}")
    if w.get("size") != 2:
        errors.append(f"{name}: world.size {w.get('size')!r}, expected 2 (SLURM_NTASKS)")
    if w.get("source") != "slurm":
        errors.append(f"{name}: world.source {w.get('source')!r}, expected 'slurm'")
    jid = w.get("job_id", "")
    if not job or not (jid == job or jid.startswith(job + ".")):
        errors.append(f"{name}: world.job_id {jid!r} is not the job's SLURM_JOB_ID {job!r} (or <id>.<step>)")
    if w.get("job_id_source") != "SLURM_JOB_ID":
        errors.append(f"{name}: world.job_id_source {w.get('job_id_source')!r}, expected 'SLURM_JOB_ID'")
    if not any(c == "CONFIG_INVALID" and "MASTER_PORT" in m for c, m in codes):
        errors.append(f"{name}: no CONFIG_INVALID finding naming MASTER_PORT")
    if v.get("verdict") == "pass":
        errors.append(f"{name}: verdict is pass for an invalid configuration")

check("verdict.rank0.json", 0)
check("verdict.rank1.json", 1)
check("verdict.json", None)
log = open(log_path, errors="replace").read()
if " rank ? " in log:
    errors.append("the log still says 'rank ?' though the rank was readable")
for r in (0, 1):
    if f" rank {r} " not in log:
        errors.append(f"the log has no line marked 'rank {r}'")
for e in errors:
    print(f"FAIL: {e}")
print("slurm_config_error_test:", "FAIL" if errors else "PASS")
sys.exit(1 if errors else 0)
EOF
