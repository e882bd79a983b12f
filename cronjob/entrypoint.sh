#!/bin/sh
# ncclsmoke pod entrypoint: one pod of the smoke CronJob's Indexed Job (cronjob/k8s).
#
# Turns the pod's environment into `ncclsmoke run` flags, runs this pod's ranks and, in the pod
# of index 0, `ncclsmoke publish` on the global verdict. Arguments are appended to every
# `ncclsmoke run` (sizes, deadlines: e.g. --max-bytes 16G --join-timeout 240); don't repeat the
# flags set here.
#
# Environment (each value is checked; a bad one is one line naming the variable, exit 2):
#   JOB_COMPLETION_INDEX     this pod's index, 0..NCCLSMOKE_PODS-1 (set by the Job controller)
#   NCCLSMOKE_PODS           pods in the Job: the Job's completions (= parallelism)
#   NCCLSMOKE_RANKS_PER_POD  ranks started in each pod, default 1 (GPU nodes: one per GPU);
#                            rank = index * ranks_per_pod + local rank, --gpu = local rank
#   NCCLSMOKE_JOB_NAME       the Job's name (downward API: label batch.kubernetes.io/job-name)
#   NCCLSMOKE_SERVICE        the headless Service = the pod's subdomain; rank 0 is reached at
#                            MASTER_ADDR = <job>-0.<service> (resolved through the pod's DNS search
#                            path; pods of an Indexed Job get hostname <job>-<index>)
#   NODE_NAME                the node (downward API: spec.nodeName)
#   MASTER_PORT              rank 0's store port, default 29500; a service link (tcp://...) is
#                            refused: set enableServiceLinks: false in the pod spec
#   NCCLSMOKE_TRANSPORTS     default socket (socket, fabric, mpi, nccl, comma-separated)
#   NCCLSMOKE_NCCL_NET       expected NCCL network (IB, Socket, Libfabric); optional
#   NCCLSMOKE_NCCL_POLICY    pin | observe; optional (the CronJob observes, the gate pins)
#   NCCLSMOKE_PROFILES       profiles file, default /etc/ncclsmoke/profiles.yaml (the ConfigMap)
#   NCCLSMOKE_PROFILE        profile to judge against; empty: bandwidth measured, not judged
#   NCCLSMOKE_OUT_DIR        verdict directory, default /var/run/ncclsmoke
#   NCCLSMOKE_PUBLISH        1 (default) or 0: whether the index-0 pod runs `ncclsmoke publish`
#   NCCLSMOKE_CLUSTER        cluster label of the metrics (required when publishing)
#   NCCLSMOKE_METRICS_JOB    job label of the metrics, default ncclsmoke
#   NCCLSMOKE_PUSHGATEWAY    http(s)://host:port of a Pushgateway; optional
#   NCCLSMOKE_TEXTFILE_DIR   node-exporter textfile directory; optional
#   NCCLSMOKE_HISTORY        run history: an SQLite path or a postgresql:// URL (credentials
#                            from PGUSER/PGPASSWORD, never in the URL); optional
#   NCCLSMOKE_HISTORY_KEEP   with NCCLSMOKE_HISTORY: after publishing, remove runs older than
#                            this (e.g. 90d, 12w); optional. A failed prune is only a warning.
#   NCCLSMOKE_EXCLUDE_FILE   a suspects file (one node a line) whose nodes are set aside: a rank
#                            on one stops with HOST_EXCLUDED (run --exclude-file); optional
#   NCCLSMOKE_SUSPECTS_DIR   where publish keeps the run's suspect nodes: DIR/suspects.txt (the
#                            latest run, the format --exclude-file reads) and
#                            DIR/suspects-<run id>.txt; default: the directory of an SQLite
#                            NCCLSMOKE_HISTORY (the history's volume); optional. The suspects are
#                            printed in the index-0 pod's log either way.
#   NCCLSMOKE_FAIL_ON        verdicts that fail the pod: a list of fail, degraded, inconclusive
#                            (default: all three: fail closed), or none; passed to publish
#   NCCLSMOKE_DRY_RUN        1: print the commands instead of running them
#
# Exit code (the Job's outcome is the index-0 pod's):
#   index 0:  publish's code: 1 fail, 3 degraded, 4 inconclusive when that verdict is in
#             NCCLSMOKE_FAIL_ON (else 0), 5 metrics not delivered, 6 history not written (the
#             verdict's code wins over 5 and 6). With NCCLSMOKE_PUBLISH=0, the run's code mapped
#             the same way. No verdict written: the run's code.
#   others:   0 once every local rank ended with a verdict, whatever it says: rank 0's verdict
#             names them, and a failed pod would make the Job controller (backoffLimit 0) kill
#             rank 0 before it publishes. A rank that ended without a verdict: its code.
#   any:      2 for a bad variable or flag.
set -u

