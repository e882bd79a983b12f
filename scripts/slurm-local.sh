#!/usr/bin/env bash
# A private single-node Slurm for tests: munged, slurmctld and slurmd, all of whose files (key,
# socket, conf, state, spool, logs, pids) live under DIR, on free loopback ports chosen at `up`.
# It never reads or touches a system-wide Slurm or munge: every Slurm command must be run with
# SLURM_CONF=DIR/slurm.conf (`up` prints the export line; DIR/env holds it too).
#
#   scripts/slurm-local.sh up DIR     start it; waits (bounded) until sinfo shows the node idle
#   scripts/slurm-local.sh down DIR   stop what `up` started, by the PIDs it recorded in DIR
#
# Needs root (slurmd runs jobs as any user) and Debian 12's slurm-wlm 22.05 + munge. The node
# claims NCCLSMOKE_SLURM_CPUS CPUs (default 16) whatever the machine has
# (SlurmdParameters=config_overrides), so that two 4-task jobs run at once on a 2-core machine.
# NCCLSMOKE_SLURM_EXTRA_NODES="n1 n2" adds nodes that no slurmd serves (each on a port nothing
# listens on): they stay DOWN, take no job, and can be drained and resumed with scontrol like any
# node, so a test can count drains across several nodes on one machine.
# Exit codes: 0 ok, 1 failure (the message names the daemon and its log), 2 usage.
set -euo pipefail

usage() { echo "usage: $0 up|down DIR" >&2; exit 2; }
(($# == 2)) || usage
cmd=$1
dir=$2
case $cmd in up|down) ;; *) usage ;; esac

up_timeout=${NCCLSMOKE_SLURM_UP_TIMEOUT:-30}
cpus=${NCCLSMOKE_SLURM_CPUS:-16}

log() { echo "slurm-local: $*" >&2; }

# Stops the daemon whose pid file is $1 (TERM, then KILL after 10 s). Only a PID whose command line
# names our DIR is signalled, so a stale pid file never kills an unrelated process.
stop_pidfile() {
  local pidfile=$1 name=$2 pid i
  [[ -s $pidfile ]] || return 0
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] || { rm -f "$pidfile"; return 0; }
  if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 30; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
  fi
  rm -f "$pidfile"
}

do_down() {
  [[ -d $dir ]] || return 0
  dir=$(cd "$dir" && pwd)
  stop_pidfile "$dir/run/slurmd.pid" slurmd
  stop_pidfile "$dir/run/slurmctld.pid" slurmctld
  stop_pidfile "$dir/run/munged.pid" munged
}

free_port() {
  /usr/bin/python3 - <<'EOF'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

# Waits for a pid file written by a daemon; fails naming the daemon and the tail of its log.
wait_pidfile() {
  local pidfile=$1 name=$2 logfile=$3 i
  for ((i = 0; i < 100; i++)); do
    if [[ -s $pidfile ]] && kill -0 "$(<"$pidfile")" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  log "$name did not start within 10 s (no live pid in $pidfile); last lines of $logfile:"
  tail -n 20 "$logfile" >&2 2>/dev/null || true
  return 1
}

do_up() {
  [[ $(id -u) == 0 ]] || { log "must run as root (slurmd starts tasks as any user)"; exit 1; }
  local b
  for b in munged mungekey slurmctld slurmd sinfo srun scontrol; do
    command -v "$b" >/dev/null 2>&1 || [[ -x /usr/sbin/$b ]] ||
      { log "$b not found: apt-get install slurm-wlm munge"; exit 1; }
  done
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [[ -s $dir/run/slurmctld.pid ]] && kill -0 "$(<"$dir/run/slurmctld.pid")" 2>/dev/null; then
    log "already up in $dir (down first to restart)"
    return 0
  fi
  # A half-failed earlier `up` may have left some daemons: stop them first.
  do_down
  trap 'log "up failed; stopping what was started"; do_down' ERR
  mkdir -p "$dir"/{munge,run,log,state,spool}
  chmod 0700 "$dir/munge"
  local start
  start=$(date +%s.%N)

  # munge: its own key, socket, pid, log and seed files.
  if [[ ! -s $dir/munge/munge.key ]]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  fi
  chmod 0400 "$dir/munge/munge.key"
  /usr/sbin/munged --force --socket="$dir/munge/munge.sock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" >>"$dir/log/munged.out" 2>&1
  wait_pidfile "$dir/run/munged.pid" munged "$dir/log/munged.log"

  local host ctld_port slurmd_port
  host=$(hostname -s)
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  while [[ $slurmd_port == "$ctld_port" ]]; do slurmd_port=$(free_port); done
  local extra_lines="" partition_nodes=$host n
  for n in ${NCCLSMOKE_SLURM_EXTRA_NODES:-}; do
    [[ $n =~ ^[A-Za-z][A-Za-z0-9-]{0,62}$ && $n != "$host" ]] ||
      { log "NCCLSMOKE_SLURM_EXTRA_NODES: '$n' is not a node name (letters, digits, '-'; not $host)"; exit 2; }
    extra_lines+="NodeName=$n NodeAddr=127.0.0.1 NodeHostname=$n Port=$(free_port) CPUs=1 RealMemory=1000 State=DOWN"$'\n'
    partition_nodes+=",$n"
  done

  cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh for a private test cluster; everything lives under $dir.
ClusterName=ncclsmoke-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
PropagateResourceLimits=NONE
MailProg=/bin/true
InactiveLimit=0
KillWait=5
MinJobAge=60
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$cpus RealMemory=1000 State=UNKNOWN
${extra_lines}PartitionName=test Nodes=$partition_nodes Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  printf 'export SLURM_CONF=%q\n' "$dir/slurm.conf" >"$dir/env"
  export SLURM_CONF=$dir/slurm.conf

  # -i: ignore state files of an earlier cluster in DIR; -c: clear them.
  /usr/sbin/slurmctld -c -i -f "$dir/slurm.conf" >>"$dir/log/slurmctld.out" 2>&1
  wait_pidfile "$dir/run/slurmctld.pid" slurmctld "$dir/log/slurmctld.log"
  /usr/sbin/slurmd -f "$dir/slurm.conf" -N "$host" >>"$dir/log/slurmd.out" 2>&1
  wait_pidfile "$dir/run/slurmd.pid" slurmd "$dir/log/slurmd.log"

  local deadline state=""
  deadline=$(($(date +%s) + up_timeout))
  while (($(date +%s) < deadline)); do
    state=$(timeout 5 sinfo -h -N -n "$host" -o '%t' 2>/dev/null | head -1 || true)
    [[ $state == idle ]] && break
    sleep 0.2
  done
  if [[ $state != idle ]]; then
    log "node $host not idle after ${up_timeout}s (state '${state:-none}'); logs in $dir/log:"
    tail -n 15 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 2>/dev/null || true
    false
  fi
  trap - ERR
  log "up in $(/usr/bin/python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s: node $host idle," \
      "$cpus CPUs, slurmctld :$ctld_port, slurmd :$slurmd_port"
  echo "export SLURM_CONF=$dir/slurm.conf"
}

case $cmd in
  up) do_up ;;
  down) do_down ;;
esac
