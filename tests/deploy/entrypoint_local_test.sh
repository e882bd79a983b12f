#!/bin/bash
# cronjob/entrypoint.sh with the environment a pod of the Indexed Job has (JOB_COMPLETION_INDEX,
# the Job's name and node name from the downward API, NCCLSMOKE_PODS), as local processes against
# the real ncclsmoke binary.
#
#   entrypoint_local_test.sh NCCLSMOKE_BINARY ENTRYPOINT SCENARIO
#   SCENARIO: pods4 (4 pods x 1 rank, judged: pass -> publish writes the textfile, exit 0)
# On this shared 2-core machine a rank can be slow enough to read as a STRAGGLER (degraded): the
# passing scenarios set NCCLSMOKE_FAIL_ON=fail,inconclusive and accept pass, or degraded whose
# only findings are STRAGGLER / BANDWIDTH_REGRESSION.
#             inconclusive (4 pods, a profile with no band for 4 ranks: BASELINE_MISSING ->
#                           exit 4, the verdict in pod 0's log;
#                           NCCLSMOKE_FAIL_ON=fail,degraded -> exit 0)
#             ranks-per-pod (2 pods x 2 ranks)
#             rank-missing (pod 3 never starts: pod 0 fails with RANKS_MISSING -> publish exit 1;
#                           pods 1 and 2 end with a failing local verdict and exit 0)
#
# MASTER_ADDR is <job>-0.<service>, as in a cluster. To make that name resolve to 127.0.0.1
# without touching this machine's /etc/hosts, the test re-runs itself in a private mount
# namespace (unshare -m) and bind-mounts a temporary hosts file over /etc/hosts there; the
# entrypoint itself has no test-only override. Needs root (or user namespaces): else exit 77.
set -u
bin=$1 entry=$2 scenario=$3
job=ncclsmoke-29123456 service=ncclsmoke

if [ -z "${NCCLSMOKE_TEST_IN_NS:-}" ]; then
  command -v unshare >/dev/null || { echo "SKIP: unshare (util-linux) is not installed"; exit 77; }
  if ! unshare -m --propagation private true 2>/dev/null; then
    echo "SKIP: cannot create a mount namespace here (unshare -m: not root?)"
    exit 77
  fi
  NCCLSMOKE_TEST_IN_NS=1 exec unshare -m --propagation private "$0" "$@"
fi

