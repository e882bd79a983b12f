#!/usr/bin/env bash
# Runs mpi_allreduce_check under mpirun and judges the output (see the program's header).
#   mpi_test.sh MPIRUN CHECK_BINARY NP SCENARIO [mpirun options...] [-- program options...]
# check:   every rank prints "rank R/NP PASS" and mpirun exits 0.
# timeout: ranks 0..NP-2 print "TIMEOUT_OK", and mpirun ends (non-zero is expected: ranks exit
#          without MPI_Finalize after a collective that cannot be cancelled).
# open_timeout: ranks 0..NP-2 print "OPEN_TIMEOUT_OK" (the last rank never opens).
# kill:    the last rank kills itself; mpirun must end the job (non-zero) well within the limit.
# init_fails: (with --mca btl self) every rank prints "INIT_FAILED_OK" and mpirun exits 0: Open
#          MPI's abort ended only the ranks' MPI child processes, cleanly.
# child_dies: rank 0's MPI child process is killed; every rank prints "CHILD_DIES_OK" (mpirun's
#          exit status is not judged: rank 0's MPI process ended without finalizing).
# pairs:   as check: every rank prints "rank R/NP PASS" and mpirun exits 0.
# pair_partner_dead: the last two ranks print "PAIR_DEAD_OK" (mpirun's exit status is not judged:
#          the last rank's MPI process ended without finalizing).
# Every run is bounded by `timeout` (TIME_LIMIT_S, default 100 s).
set -u
mpirun=$1 check=$2 np=$3 scenario=$4
shift 4
mpi_opts=() prog_opts=()
while (($#)); do
  if [ "$1" = "--" ]; then shift; prog_opts=("$@"); break; fi
  mpi_opts+=("$1"); shift
done
limit=${TIME_LIMIT_S:-100}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

start=$(date +%s%N)
timeout -k 5 "$limit" "$mpirun" --allow-run-as-root --oversubscribe -np "$np" "${mpi_opts[@]}" \
  "$check" --scenario "$scenario" "${prog_opts[@]}" >"$log" 2>&1
rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
elapsed=$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))
cat "$log"
echo "mpi_test: scenario $scenario np $np: mpirun exited $rc after ${elapsed}s"
# timeout(1) exits 124 (or 137 after -k); mpirun itself exits 137 when a rank died of SIGKILL.
if { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && [ "$elapsed_ms" -ge $((limit * 1000)) ]; then
  echo "mpi_test: FAIL: mpirun did not end within ${limit}s (hang)"
  exit 1
fi
case "$scenario" in
  check|pairs)
    pass=$(grep -c "mpi_allreduce_check: rank [0-9]*/$np PASS" "$log")
    if [ "$rc" -ne 0 ] || [ "$pass" -ne "$np" ]; then
      echo "mpi_test: FAIL: $pass of $np ranks passed, mpirun rc $rc"
      exit 1
    fi ;;
  timeout)
    ok=$(grep -c "^TIMEOUT_OK rank" "$log")
    if [ "$ok" -ne $((np - 1)) ]; then
      echo "mpi_test: FAIL: $ok of $((np - 1)) waiting ranks reported the timeout"
      exit 1
    fi ;;
  open_timeout)
    ok=$(grep -c "^OPEN_TIMEOUT_OK rank" "$log")
    if [ "$ok" -ne $((np - 1)) ]; then
      echo "mpi_test: FAIL: $ok of $((np - 1)) opening ranks reported the timeout"
      exit 1
    fi ;;
  init_fails)
    ok=$(grep -c "^INIT_FAILED_OK rank" "$log")
    if [ "$ok" -ne "$np" ] || [ "$rc" -ne 0 ]; then
      echo "mpi_test: FAIL: $ok of $np ranks reported init_failed with Open MPI's reason, mpirun rc $rc"
      exit 1
    fi ;;
  child_dies)
    ok=$(grep -c "^CHILD_DIES_OK rank" "$log")
    if [ "$ok" -ne "$np" ]; then
      echo "mpi_test: FAIL: $ok of $np ranks passed the MPI child's death"
      exit 1
    fi ;;
  pair_partner_dead)
    ok=$(grep -c "^PAIR_DEAD_OK rank" "$log")
    if [ "$ok" -ne 2 ]; then
      echo "mpi_test: FAIL: $ok of 2 ranks of the pair refused it with the reason"
      exit 1
    fi ;;
  kill)
    if [ "$rc" -eq 0 ]; then
      echo "mpi_test: FAIL: the job succeeded although a rank was killed"
      exit 1
    fi ;;
  *) echo "mpi_test: unknown scenario $scenario"; exit 2 ;;
esac
echo "mpi_test: OK"