me=ncclsmoke-entrypoint
usage() { echo "$me: $*" >&2; exit 2; }
say() { echo "$me: $*"; }

# is_uint VALUE: 1 to 9 decimal digits (keeps shell arithmetic far from overflow).
is_uint() {
  case $1 in '' | *[!0-9]*) return 1 ;; esac
  [ ${#1} -le 9 ]
}
# need_uint VAR MIN MAX WHAT: the variable is set, an integer, MIN <= v <= MAX (leading zeros
# dropped: shell arithmetic would read them as octal).
need_uint() {
  eval "v=\${$1-} set_=\${$1+x}"
  [ -n "$set_" ] || usage "$1 is not set; $4"
  is_uint "$v" || usage "$1 is '$v', not a non-negative integer; $4"
  while case $v in 0?*) true ;; *) false ;; esac do v=${v#0}; done
  if [ "$v" -lt "$2" ] || [ "$v" -gt "$3" ]; then usage "$1 is $v, outside $2..$3; $4"; fi
  eval "$1=\$v"
}
# dns_label VAR WHAT: lower-case letters, digits and '-', 1..63, not starting or ending in '-'.
dns_label() {
  eval "v=\${$1-}"
  [ -n "$v" ] || usage "$1 is not set or empty; $2"
  case $v in
    *[!a-z0-9-]* | -* | *-) usage "$1 is '$v', not a DNS label (a-z, 0-9, '-'); $2" ;;
  esac
  [ ${#v} -le 63 ] || usage "$1 is ${#v} characters, more than a DNS label's 63; $2"
}
# word VAR PATTERN_DESC: optional value limited to [A-Za-z0-9_.,:/+=-].
word() {
  eval "v=\${$1-}"
  case $v in *[!A-Za-z0-9_.,:/+=-]*) usage "$1 is '$v': only letters, digits and _.,:/+=- are allowed; $2" ;; esac
}

# ---- world -------------------------------------------------------------------------------------
need_uint NCCLSMOKE_PODS 1 65536 "set it to the Job's completions in the pod template"
pods=$NCCLSMOKE_PODS
[ -n "${JOB_COMPLETION_INDEX+x}" ] ||
  usage "JOB_COMPLETION_INDEX is not set; the Job controller sets it only for completionMode: Indexed"
need_uint JOB_COMPLETION_INDEX 0 $((pods - 1)) \
  "an Indexed Job's index must be below NCCLSMOKE_PODS=$pods (completions and NCCLSMOKE_PODS must agree)"
index=$JOB_COMPLETION_INDEX
NCCLSMOKE_RANKS_PER_POD=${NCCLSMOKE_RANKS_PER_POD:-1}
need_uint NCCLSMOKE_RANKS_PER_POD 1 1024 "ranks per pod, e.g. the GPUs each pod requests"
per_pod=$NCCLSMOKE_RANKS_PER_POD
world=$((pods * per_pod))

