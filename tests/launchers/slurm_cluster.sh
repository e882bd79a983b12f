# Sourced by the Slurm launcher tests (slurm_test.sh, slurm_config_error_test.sh): checks what a
# private single-node Slurm needs (exit 77 when missing), drops the caller's Slurm and launcher
# variables, starts scripts/slurm-local.sh's cluster in a temp dir and stops it on exit.
# In: $1 = the temp dir's name prefix, $bin = the ncclsmoke binary. Out: $tmp, $py, SLURM_CONF.
# shellcheck shell=bash
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
slurm_local=$here/../../scripts/slurm-local.sh
py=/usr/bin/python3

for b in srun sinfo scontrol /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged; do
  command -v "$b" >/dev/null 2>&1 || { echo "SKIP: $b not installed (apt-get install slurm-wlm munge)"; exit 77; }
done
[[ $(id -u) == 0 ]] || { echo "SKIP: a private slurmd needs root"; exit 77; }
[[ -x $bin ]] || { echo "FAIL: ncclsmoke binary '$bin' is not executable"; exit 1; }

# A test run inside someone's Slurm allocation must not attach to it: drop every SLURM_ variable.
for v in "${!SLURM_@}"; do unset "$v"; done
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK NCCLSMOKE_JOB_ID TORCHELASTIC_RUN_ID

tmp=$(mktemp -d "/tmp/$1.XXXXXX")
cleanup() {
  "$slurm_local" down "$tmp/cluster" || echo "WARN: slurm-local down failed; daemons may remain (pids in $tmp/cluster/run)"
  rm -rf "$tmp"
}
trap cleanup EXIT

if ! timeout 60 "$slurm_local" up "$tmp/cluster" >"$tmp/up.out" 2>&1; then
  echo "FAIL: could not start the private Slurm:"; cat "$tmp/up.out"; exit 1
fi
export SLURM_CONF=$tmp/cluster/slurm.conf