tmp=$(mktemp -d /tmp/ncclsmoke-entrypoint.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  umount /etc/hosts 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

cp /etc/hosts "$tmp/hosts"
echo "127.0.0.1 $job-0.$service" >>"$tmp/hosts"
mount --bind "$tmp/hosts" /etc/hosts || { echo "SKIP: cannot bind-mount over /etc/hosts"; exit 77; }
getent hosts "$job-0.$service" | grep -q '^127\.0\.0\.1' || fail "$job-0.$service does not resolve to 127.0.0.1"

# The binary under the name the image gives it, first on PATH.
mkdir -p "$tmp/bin"
ln -s "$(readlink -f "$bin")" "$tmp/bin/ncclsmoke"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# A profile that judges 4 loopback ranks: the real identity rule, a band far below anything a
# working socket ring reaches (this machine is shared and noisy).
cat >"$tmp/profiles.yaml" <<'EOF'
profiles:
  - name: test-loopback
    description: entrypoint test, 4 ranks on loopback
    transports:
      - transport: socket
        baselines:
          - busbw_gbps: 0.05
            gate_bytes: 2097152
            degraded_ratio: 0.02
            fail_ratio: 0.01
            source: "test: a floor, not a measurement"
  - name: test-no-band
    description: entrypoint test, a band for 2 ranks only
    transports:
      - transport: socket
        baselines:
          - world_size: 2
            busbw_gbps: 0.05
            gate_bytes: 2097152
            source: "test"
EOF

# run_pods PODS PER_POD [VAR=VALUE...]: starts every pod's entrypoint, waits (bounded), and
# leaves pod i's exit code in rc[i] and its output in $tmp/pod<i>.log.
run_pods() {
  local pods=$1 per_pod=$2
  shift 2
  rm -rf "$tmp/out" "$tmp/textfile" "$tmp/history.db"
  mkdir -p "$tmp/textfile"
  pids=()
  for ((i = 0; i < pods; i++)); do
    mkdir -p "$tmp/out/pod$i"
    if [ "$i" = "${skip_pod:-}" ]; then
      : >"$tmp/pod$i.log"
      pids+=(0)
      continue
    fi
    env -i PATH="$tmp/bin:/usr/bin:/bin" HOME="$tmp" \
      JOB_COMPLETION_INDEX="$i" NCCLSMOKE_PODS="$pods" NCCLSMOKE_RANKS_PER_POD="$per_pod" \
      NCCLSMOKE_JOB_NAME="$job" NCCLSMOKE_SERVICE="$service" NODE_NAME="node-$i" MASTER_PORT="$port" \
      NCCLSMOKE_TRANSPORTS=socket NCCLSMOKE_PROFILES="$tmp/profiles.yaml" \
      NCCLSMOKE_OUT_DIR="$tmp/out/pod$i" NCCLSMOKE_CLUSTER=test-cluster \
      NCCLSMOKE_TEXTFILE_DIR="$tmp/textfile" NCCLSMOKE_HISTORY="$tmp/history.db" "$@" \
      timeout -k 5 150 sh "$entry" --min-bytes 1M --max-bytes 2M --gate-bytes 2M --iters 2 \
      --connect-timeout "${join:-60}" --join-timeout "${join:-60}" --timeout 120 >"$tmp/pod$i.log" 2>&1 &
    pids+=($!)
  done
  rc=()
  for ((i = 0; i < pods; i++)); do
    if [ "${pids[$i]}" = 0 ]; then rc[i]=none; continue; fi
    wait "${pids[$i]}"
    rc[i]=$?
  done
  pids=()
  for ((i = 0; i < pods; i++)); do
    echo "--- pod $i exited ${rc[$i]}"
    sed 's/^/    /' "$tmp/pod$i.log" | head -60
  done
}

json() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }
# healthy VERDICT_FILE: pass, or degraded by timing noise only.
healthy() {
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
codes = {f["code"] for f in v["findings"]}
ok = v["verdict"] == "pass" or (v["verdict"] == "degraded" and codes <= {"STRAGGLER", "BANDWIDTH_REGRESSION"})
print(v["verdict"], sorted(codes))
sys.exit(0 if ok else 1)
PY
}