dns_label NCCLSMOKE_JOB_NAME "pass the Job's name, e.g. from the downward API label batch.kubernetes.io/job-name"
dns_label NCCLSMOKE_SERVICE "set it to the headless Service named in the pod's subdomain"
master_addr="$NCCLSMOKE_JOB_NAME-0.$NCCLSMOKE_SERVICE"
[ ${#master_addr} -le 253 ] || usage "NCCLSMOKE_JOB_NAME and NCCLSMOKE_SERVICE make a name longer than 253 characters"

node=${NODE_NAME-}
[ -n "$node" ] || usage "NODE_NAME is not set or empty; set it from the downward API (fieldPath: spec.nodeName)"
case $node in *[!A-Za-z0-9._-]*) usage "NODE_NAME is '$node', not a node name (letters, digits, '.', '_', '-')" ;; esac

port=${MASTER_PORT:-29500}
case $port in
  *://*) usage "MASTER_PORT is '$port', a Kubernetes service link, not a port (a Service named 'master' injects MASTER_PORT=tcp://ip:port into every pod): set enableServiceLinks: false in the pod spec" ;;
esac
MASTER_PORT=$port
need_uint MASTER_PORT 1 65535 "a TCP port for rank 0's store"
port=$MASTER_PORT

# ---- what to run -------------------------------------------------------------------------------
transports=${NCCLSMOKE_TRANSPORTS:-socket}
case $transports in
  '' | *[!a-z,]* | ,* | *, | *,,*) usage "NCCLSMOKE_TRANSPORTS is '$transports', not a comma-separated list such as socket,nccl" ;;
esac
word NCCLSMOKE_NCCL_NET "the network NCCL should use: IB, Socket, Libfabric"
case ${NCCLSMOKE_NCCL_POLICY-} in '' | pin | observe) ;; *) usage "NCCLSMOKE_NCCL_POLICY is '$NCCLSMOKE_NCCL_POLICY', not pin or observe" ;; esac
profiles=${NCCLSMOKE_PROFILES:-/etc/ncclsmoke/profiles.yaml}
profile=${NCCLSMOKE_PROFILE-}
word NCCLSMOKE_PROFILE "a profile name from $profiles"
if [ -n "$profile" ] && [ ! -r "$profiles" ]; then
  usage "NCCLSMOKE_PROFILES is '$profiles', which cannot be read (is the profiles ConfigMap mounted?)"
fi
out_dir=${NCCLSMOKE_OUT_DIR:-/var/run/ncclsmoke}
if ! mkdir -p "$out_dir" 2>/dev/null || [ ! -w "$out_dir" ]; then
  usage "NCCLSMOKE_OUT_DIR is '$out_dir', which is not a writable directory (mount an emptyDir there)"
fi

publish=${NCCLSMOKE_PUBLISH:-1}
case $publish in 0 | 1) ;; *) usage "NCCLSMOKE_PUBLISH is '$publish', not 0 or 1" ;; esac
fail_on=${NCCLSMOKE_FAIL_ON:-fail,degraded,inconclusive}
if [ "$fail_on" != none ]; then
  for item in $(echo "$fail_on" | tr ',' ' '); do
    case $item in fail | degraded | inconclusive) ;; *) item= ;; esac
    [ -n "$item" ] || break
  done
  case $fail_on in ,* | *, | *,,* | *[!a-z,]*) item= ;; esac
  [ -n "$item" ] || usage "NCCLSMOKE_FAIL_ON is '$fail_on', not a comma list of fail, degraded, inconclusive (or none)"
fi
if [ "$index" -eq 0 ] && [ "$publish" = 1 ]; then
  cluster=${NCCLSMOKE_CLUSTER-}
  [ -n "$cluster" ] || usage "NCCLSMOKE_CLUSTER is not set; name the cluster for the metrics' cluster label (or set NCCLSMOKE_PUBLISH=0)"
  case $cluster in *[!A-Za-z0-9_.-]*) usage "NCCLSMOKE_CLUSTER is '$cluster': only letters, digits and _.- are allowed" ;; esac
  metrics_job=${NCCLSMOKE_METRICS_JOB:-ncclsmoke}
  case $metrics_job in *[!A-Za-z0-9_.-]*) usage "NCCLSMOKE_METRICS_JOB is '$metrics_job': only letters, digits and _.- are allowed" ;; esac
  case ${NCCLSMOKE_PUSHGATEWAY-} in
    '' | http://?* | https://?*) ;;
    *) usage "NCCLSMOKE_PUSHGATEWAY is '$NCCLSMOKE_PUSHGATEWAY', not an http:// or https:// URL" ;;
  esac
  word NCCLSMOKE_PUSHGATEWAY "a Pushgateway URL"
  word NCCLSMOKE_TEXTFILE_DIR "a directory"
  word NCCLSMOKE_HISTORY "an SQLite path or a postgresql:// URL without credentials"
  case ${NCCLSMOKE_HISTORY_KEEP-} in
    '') ;;
    *[!0-9dhw]* | [dhw]* | *[0-9] | *[dhw]*[dhw]*) usage "NCCLSMOKE_HISTORY_KEEP is '$NCCLSMOKE_HISTORY_KEEP', not a duration like 90d, 12w or 720h" ;;
  esac
  if [ -n "${NCCLSMOKE_HISTORY_KEEP-}" ] && [ -z "${NCCLSMOKE_HISTORY-}" ]; then
    usage "NCCLSMOKE_HISTORY_KEEP is set but NCCLSMOKE_HISTORY is not: there is no history to prune"
  fi
