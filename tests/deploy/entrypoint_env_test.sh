#!/bin/bash
# cronjob/entrypoint.sh refuses every bad value of its environment with one line on stderr that
# names the variable, and exit code 2, before anything runs; --dry-run style output
# (NCCLSMOKE_DRY_RUN=1) shows the commands a pod would run.
#
#   entrypoint_env_test.sh NCCLSMOKE_BINARY ENTRYPOINT
# Runs the entrypoint with /bin/sh (dash on Debian: the POSIX shell the image has).
set -u
bin=$1 entry=$2
tmp=$(mktemp -d /tmp/ncclsmoke-entrypoint-env.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
ln -s "$(readlink -f "$bin")" "$tmp/bin/ncclsmoke"
failures=0 cases=0

# A pod's environment that passes every check.
good=(PATH="$tmp/bin:/usr/bin:/bin" JOB_COMPLETION_INDEX=0 NCCLSMOKE_PODS=4
  NCCLSMOKE_JOB_NAME=ncclsmoke-29123456 NCCLSMOKE_SERVICE=ncclsmoke NODE_NAME=ip-10-1-2-3.ec2.internal
  NCCLSMOKE_CLUSTER=c1 NCCLSMOKE_OUT_DIR="$tmp/out" NCCLSMOKE_DRY_RUN=1)

# refused VAR 'EXPECTED TEXT' [VAR=VALUE...]: the good environment with these changes (VAR= with
# no '=' value removes it) exits 2 with one stderr line naming VAR and containing the text.
refused() {
  local var=$1 text=$2
  shift 2
  local env_=("${good[@]}") kv
  for kv in "$@"; do
    if [[ $kv == *=* ]]; then env_+=("$kv"); else env_=("${env_[@]/#$kv=*/}"); fi
  done
  local -a clean=()
  for kv in "${env_[@]}"; do [ -n "$kv" ] && clean+=("$kv"); done
  cases=$((cases + 1))
  env -i "${clean[@]}" sh "$entry" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$? lines
  lines=$(wc -l <"$tmp/stderr")
  if [ "$rc" != 2 ] || [ "$lines" != 1 ] || ! grep -qF "$var" "$tmp/stderr" || ! grep -qF -- "$text" "$tmp/stderr" ||
    [ -s "$tmp/stdout" ]; then
    echo "FAIL: [$*] -> exit $rc, expected 2 with one line naming $var and containing '$text'; stderr:"
    sed 's/^/    /' "$tmp/stderr"
    failures=$((failures + 1))
  else
    echo "ok: $(cat "$tmp/stderr")"
  fi
}

refused MASTER_PORT "a Kubernetes service link, not a port" MASTER_PORT=tcp://10.0.0.1:29500
grep -qF "set enableServiceLinks: false in the pod spec" "$tmp/stderr" || { echo "FAIL: the service-link message lacks the fix"; failures=$((failures + 1)); }
refused JOB_COMPLETION_INDEX "is not set" JOB_COMPLETION_INDEX
refused JOB_COMPLETION_INDEX "outside 0..3" JOB_COMPLETION_INDEX=4
refused JOB_COMPLETION_INDEX "not a non-negative integer" JOB_COMPLETION_INDEX=one
refused JOB_COMPLETION_INDEX "not a non-negative integer" JOB_COMPLETION_INDEX=-1
refused NCCLSMOKE_PODS "is not set" NCCLSMOKE_PODS
refused NCCLSMOKE_PODS "outside 1..65536" NCCLSMOKE_PODS=0
refused NCCLSMOKE_PODS "not a non-negative integer" "NCCLSMOKE_PODS=4 "
refused NCCLSMOKE_RANKS_PER_POD "outside 1..1024" NCCLSMOKE_RANKS_PER_POD=0
refused NCCLSMOKE_JOB_NAME "is not set" NCCLSMOKE_JOB_NAME
refused NCCLSMOKE_JOB_NAME "not a DNS label" NCCLSMOKE_JOB_NAME=Smoke_Job
refused NCCLSMOKE_SERVICE "is not set" NCCLSMOKE_SERVICE
refused NCCLSMOKE_SERVICE "not a DNS label" NCCLSMOKE_SERVICE=svc.ns
refused NODE_NAME "downward API" NODE_NAME
refused NODE_NAME "not a node name" "NODE_NAME=node a"
refused MASTER_PORT "outside 1..65535" MASTER_PORT=70000
refused MASTER_PORT "not a non-negative integer" MASTER_PORT=10.0.0.1:29500
refused NCCLSMOKE_TRANSPORTS "comma-separated list" "NCCLSMOKE_TRANSPORTS=socket;nccl"
refused NCCLSMOKE_NCCL_POLICY "not pin or observe" NCCLSMOKE_NCCL_POLICY=maybe
refused NCCLSMOKE_NCCL_NET "only letters" "NCCLSMOKE_NCCL_NET=AWS Libfabric"
refused NCCLSMOKE_PROFILES "cannot be read" NCCLSMOKE_PROFILE=p5.48xlarge-efa NCCLSMOKE_PROFILES=/nonexistent/profiles.yaml
refused NCCLSMOKE_OUT_DIR "not a writable directory" NCCLSMOKE_OUT_DIR=/proc/ncclsmoke
refused NCCLSMOKE_PUBLISH "not 0 or 1" NCCLSMOKE_PUBLISH=yes
refused NCCLSMOKE_CLUSTER "is not set" NCCLSMOKE_CLUSTER
refused NCCLSMOKE_CLUSTER "only letters" "NCCLSMOKE_CLUSTER=a b"
refused NCCLSMOKE_PUSHGATEWAY "not an http:// or https:// URL" NCCLSMOKE_PUSHGATEWAY=pushgateway:9091
refused NCCLSMOKE_FAIL_ON "not a comma list" NCCLSMOKE_FAIL_ON=fatal
refused NCCLSMOKE_FAIL_ON "not a comma list" NCCLSMOKE_FAIL_ON=fail,,degraded
refused NCCLSMOKE_DRY_RUN "not 0 or 1" NCCLSMOKE_DRY_RUN=true
refused NCCLSMOKE_HISTORY_KEEP "not a duration" NCCLSMOKE_HISTORY=/h.db NCCLSMOKE_HISTORY_KEEP=90
refused NCCLSMOKE_HISTORY_KEEP "not a duration" NCCLSMOKE_HISTORY=/h.db NCCLSMOKE_HISTORY_KEEP=9d9d
refused NCCLSMOKE_HISTORY_KEEP "not a duration" NCCLSMOKE_HISTORY=/h.db "NCCLSMOKE_HISTORY_KEEP=90 d"
refused NCCLSMOKE_HISTORY_KEEP "no history to prune" NCCLSMOKE_HISTORY_KEEP=90d

# The commands a pod runs (dry run): <job>-0.<service>, ranks from the index, publish on index 0.
expect_line() {
  cases=$((cases + 1))
  if grep -qxF -- "$1" "$tmp/stdout"; then echo "ok: $1"; else
    echo "FAIL: expected the line: $1"
    sed 's/^/    /' "$tmp/stdout" "$tmp/stderr"
    failures=$((failures + 1))
  fi
}
env -i "${good[@]}" NCCLSMOKE_TEXTFILE_DIR=/tf NCCLSMOKE_PUSHGATEWAY=http://pg:9091 sh "$entry" --iters 2 >"$tmp/stdout" 2>"$tmp/stderr"
expect_line "ncclsmoke run --launcher flags --rank 0 --world-size 4 --local-rank 0 --master-addr ncclsmoke-29123456-0.ncclsmoke --master-port 29500 --node-name ip-10-1-2-3.ec2.internal --job-id ncclsmoke-29123456 --transports socket --out-dir $tmp/out --iters 2"
expect_line "ncclsmoke publish $tmp/out/verdict.json --job ncclsmoke --cluster c1 --fail-on fail,degraded,inconclusive --pushgateway http://pg:9091 --textfile /tf"
env -i "${good[@]}" NCCLSMOKE_HISTORY=/h/runs.db NCCLSMOKE_HISTORY_KEEP=90d sh "$entry" >"$tmp/stdout" 2>"$tmp/stderr"
expect_line "ncclsmoke history prune --history /h/runs.db --older-than 90d"
# The suspects: kept beside an SQLite history; a suspects file set aside.
expect_line "ncclsmoke publish $tmp/out/verdict.json --job ncclsmoke --cluster c1 --fail-on fail,degraded,inconclusive --history /h/runs.db --suspects-dir /h"
env -i "${good[@]}" NCCLSMOKE_EXCLUDE_FILE=/etc/ncclsmoke/suspects.txt NCCLSMOKE_SUSPECTS_DIR=/s sh "$entry" >"$tmp/stdout" 2>"$tmp/stderr"
expect_line "ncclsmoke run --launcher flags --rank 0 --world-size 4 --local-rank 0 --master-addr ncclsmoke-29123456-0.ncclsmoke --master-port 29500 --node-name ip-10-1-2-3.ec2.internal --job-id ncclsmoke-29123456 --transports socket --out-dir $tmp/out --exclude-file /etc/ncclsmoke/suspects.txt"
expect_line "ncclsmoke publish $tmp/out/verdict.json --job ncclsmoke --cluster c1 --fail-on fail,degraded,inconclusive --suspects-dir /s"
env -i "${good[@]}" JOB_COMPLETION_INDEX=1 NCCLSMOKE_PODS=2 NCCLSMOKE_RANKS_PER_POD=8 NCCLSMOKE_TRANSPORTS=nccl \
  NCCLSMOKE_NCCL_NET=Libfabric NCCLSMOKE_NCCL_POLICY=observe NCCLSMOKE_CLUSTER= MASTER_PORT=0029400 sh "$entry" >"$tmp/stdout" 2>"$tmp/stderr"
expect_line "ncclsmoke run --launcher flags --rank 15 --world-size 16 --local-rank 7 --master-addr ncclsmoke-29123456-0.ncclsmoke --master-port 29400 --node-name ip-10-1-2-3.ec2.internal --job-id ncclsmoke-29123456 --transports nccl --out-dir $tmp/out --nccl-net Libfabric --nccl-policy observe --quiet"
cases=$((cases + 1))
if grep -q "publish" "$tmp/stdout"; then echo "FAIL: a pod other than index 0 would publish"; failures=$((failures + 1)); else echo "ok: index 1 does not publish"; fi

# ncclsmoke's own usage error (a bad extra flag) is the pod's exit code 2, nothing published.
cases=$((cases + 1))
env -i "${good[@]}" NCCLSMOKE_DRY_RUN=0 sh "$entry" --no-such-flag >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
if [ "$rc" = 2 ] && ! grep -q "publish exited" "$tmp/stdout"; then echo "ok: a bad run flag exits 2"; else
  echo "FAIL: a bad run flag exited $rc"
  sed 's/^/    /' "$tmp/stdout" "$tmp/stderr"
  failures=$((failures + 1))
fi

echo "$((cases - failures)) passed, $failures failed"
[ "$failures" = 0 ]
