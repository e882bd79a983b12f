#!/usr/bin/env bash
# A failed MPI_Init_thread ends in a verdict: `mpirun --mca btl self` across 2 processes makes
# Open MPI abort inside MPI_Init_thread ("unable to reach each other"); the mpi transport's child
# process catches it, so the job is not killed and rank 0 writes verdict.json with a
# TRANSPORT_INIT_FAILED finding for mpi carrying Open MPI's reason, and the socket phase passes.
#   mpi_init_failure_test.sh MPIRUN NCCLSMOKE
# Exit: 0 passed, 1 failed, 77 skipped (no mpirun). Bounded by TIME_LIMIT_S (default 100 s).
set -u
mpirun=$1 bin=$2
command -v "$mpirun" >/dev/null 2>&1 || { echo "mpi_init_failure_test: SKIP: no $mpirun"; exit 77; }
limit=${TIME_LIMIT_S:-100}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cd "$dir" || exit 1
start=$(date +%s)
timeout -k 5 "$limit" "$mpirun" --allow-run-as-root --oversubscribe -np 2 --mca btl self \
  -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" -x NCCLSMOKE_MPI_FINALIZE_TIMEOUT_S=10 \
  "$bin" run --transports mpi,socket --min-bytes 64K --max-bytes 256K --gate-bytes 256K \
  >"$dir/log" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
tail -40 "$dir/log"
echo "mpi_init_failure_test: mpirun exited $rc after ${elapsed}s"
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "mpi_init_failure_test: FAIL: mpirun did not end within ${limit}s"; exit 1
fi
if grep -q "exited without calling finalize\|called \"init\", but exited without" "$dir/log"; then
  echo "mpi_init_failure_test: FAIL: mpirun reports a rank that did not finalize"; exit 1
fi
/usr/bin/python3 - "$dir/verdict.json" <<'PY'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"mpi_init_failure_test: FAIL: no global verdict.json from rank 0: {e}")
    sys.exit(1)
fails = []
inits = [f for f in v.get("findings", []) if f.get("code") == "TRANSPORT_INIT_FAILED"
         and "mpi" in (f.get("message", "") + json.dumps(f.get("evidence")))]
if not inits:
    fails.append("no TRANSPORT_INIT_FAILED finding for mpi")
for f in inits:
    text = f.get("message", "") + json.dumps(f.get("evidence"))
    if "unreachable" not in text and "unable to reach" not in text:
        fails.append("finding lacks Open MPI's reason: " + f.get("message", "")[:300])
    if "MPI_Init" not in text:
        fails.append("finding does not name MPI_Init: " + f.get("message", "")[:300])
    tail = (f.get("evidence") or {}).get("detail", {}).get("child_stderr_tail")
    if not tail:
        fails.append("finding has no child_stderr_tail evidence")
ranks = sorted(r for f in inits for r in f.get("ranks", []))
if ranks != [0, 1]:
    fails.append(f"TRANSPORT_INIT_FAILED ranks {ranks}, expected [0, 1]")
phases = {p["name"]: p["status"] for p in v.get("phases", [])}
if phases.get("transport:socket") != "pass":
    fails.append(f"socket phase: {phases.get('transport:socket')}")
if phases.get("transport:mpi") != "fail":
    fails.append(f"mpi phase: {phases.get('transport:mpi')}")
if fails:
    print("mpi_init_failure_test: FAIL: " + "; ".join(fails))
    sys.exit(1)
print(f"mpi_init_failure_test: verdict {v.get('verdict')}, phases {phases}")
PY
[ $? -eq 0 ] || exit 1
echo "mpi_init_failure_test: OK"