fi
exclude_file=${NCCLSMOKE_EXCLUDE_FILE-}
word NCCLSMOKE_EXCLUDE_FILE "a file path"
suspects_dir=${NCCLSMOKE_SUSPECTS_DIR-}
word NCCLSMOKE_SUSPECTS_DIR "a directory"
if [ -z "$suspects_dir" ] && [ "$index" -eq 0 ] && [ "$publish" = 1 ]; then
  case ${NCCLSMOKE_HISTORY-} in '' | *://*) ;; */*) suspects_dir=${NCCLSMOKE_HISTORY%/*}; [ -n "$suspects_dir" ] || suspects_dir=/ ;; *) suspects_dir=. ;; esac
fi
dry=${NCCLSMOKE_DRY_RUN:-0}
case $dry in 0 | 1) ;; *) usage "NCCLSMOKE_DRY_RUN is '$dry', not 0 or 1" ;; esac

# start_rank LOCAL_RANK [EXTRA ARGS]: starts one rank's `ncclsmoke run` in the background (or
# prints it under NCCLSMOKE_DRY_RUN=1). Every word is passed as one argument: nothing is re-split.
start_rank() {
  l=$1
  shift
  set -- ncclsmoke run --launcher flags --rank $((index * per_pod + l)) --world-size "$world" \
    --local-rank "$l" --master-addr "$master_addr" --master-port "$port" --node-name "$node" \
    --job-id "$NCCLSMOKE_JOB_NAME" --transports "$transports" --out-dir "$out_dir" "$@"
  if [ -n "${NCCLSMOKE_NCCL_NET-}" ]; then set -- "$@" --nccl-net "$NCCLSMOKE_NCCL_NET"; fi
  if [ -n "${NCCLSMOKE_NCCL_POLICY-}" ]; then set -- "$@" --nccl-policy "$NCCLSMOKE_NCCL_POLICY"; fi
  if [ -n "$profile" ]; then set -- "$@" --profiles "$profiles" --profile "$profile"; fi
  if [ -n "$exclude_file" ]; then set -- "$@" --exclude-file "$exclude_file"; fi
  if [ "$l" -gt 0 ]; then set -- "$@" --quiet; fi
  if [ "$dry" = 1 ]; then
    echo "$*"
  else
    "$@" &
    pids="$pids $!"
  fi
}

# exit code -> verdict word, and whether NCCLSMOKE_FAIL_ON lets it pass.
verdict_of() {
  case $1 in 0) echo pass ;; 1) echo fail ;; 3) echo degraded ;; 4) echo inconclusive ;; *) echo none ;; esac
}
tolerated() {
  case ,$fail_on, in *,$(verdict_of "$1"),*) return 1 ;; esac
  [ "$(verdict_of "$1")" != none ]
}

say "pod $index/$pods on $node: ranks $((index * per_pod))..$((index * per_pod + per_pod - 1)) of $world, master $master_addr:$port, transports $transports${profile:+, profile $profile}"