case $scenario in
  pods4)
    run_pods 4 1 NCCLSMOKE_PROFILE=test-loopback NCCLSMOKE_FAIL_ON=fail,inconclusive
    [ -s "$tmp/out/pod0/verdict.json" ] || fail "rank 0 wrote no verdict.json"
    healthy "$tmp/out/pod0/verdict.json" || fail "the verdict is neither pass nor degraded by timing alone"
    [ "$(json "$tmp/out/pod0/verdict.json" "['world']['size']")" = 4 ] || fail "world size is not 4"
    [ "$(json "$tmp/out/pod0/verdict.json" "['world']['master_addr']")" = "$job-0.$service" ] ||
      fail "the verdict's master_addr is not $job-0.$service"
    for i in 1 2 3; do
      [ -s "$tmp/out/pod$i/verdict.rank$i.json" ] || fail "pod $i wrote no verdict.rank$i.json"
      [ "${rc[$i]}" = 0 ] || fail "pod $i exited ${rc[$i]}, expected 0"
    done
    grep -q "master $job-0.$service:$port" "$tmp/pod0.log" || fail "pod 0 did not use $job-0.$service:$port"
    grep -q 'node-2' "$tmp/out/pod0/verdict.json" || fail "the verdict does not name node-2 (NODE_NAME)"
    [ "${rc[0]}" = 0 ] || fail "pod 0 exited ${rc[0]}, expected 0 (publish: pass, delivered)"
    [ -s "$tmp/textfile/ncclsmoke.prom" ] || fail "publish wrote no $tmp/textfile/ncclsmoke.prom"
    grep -q 'cluster="test-cluster"' "$tmp/textfile/ncclsmoke.prom" || fail "metrics lack cluster=\"test-cluster\""
    [ -s "$tmp/history.db" ] || fail "publish wrote no history"
    ;;
  inconclusive)
    run_pods 4 1 NCCLSMOKE_PROFILE=test-no-band
    [ "${rc[0]}" = 4 ] || fail "pod 0 exited ${rc[0]}, expected 4 (no band for 4 ranks: inconclusive, in NCCLSMOKE_FAIL_ON)"
    grep -q "^--- begin $tmp/out/pod0/verdict.json" "$tmp/pod0.log" || fail "the verdict is not in pod 0's log"
    sed -n '/^--- begin/,/^--- end/p' "$tmp/pod0.log" | sed '1d;$d' >"$tmp/logged.json"
    [ "$(json "$tmp/logged.json" "['verdict']")" = inconclusive ] || fail "the logged verdict is not the inconclusive one"
    grep -q BASELINE_MISSING "$tmp/logged.json" || fail "the logged verdict lacks BASELINE_MISSING"
    for i in 1 2 3; do [ "${rc[$i]}" = 0 ] || fail "pod $i exited ${rc[$i]}, expected 0"; done
    run_pods 4 1 NCCLSMOKE_PROFILE=test-no-band NCCLSMOKE_FAIL_ON=fail,degraded
    [ "${rc[0]}" = 0 ] || fail "with NCCLSMOKE_FAIL_ON=fail,degraded pod 0 exited ${rc[0]}, expected 0"
    ;;
  ranks-per-pod)
    run_pods 2 2 NCCLSMOKE_PROFILE=test-loopback NCCLSMOKE_FAIL_ON=fail,inconclusive
    [ "${rc[0]}" = 0 ] || fail "pod 0 exited ${rc[0]}, expected 0"
    [ "${rc[1]}" = 0 ] || fail "pod 1 exited ${rc[1]}, expected 0"
    healthy "$tmp/out/pod0/verdict.json" || fail "the verdict is neither pass nor degraded by timing alone"
    [ "$(json "$tmp/out/pod0/verdict.json" "['world']['size']")" = 4 ] || fail "world size is not 4"
    for r in 2 3; do [ -s "$tmp/out/pod1/verdict.rank$r.json" ] || fail "pod 1 wrote no verdict.rank$r.json"; done
    [ -s "$tmp/out/pod0/verdict.rank1.json" ] || fail "pod 0 wrote no verdict.rank1.json"
    ;;
  rank-missing)
    skip_pod=3 join=5 run_pods 4 1 NCCLSMOKE_PROFILE=test-loopback
    [ "${rc[0]}" = 1 ] || fail "pod 0 exited ${rc[0]}, expected 1 (fail: rank 3 missing)"
    [ "$(json "$tmp/out/pod0/verdict.json" "['verdict']")" = fail ] || fail "verdict is not fail"
    grep -q RANKS_MISSING "$tmp/out/pod0/verdict.json" || fail "the verdict lacks RANKS_MISSING"
    grep -q 'verdict fail' "$tmp/pod0.log" || fail "publish did not report the failed verdict"
    [ -s "$tmp/textfile/ncclsmoke.prom" ] || fail "a failed verdict was not published"
    for i in 1 2; do
      [ "${rc[$i]}" = 0 ] || fail "pod $i exited ${rc[$i]}, expected 0 (rank 0 reports the failure)"
      [ "$(json "$tmp/out/pod$i/verdict.rank$i.json" "['verdict']")" != pass ] || fail "pod $i's local view passed"
    done
    ;;
  *)
    echo "unknown scenario $scenario"
    exit 2
    ;;
esac
echo "PASS: $scenario"