# ---- run this pod's ranks ----------------------------------------------------------------------
pids=
got_signal=0
trap 'got_signal=1; [ -n "$pids" ] && kill -TERM $pids 2>/dev/null' TERM INT
l=0
while [ "$l" -lt "$per_pod" ]; do
  start_rank "$l" "$@"
  l=$((l + 1))
done

# Wait for every local rank; a TERM interrupts `wait` once, the second wait reads the real status.
first_rc=
bad_rc=
for pid in $pids; do
  tries=0
  while :; do
    wait "$pid"
    rc=$?
    tries=$((tries + 1))
    if [ "$got_signal" = 1 ] && [ "$rc" -gt 128 ] && [ "$tries" -lt 3 ]; then continue; fi
    break
  done
  [ -z "$first_rc" ] && first_rc=$rc
  case $rc in 0 | 1 | 3 | 4) ;; *) [ -z "$bad_rc" ] && bad_rc=$rc ;; esac
done
[ "$dry" = 1 ] && first_rc=0

if [ "$index" -ne 0 ]; then
  if [ -n "$bad_rc" ]; then
    say "a rank of pod $index ended without a verdict (exit $bad_rc)"
    exit "$bad_rc"
  fi
  say "pod $index done; rank 0 reports the verdict"
  exit 0
fi

# ---- index 0: rank 0's global verdict ----------------------------------------------------------
verdict=$out_dir/verdict.json
[ "$first_rc" -eq 2 ] && exit 2
if [ "$dry" != 1 ] && [ ! -s "$verdict" ]; then
  say "rank 0 wrote no verdict ($verdict) and exited $first_rc"
  [ "$first_rc" -eq 0 ] && exit 1
  exit "$first_rc"
fi
if [ "$first_rc" -ne 0 ] && [ "$dry" != 1 ]; then
  # The pod's files vanish with it: keep the full verdict in the pod's log.
  echo "--- begin $verdict"
  cat "$verdict"
  echo "--- end $verdict"
fi

# The suspect nodes (rank 0's suspects.txt beside the verdict): into the pod's log, for a person
# or a controller that reads it; publish keeps them in NCCLSMOKE_SUSPECTS_DIR.
if [ "$dry" != 1 ] && [ -s "$out_dir/suspects.txt" ]; then
  echo "--- begin $out_dir/suspects.txt"
  cat "$out_dir/suspects.txt"
  echo "--- end $out_dir/suspects.txt"
fi

if [ "$publish" = 0 ]; then
  if [ "$first_rc" -ne 0 ] && tolerated "$first_rc"; then
    say "verdict $(verdict_of "$first_rc"), not in NCCLSMOKE_FAIL_ON=$fail_on: exit 0"
    exit 0
  fi
  exit "$first_rc"
fi

set -- ncclsmoke publish "$verdict" --job "$metrics_job" --cluster "$cluster" --fail-on "$fail_on"
[ -n "${NCCLSMOKE_PUSHGATEWAY-}" ] && set -- "$@" --pushgateway "$NCCLSMOKE_PUSHGATEWAY"
[ -n "${NCCLSMOKE_TEXTFILE_DIR-}" ] && set -- "$@" --textfile "$NCCLSMOKE_TEXTFILE_DIR"
[ -n "${NCCLSMOKE_HISTORY-}" ] && set -- "$@" --history "$NCCLSMOKE_HISTORY"
[ -n "$suspects_dir" ] && set -- "$@" --suspects-dir "$suspects_dir"
prune=""
[ -n "${NCCLSMOKE_HISTORY_KEEP-}" ] &&
  prune="ncclsmoke history prune --history $NCCLSMOKE_HISTORY --older-than $NCCLSMOKE_HISTORY_KEEP"
if [ "$dry" = 1 ]; then
  echo "$*"
  [ -n "$prune" ] && echo "$prune"
  exit 0
fi
"$@"
rc=$?
say "publish exited $rc"
if [ -n "$prune" ]; then
  # Bounded history; never changes the Job's outcome.
  ncclsmoke history prune --history "$NCCLSMOKE_HISTORY" --older-than "$NCCLSMOKE_HISTORY_KEEP" ||
    say "warning: history prune exited $? (the run is published; the history is only larger)"
fi
exit "$rc"
