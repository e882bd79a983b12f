#!/usr/bin/env bash
# GPU check for the NCCL transport: one command, unattended, under 7 minutes (CHECK_BUDGET_S, 400 s
# by default, is the hard cap; typical runs take far less), one archive with all evidence, the
# table printed last.
#
#   bash bench/gpu/bundle.sh                                  # on the build machine (Debian 12)
#   CHECK_ARCHIVE=$OUT/gpucheck.tar.gz bash bench/gpu/check.sh  # there, from the repository root
#   CHECK_DRY_RUN=1 bash bench/gpu/check.sh                   # anywhere: everything but the GPU
#
# Needs: nvidia-smi + driver, the CUDA runtime and NCCL (libcudart.so.*, libnccl.so.2 through the
# loader or /usr/local/cuda/lib64, or the ones torch loaded), python3 with torch (steps e, f, g),
# and the ncclsmoke binary: NCCLSMOKE_BIN, else bench/gpu/bundle.sh's folder (build-gpubundle/
# bundle: binary + the libraries an offline machine lacks; used as it is, no build), else a
# build here (cmake + the -dev packages of scripts/install-deps.sh; NCCLSMOKE_BUILD=1 forces it).
# No network: everything is on loopback (NCCL_SOCKET_IFNAME=lo).
#
# Steps (each under its own `timeout`; ncclsmoke's own --timeout is that limit minus a margin, so a
# hang still writes a verdict before the step is killed; all under one overall deadline):
#   a   2 synthetic ranks on the one GPU, --nccl-net Socket, observe: pass, data check, Socket seen,
#       the NCCL log at OUT_DIR/nccl-debug.rank0.log; a-log: what identify() parsed from the real
#       log (network, channels, GDR), and a trimmed copy under fixture/ for tests/transports/
#       fixtures/nccl/real/ (nccl_log_test parses every log there)
#   a-nvml: what rank 0 read through NVML (node/gpu_health.h) in step a, per GPU, beside
#       nvidia-smi -q's ECC, row remapper, PCIe and performance sections (nvidia-smi-health.txt):
#       NVML read, every GPU listed, no GPU_HEALTH finding on a healthy GPU
#   b   ncclsmoke launch --nproc-per-node 4, synthetic, --nccl-net Socket, pin: pass, data, Socket
#   c   pin a network that does not exist: exit 1, TRANSPORT_INIT_FAILED          } in parallel
#   d   observe --nccl-net Libfabric with no plugin: SILENT_FALLBACK (to Socket)  }
#   e   torch.distributed all_reduce (same NCCL library, same env, 2 synthetic ranks) vs ncclsmoke
#       at 64 MiB and 256 MiB: busbw ratio ncclsmoke/torch, both the mean over ranks (the sweep's
#       and nccl-tests' figure; torch's slowest rank shown too), goal >= 0.97
#   f   tests/interop/torch2_interop.py: torch 2.x clients vs `ncclsmoke store serve`, and our
#       client vs torch's TCPStore master with and without libuv (runs in the background during
#       a-d: it needs no GPU)
#   g   torchrun (python3 -m torch.distributed.run) --nproc_per_node 4 --no_python ncclsmoke run
#       --transports nccl --nccl-share-gpu, with static, c10d and --standalone rendezvous, in
#       parallel: each a passing verdict from torchrun's agent store
#   h   pairwise rounds on NCCL: launch --nproc-per-node 4 --pairwise, synthetic, NET/Socket:
#       every pair of the 3-round schedule measured through a 2-rank NCCL communicator per pair,
#       phase pairwise:nccl pass, no SLOW_HOST / SLOW_LINK on one healthy GPU
#   m   only with 2+ GPUs: one rank per real GPU (no synthetic sharing), NVLink/P2P busbw
#
# Environment: NCCLSMOKE_BIN, NCCLSMOKE_BUNDLE (default build-gpubundle/bundle), NCCLSMOKE_BUILD=1,
# NCCLSMOKE_BUILD_DIR (default build-gpucheck), NCCLSMOKE_DEPS_PREFIX (extra CMAKE_PREFIX_PATH),
# PYTHON (default python3; /usr/bin/python3 in a dry run), CHECK_BUDGET_S (default 400),
# CHECK_OUT (work folder, default /tmp/ncclsmoke-gpucheck.<pid>), CHECK_ARCHIVE (default
# CHECK_OUT.tar.gz), CHECK_STEPS (e.g. "e,g": a rerun of only those steps; default all),
# CHECK_TORCHRUN_NPROC (default 4), CHECK_DRY_RUN=1 (no GPU needed: runs every
# step, the GPU ones report what they saw as DRY; step e compares torch on gloo with ncclsmoke's
# socket transport at 1 and 4 MiB (the arithmetic, not a figure); the interop
# step runs for real with TORCH2_INTEROP_DRY_RUN=1 when torch < 2; torchrun is skipped when torch
# < 2, whose torchrun crashes on Python 3.11).
# Exit status: 0 when every step met its expectation, 1 otherwise, 2 when the machine is unfit.
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DRY="${CHECK_DRY_RUN:-0}"
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ "$DRY" = 1 ] && [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3
else PY=python3; fi
WORK="${CHECK_OUT:-/tmp/ncclsmoke-gpucheck.$$}"
ARCHIVE="${CHECK_ARCHIVE:-$WORK.tar.gz}"
BUDGET="${CHECK_BUDGET_S:-400}"
NPROC_G="${CHECK_TORCHRUN_NPROC:-4}"
BUILD="${NCCLSMOKE_BUILD_DIR:-$ROOT/build-gpucheck}"
BUNDLE="${NCCLSMOKE_BUNDLE:-$ROOT/build-gpubundle/bundle}"
# Each step's limit; their sum (serial parts, no build; m only with 2+ GPUs) is 375 s (420 s),
# inside the 400 s budget on one GPU (with m, the last step gets what the budget has left).
CAP_PROBE=30 CAP_A=40 CAP_B=45 CAP_H=50 CAP_CD=30 CAP_TORCH=60 CAP_E=75 CAP_G=45 CAP_M=45 CAP_F=110
MARGIN=12  # step limit - ncclsmoke --timeout: launch waits --timeout + 10 s before it kills
START=$(date +%s)
mkdir -p "$WORK"
declare -a TABLE=()
FAILED=0

say() { printf '[check %3ds] %s\n' "$(( $(date +%s) - START ))" "$*"; }
# row STEP RESULT DETAIL. In a dry run a GPU step's PASS/FAIL is only what it would say: DRY.
row() {
  local res=$2 detail=$3
  if [ "$DRY" = 1 ] && { [ "$res" = PASS ] || [ "$res" = FAIL ]; }; then
    detail="[would be $res] $detail"; res=DRY
  fi
  TABLE+=("$(printf '%-12s %-5s %s' "$1" "$res" "$detail")")
  [ "$res" = FAIL ] && FAILED=1
  say "$1: $res $detail"
}
# row_cpu: a step whose result means the same without a GPU (dry run too)
row_cpu() {
  TABLE+=("$(printf '%-12s %-5s %s' "$1" "$2" "$3")")
  [ "$2" = FAIL ] && FAILED=1
  say "$1: $2 $3"
}
STEPS=",${CHECK_STEPS:-a,b,h,c,d,e,f,g,m},"
want() { [[ "$STEPS" == *",$1,"* ]]; }  # want STEP: the step was asked for
left_s() { echo $(( BUDGET - ( $(date +%s) - START ) )); }
# Seconds for the next step: at most $1, never past the overall deadline.
budget() {
  local left t=$1
  left=$(left_s)
  [ "$left" -lt "$t" ] && t=$left
  [ "$t" -lt 1 ] && t=1
  echo "$t"
}
print_table() {
  echo
  echo "==================== ncclsmoke GPU check ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(( $(date +%s) - START )) s$([ "$DRY" = 1 ] && echo ', DRY RUN')) ===================="
  printf '%-12s %-5s %s\n' STEP RESULT DETAIL
  for r in "${TABLE[@]}"; do echo "$r"; done
  echo "=========================================================================================="
}
# Every file of the work folder in one archive; files over 2 MiB keep their first and last MiB.
pack() {
  local f
  while IFS= read -r f; do
    { head -c 1048576 "$f"; printf '\n... [trimmed by check.sh: %s bytes in all] ...\n' "$(stat -c %s "$f")"
      tail -c 1048576 "$f"; } >"$f.trim" && mv "$f.trim" "$f"
  done < <(find "$WORK" -type f -size +2M 2>/dev/null)
  mkdir -p "$(dirname "$ARCHIVE")"
  tar -czf "$ARCHIVE" -C "$(dirname "$WORK")" "$(basename "$WORK")" 2>"$WORK.tar.err"
}
# bounded LIMIT LOG cmd...: cmd under `timeout -k 5 LIMIT`, output to LOG, waited for in a way a
# signal to this script interrupts (its trap then packs what there is).
bounded() {
  local t=$1 log=$2
  shift 2
  timeout -k 5 "$t" "$@" >"$log" 2>&1 &
  wait "$!"
}
# Ends this script's own descendants, by process id, children first.
kill_tree() {
  local c
  for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$c"; done
  [ "$1" != $$ ] && kill -TERM "$1" 2>/dev/null
}
FINISHED=0
finish() {
  [ "$FINISHED" = 1 ] && exit "$1"
  FINISHED=1
  kill_tree $$
  print_table >"$WORK/table.txt"
  if pack; then
    ARCHIVE_LINE="archive: $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1)), work folder $WORK"
  else
    ARCHIVE_LINE="archive FAILED: $(head -c 300 "$WORK.tar.err"); files are in $WORK"
    FAILED=1
  fi
  print_table
  echo "$ARCHIVE_LINE"
  local rc=$1
  [ "$rc" = 0 ] && [ "$FAILED" != 0 ] && rc=1
  exit "$rc"
}
trap 'row_cpu check FAIL "stopped by a signal after $(( $(date +%s) - START )) s"; finish 1' TERM INT
jget() { "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); v=d.get(sys.argv[2]); print("" if v is None else v)' "$1" "$2" 2>/dev/null; }

# ---- preflight ---------------------------------------------------------------------------------
{
  echo "date: $(date -u)"; echo "uname: $(uname -a)"; echo "dry run: $DRY; budget ${BUDGET}s; python $PY"
  echo "--- nvidia-smi"; timeout 20 nvidia-smi 2>&1 | head -40
  echo "--- ldconfig (nccl, cudart)"; ldconfig -p 2>/dev/null | grep -E 'libnccl|libcudart'
  echo "--- git"; git -C "$ROOT" log -1 --format='%H %cd' 2>&1; git -C "$ROOT" status --short 2>&1 | head -40
} >"$WORK/machine.txt" 2>&1
NGPU=0
if [ "$DRY" = 1 ]; then
  row_cpu gpu INFO "dry run (CHECK_DRY_RUN=1): no GPU needed; nvidia-smi $(command -v nvidia-smi >/dev/null && echo present || echo absent)"
elif ! command -v nvidia-smi >/dev/null 2>&1; then
  row gpu FAIL "nvidia-smi not found: this script needs a machine with an NVIDIA GPU and its driver (CHECK_DRY_RUN=1 runs the rest)"
  finish 2
elif ! GPU_LINE=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1) \
   || [ -z "$GPU_LINE" ]; then
  row gpu FAIL "nvidia-smi failed: ${GPU_LINE:-no output}"
  finish 2
else
  NGPU=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  row gpu INFO "$GPU_LINE ($NGPU GPU(s))"
fi
NCCL_SYS=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
row_cpu nccl INFO "system libnccl.so.2: ${NCCL_SYS:-not in ldconfig cache}"

PROBE="{}"
if command -v "$PY" >/dev/null 2>&1; then
  PROBE=$(timeout "$(budget $CAP_PROBE)" "$PY" "$ROOT/bench/gpu/torch_allreduce.py" --probe 2>"$WORK/probe.err" | tail -1)
  [ -n "$PROBE" ] || PROBE="{}"
fi
echo "$PROBE" >"$WORK/probe.json"
TORCH_VER=$(jget "$PROBE" torch); TORCH_NCCL=$(jget "$PROBE" libnccl); TORCH_NCCL_VER=$(jget "$PROBE" nccl_version)
TORCH_CUDART=$(jget "$PROBE" libcudart)
TORCH_MAJOR=${TORCH_VER%%.*}; [[ "$TORCH_MAJOR" =~ ^[0-9]+$ ]] || TORCH_MAJOR=0
if [ -n "$TORCH_VER" ]; then
  row_cpu torch INFO "torch $TORCH_VER ($PY), NCCL $TORCH_NCCL_VER from ${TORCH_NCCL:-(statically linked)}"
else
  row torch FAIL "torch not importable by $PY (steps e, f, g will fail): $(tail -1 "$WORK/probe.err" 2>/dev/null)"
fi

# The CUDA runtime for ncclsmoke: the transport itself tries the loader, then /usr/local/cuda/lib64;
# only when neither has one, the one torch loaded. Nothing is exported: torch keeps its own.
CUDART_ARGS=()
if ! ldconfig -p 2>/dev/null | grep -q 'libcudart\.so' && ! ls /usr/local/cuda/lib64/libcudart.so* >/dev/null 2>&1 \
   && [ -n "$TORCH_CUDART" ]; then
  CUDART_ARGS=(--cudart-lib "$TORCH_CUDART")
fi
# NCCL for ncclsmoke: the system's libnccl.so.2 if the loader finds one, else the one torch loaded
# (a pip-installed torch carries its own under site-packages/nvidia/nccl/lib).
NCCL_LIB_ARGS=()
if [ -z "$NCCL_SYS" ] && [ -n "$TORCH_NCCL" ]; then
  NCCL_LIB_ARGS=(--nccl-lib "$TORCH_NCCL")
  row_cpu nccl INFO "no system libnccl.so.2: every step uses torch's, $TORCH_NCCL"
fi

# ---- the binary: given, else the bundle as it is, else a build ---------------------------------
# NS is what every step runs. With the bundle it is a wrapper that sets LD_LIBRARY_PATH for
# ncclsmoke alone (the bundle's Debian libraries must not shadow the system's for torch).
BIN="${NCCLSMOKE_BIN:-}"
NS=""
bundle_ok() {
  [ -x "$BUNDLE/ncclsmoke" ] &&
    env LD_LIBRARY_PATH="$BUNDLE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BUNDLE/ncclsmoke" --version >"$WORK/bundle-version.txt" 2>&1
}
use_bundle() {
  BIN="$BUNDLE/ncclsmoke"
  mkdir -p "$WORK/bin"
  NS="$WORK/bin/ncclsmoke"
  # shellcheck disable=SC2016  # the $ are for the wrapper, expanded when it runs
  printf '#!/bin/bash\nexport LD_LIBRARY_PATH=%q${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexec %q "$@"\n' "$BUNDLE" "$BIN" >"$NS"
  chmod +x "$NS"
  { ls -l "$BUNDLE"; echo "--- ldd"; env LD_LIBRARY_PATH="$BUNDLE" ldd "$BIN"; } >"$WORK/bundle.txt" 2>&1
  row_cpu build INFO "$1: the bundle $BIN ($(head -1 "$WORK/bundle-version.txt"))"
}
if [ -n "$BIN" ]; then
  row_cpu build INFO "NCCLSMOKE_BIN=$BIN"
elif [ "${NCCLSMOKE_BUILD:-0}" != 1 ] && bundle_ok; then
  use_bundle "prebuilt, no build"
else
  CMAKE_ARGS=(-S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DNCCLSMOKE_TESTS=OFF -DNCCLSMOKE_BENCH=OFF)
  command -v ninja >/dev/null 2>&1 && CMAKE_ARGS+=(-G Ninja)
  [ -n "${NCCLSMOKE_DEPS_PREFIX:-}" ] && CMAKE_ARGS+=("-DCMAKE_PREFIX_PATH=$NCCLSMOKE_DEPS_PREFIX")
  [ -x "$BUNDLE/ncclsmoke" ] && ! bundle_ok && say "the bundle does not run here: $(head -3 "$WORK/bundle-version.txt")"
  if ! command -v cmake >/dev/null 2>&1; then
    row build FAIL "cmake not found and no runnable bundle (make one: bench/gpu/bundle.sh)"; finish 1
  elif ! timeout "$(budget 60)" cmake "${CMAKE_ARGS[@]}" >"$WORK/configure.log" 2>&1; then
    missing=$(grep -o 'provided by "[^"]*"' "$WORK/configure.log" | sed 's/provided by //; s/"//g' | sort -u | tr '\n' ' ')
    row build FAIL "cmake configure failed${missing:+; missing packages: $missing}(offline: carry build-gpubundle/bundle from bench/gpu/bundle.sh, or set NCCLSMOKE_BIN); see configure.log"
    finish 1
  elif ! timeout "$(budget 150)" cmake --build "$BUILD" --target ncclsmoke -j "$(nproc)" >"$WORK/build.log" 2>&1; then
    row build FAIL "build failed or timed out: $(grep -m1 -E 'error|Error' "$WORK/build.log"); see build.log"
    finish 1
  else
    BIN="$BUILD/ncclsmoke"
    row_cpu build PASS "built $BIN in $(( $(date +%s) - START )) s"
  fi
fi
[ -x "$BIN" ] || { row_cpu build FAIL "no executable at $BIN"; finish 1; }
[ -n "$NS" ] || NS="$BIN"

# Same NCCL settings for every run, ncclsmoke and torch alike: loopback only, no network.
export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

# ---- f (background): torch 2.x interop; no GPU involved --------------------------------------
F_PID=""
start_interop() {
  mkdir -p "$WORK/f"
  local dry_env=()
  [ "$TORCH_MAJOR" -lt 2 ] && [ "$DRY" = 1 ] && dry_env=(TORCH2_INTEROP_DRY_RUN=1)
  ( cd "$ROOT/tests/interop" &&
    bounded "$(budget $CAP_F)" "$WORK/f/interop.log" env "${dry_env[@]}" "$PY" torch2_interop.py "$NS"
    echo $? >"$WORK/f/rc" ) &
  F_PID=$!
}
eval_interop() {
  [ -n "$F_PID" ] && wait "$F_PID"
  local rc summary skips fails
  rc=$(cat "$WORK/f/rc" 2>/dev/null || echo none)
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$WORK/f/interop.log" | tail -1)
  skips=$(grep -c '^skip' "$WORK/f/interop.log")
  fails=$(grep -E '^FAIL' "$WORK/f/interop.log" | head -3 | cut -c1-120 | paste -sd';' -)
  local what="torch $TORCH_VER vs ncclsmoke store: ${summary:-no summary} ($skips skipped)"
  [ "$TORCH_MAJOR" -lt 2 ] && what="$what [TORCH2_INTEROP_DRY_RUN: torch < 2, legacy dialect]"
  if [ "$rc" = 0 ]; then row_cpu f PASS "$what"
  elif [ "$rc" = 77 ]; then row_cpu f SKIP "$(tail -1 "$WORK/f/interop.log")"
  else row_cpu f FAIL "rc=$rc $what ${fails}; see f/interop.log"; fi
}
if ! want f; then :
elif [ -n "$TORCH_VER" ]; then start_interop; else row_cpu f FAIL "torch not importable by $PY"; fi

# ---- helpers for ncclsmoke steps ---------------------------------------------------------------
# verdict.json → "verdict exit findings network wrong_total rows" (one line, for the table)
summarize() {
  "$PY" - "$1" <<'PYEOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception as e:
    print("none - - - - no_verdict.json"); sys.exit(0)
codes = sorted({f.get("code", "?") for f in v.get("findings", [])})
nets = sorted({str(i.get("observed", {}).get("network")) for i in v.get("identities", [])
               if i.get("transport") == "nccl"})
rows = [r for r in v.get("transports", []) if r.get("transport") == "nccl" and "rank" not in r]
wrong = [r.get("wrong") for r in rows]
wrong_total = "n/a" if not rows or any(w is None for w in wrong) else str(sum(wrong))
synth = all(r.get("synthetic") for r in rows) if rows else False
print(v.get("verdict", "?"), v.get("exit_code", "?"), ",".join(codes) or "-",
      ",".join(nets) or "-", wrong_total, "%d%s" % (len(rows), "(synthetic)" if synth else ""))
PYEOF
}
# the first error/warning finding's message (for a failed step's detail), at most 200 characters
first_finding() {
  "$PY" - "$1" <<'PYEOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
fs = sorted(v.get("findings", []), key=lambda f: f.get("severity") != "error")
if fs:
    print(("%s: %s" % (fs[0].get("code"), fs[0].get("message", "")))[:200])
PYEOF
}
# what identify() parsed from rank 0's NCCL log, one line
log_seen() {
  "$PY" - "$1" <<'PYEOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception:
    print("no verdict.json"); sys.exit(0)
ids = [i for i in v.get("identities", []) if i.get("transport") == "nccl"]
ids.sort(key=lambda i: i.get("rank", 0))
if not ids:
    print("no nccl identity in the verdict"); sys.exit(0)
o = ids[0].get("observed", {})
log = o.get("nccl_log") or {}
print("rank %s: network=%s networks=%s net_channels=%s gdr=%s gdr_channels=%s devices=%s plugin=%s "
      "nccl=%s cuda runtime/driver=%s/%s log=%s" % (
          ids[0].get("rank"), log.get("network"), ",".join(log.get("networks", [])) or "-",
          log.get("net_channels"), log.get("gdr"), log.get("gdr_channels"),
          ",".join(log.get("net_devices", [])) or "-", log.get("plugin"), log.get("nccl_version"),
          o.get("cuda_runtime"), o.get("cuda_driver"), o.get("debug_file")))
PYEOF
}
# NCCL version ncclsmoke used (its identity's observation, else the verdict's versions map)
nccl_version_of() {
  "$PY" - "$1" <<'PYEOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception:
    print("?"); sys.exit(0)
for i in v.get("identities", []):
    if i.get("transport") == "nccl" and i.get("observed", {}).get("nccl_version"):
        print(i["observed"]["nccl_version"]); sys.exit(0)
print(v.get("versions", {}).get("nccl", "?"))
PYEOF
}
# world-row busbw (mean over ranks) at one size (bytes): "IN_PLACE OUT_OF_PLACE" ("-" if absent)
# busbw_at VERDICT BYTES [TRANSPORT (default nccl)]
busbw_at() {
  "$PY" - "$1" "$2" "${3:-nccl}" <<'PYEOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception:
    print("- -"); sys.exit(0)
size = int(sys.argv[2])
bw = {bool(r.get("in_place")): r["busbw_gbps"] for r in v.get("transports", [])
      if r.get("transport") == sys.argv[3] and "rank" not in r and r.get("bytes") == size
      and r.get("busbw_gbps") is not None}
print(bw.get(True, "-"), bw.get(False, "-"))
PYEOF
}
# world.source / store.hosted_by / dialect / era (torchrun step)
world_of() {
  "$PY" - "$1" <<'PYEOF'
import json, sys
try:
    w = json.load(open(sys.argv[1])).get("world", {})
except Exception:
    print("- - - - -"); sys.exit(0)
s = w.get("store", {})
print(w.get("source", "-"), str(s.get("hosted_by", "-")).replace(" ", "_"), s.get("dialect", "-"),
      str(s.get("era", "-")).replace(" ", "_"), w.get("job_id", "-"))
PYEOF
}
# ncclsmoke's own deadlines from a step's limit: --timeout = limit - MARGIN, the transport gets
# the rest minus 8 s for the phases before it, one collective at most 10 s.
deadline_args() {
  local t=$1 run tr op
  run=$(( t - MARGIN )); [ "$run" -lt 10 ] && run=10
  tr=$(( run - 8 )); [ "$tr" -lt 5 ] && tr=5
  op=$(( tr / 2 )); [ "$op" -gt 10 ] && op=10; [ "$op" -lt 2 ] && op=2
  echo "--timeout $run --transport-timeout $tr --op-timeout $op"
}
COMMON=(--transports nccl --nccl-share-gpu "${CUDART_ARGS[@]}" "${NCCL_LIB_ARGS[@]}")
CASE_COMMON=("${COMMON[@]}")  # what run_case passes; step e's dry run swaps in the socket transport
# run_case NAME RANKS LIMIT args...: ncclsmoke launch; writes NAME/{launch.log,rc,verdict.json}
run_case() {
  local name=$1 n=$2 t dl; t=$(budget "$3"); shift 3
  mkdir -p "$WORK/$name"
  read -r -a dl <<<"$(deadline_args "$t")"
  echo "timeout -k 5 $t $NS launch --nproc-per-node $n ${CASE_COMMON[*]} ${dl[*]} --out-dir $WORK/$name $*" >"$WORK/$name/command.txt"
  bounded "$t" "$WORK/$name/launch.log" "$NS" launch --nproc-per-node "$n" "${CASE_COMMON[@]}" "${dl[@]}" \
    --out-dir "$WORK/$name" "$@"
  echo $? >"$WORK/$name/rc"
}
# load_case NAME: sets RC and SUMMARY from the files run_case wrote
load_case() {
  RC=$(cat "$WORK/$1/rc" 2>/dev/null || echo none)
  SUMMARY=$(summarize "$WORK/$1/verdict.json")
  [ "$RC" = 124 ] || [ "$RC" = 137 ] && SUMMARY="$SUMMARY killed_at_step_limit"
}
enough_time() {  # enough_time STEP: false (and a FAIL row) when under 20 s are left
  [ "$(left_s)" -ge 20 ] && return 0
  row "$1" FAIL "not run: the ${BUDGET}s budget is spent"
  return 1
}
check_pass_socket() {  # NAME [LABEL]: pass, exit 0, Socket observed, data OK
  local verdict _code codes nets wrong rows
  read -r verdict _code codes nets wrong rows _ <<<"$SUMMARY"
  local detail="${2:+$2: }rc=$RC verdict=$verdict findings=$codes network=$nets wrong=$wrong rows=$rows"
  if [ "$RC" = 0 ] && [ "$verdict" = pass ] && [ "$nets" = Socket ] && [ "$wrong" = 0 ]; then
    row "$1" PASS "$detail"
  else
    row "$1" FAIL "$detail (want rc=0 pass Socket wrong=0) $(first_finding "$WORK/$1/verdict.json")"
  fi
}

# ---- a: 2 synthetic ranks over NET/Socket, and the real NCCL log ------------------------------
SMALL=(--min-bytes 1M --max-bytes 64M --factor 4 --iters 5 --warmup-iters 1)
if want a && enough_time a; then
  say "a: 2 synthetic ranks over NET/Socket (observe)"
  run_case a 2 $CAP_A "${SMALL[@]}" --nccl-net Socket --nccl-policy observe
  load_case a
  check_pass_socket a
  LOG0="$WORK/a/nccl-debug.rank0.log"
  all_logs=$(find "$WORK/a" -maxdepth 1 -name 'nccl-debug*' -printf '%f\n' | sort | paste -sd, -)
  others=$(find "$WORK/a" -maxdepth 1 -name 'nccl-debug*' -printf '%f\n' | grep -v -E '^nccl-debug\.rank[0-9]+\.log$' | paste -sd, -)
  seen=$(log_seen "$WORK/a/verdict.json")
  if [ -s "$LOG0" ] && [ -z "$others" ]; then
    if [[ "$seen" == *" network=Socket "* ]] && [[ "$seen" != *" net_channels=0 "* ]] \
       && [[ "$seen" != *" net_channels=None "* ]]; then
      row a-log PASS "$seen"
    else
      row a-log FAIL "$seen (want network=Socket and NET channel lines parsed from a/nccl-debug.rank0.log)"
    fi
    mkdir -p "$WORK/fixture"
    ver=$(grep -m1 -o 'NCCL version [0-9.]*' "$LOG0" | awk '{print $3}')
    model=$(echo "${GPU_LINE:-gpu}" | cut -d, -f1 | tr -c 'A-Za-z0-9\n' '-' | sed 's/-*$//; s/NVIDIA-//')
    FIX="$WORK/fixture/Socket_${model:-gpu}_nccl${ver:-unknown}_2rank-synthetic.log"
    { echo "# Captured by bench/gpu/check.sh step a on $(date -u +%Y-%m-%d), ${GPU_LINE:-?}, rank 0 of 2 synthetic ranks over NET/Socket on loopback; first 300 lines."
      head -300 "$LOG0"; } >"$FIX"
  else
    row a-log FAIL "want the logs at a/nccl-debug.rank<N>.log only; found: ${all_logs:-none}"
  fi
  nvidia-smi -q -d ECC,ROW_REMAPPER,PCIE,PERFORMANCE >"$WORK/nvidia-smi-health.txt" 2>&1 || true
  nvml=$("$PY" - "$WORK/a/verdict.rank0.json" "$NGPU" <<'PYEOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"FAIL no rank 0 verdict: {e}"); sys.exit()
g = (v.get("node") or {}).get("gpus") or {}
health = [f["message"] for f in v.get("findings", []) if f.get("code") == "GPU_HEALTH"]
gpus = g.get("gpus", [])
each = "; ".join(
    f"{d.get('index')} {d.get('name')} {d.get('pci_bus_id')} ecc_unc={d.get('ecc_uncorrected_volatile')}"
    f"/{d.get('ecc_uncorrected_aggregate')} remap_pending={d.get('remap_pending')}"
    f" remap_failed={d.get('remap_failed')} pcie=x{d.get('pcie_width')}/x{d.get('pcie_width_max')}"
    f" gen{d.get('pcie_gen')}/{d.get('pcie_gen_max')} clocks=0x{max(d.get('clock_event_reasons') or 0, 0):x}"
    for d in gpus)
ok = g.get("read") and len(gpus) == int(sys.argv[2] or 0) and not health
print(("PASS" if ok else "FAIL") + f" driver {g.get('driver_version')}, {len(gpus)} GPUs: {each or g.get('why_not')}"
      + (f"; GPU_HEALTH: {health}" if health else ""))
PYEOF
)
  row a-nvml "${nvml%% *}" "${nvml#* }"
fi

# ---- b: ncclsmoke launch --nproc-per-node 4 over NET/Socket, pinned -----------------------------
if want b && enough_time b; then
  say "b: ncclsmoke launch --nproc-per-node 4, synthetic, NET/Socket (pin)"
  run_case b 4 $CAP_B "${SMALL[@]}" --nccl-net Socket --nccl-policy pin
  load_case b
  check_pass_socket b "launch --nproc-per-node 4"
fi

# ---- h: pairwise rounds through 2-rank NCCL communicators -----------------------------------------
if want h && enough_time h; then
  say "h: launch --nproc-per-node 4 --pairwise, synthetic, NET/Socket: a 2-rank communicator per pair"
  run_case h 4 $CAP_H --min-bytes 1M --max-bytes 4M --factor 4 --iters 3 --warmup-iters 1 \
    --nccl-net Socket --nccl-policy observe --pairwise --pairwise-bytes 1M
  load_case h
  hsum=$("$PY" - "$WORK/h/verdict.json" <<'PYEOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception:
    print("bad no_verdict.json"); sys.exit(0)
ph = [p for p in v.get("phases", []) if p.get("name") == "pairwise:nccl"]
pairs = set()
for i in v.get("identities", []):
    if i.get("transport") != "nccl":
        continue
    for s in i.get("observed", {}).get("pairwise", []):
        if s.get("time_us") is not None and not s.get("error"):
            pairs.add((min(i["rank"], s["peer"]), max(i["rank"], s["peer"])))
slow = sorted({f["code"] for f in v.get("findings", []) if f.get("code") in ("SLOW_HOST", "SLOW_LINK")})
ok = ph and ph[0].get("status") == "pass" and len(pairs) == 6 and not slow
print("ok" if ok else "bad", "phase=%s pairs=%d/6 slow=%s detail=%s" % (
    ph[0].get("status") if ph else "absent", len(pairs), ",".join(slow) or "-",
    (ph[0].get("detail", "") if ph else "")[:120].replace(" ", "_")))
PYEOF
)
  if [ "$RC" = 0 ] && [ "${hsum%% *}" = ok ]; then row h PASS "rc=0 ${hsum#* }"
  else row h FAIL "rc=$RC ${hsum#* } $(first_finding "$WORK/h/verdict.json")"; fi
fi

# ---- c, d in parallel: init failures --------------------------------------------------------------
if { want c || want d; } && enough_time c; then
  say "c: pin a network that does not exist; d: observe Libfabric where no plugin exists"
  run_case c 2 $CAP_CD --min-bytes 1M --max-bytes 1M --iters 1 --nccl-net NoSuchNet --nccl-policy pin &
  pc=$!
  run_case d 2 $CAP_CD --min-bytes 1M --max-bytes 1M --iters 1 --nccl-net Libfabric --nccl-policy observe &
  pd=$!
  wait "$pc" "$pd"
  load_case c
  read -r verdict _code codes nets wrong rows _ <<<"$SUMMARY"
  if [ "$RC" = 1 ] && [[ ",$codes," == *",TRANSPORT_INIT_FAILED,"* ]]; then
    row c PASS "rc=$RC verdict=$verdict findings=$codes"
  else
    row c FAIL "rc=$RC verdict=$verdict findings=$codes (want rc=1 with TRANSPORT_INIT_FAILED) $(first_finding "$WORK/c/verdict.json")"
  fi
  load_case d
  read -r verdict _code codes nets wrong rows _ <<<"$SUMMARY"
  if [ "$RC" != 0 ] && [[ ",$codes," == *",SILENT_FALLBACK,"* ]]; then
    row d PASS "rc=$RC verdict=$verdict findings=$codes network=$nets"
  else
    row d FAIL "rc=$RC verdict=$verdict findings=$codes network=$nets (want SILENT_FALLBACK, rc!=0) $(first_finding "$WORK/d/verdict.json")"
  fi
fi

# f must be done before anything is timed
[ -n "$F_PID" ] && eval_interop

# ---- e: torch vs ncclsmoke, same NCCL library and environment, mean over ranks ------------------
if want e && enough_time e; then
  say "e: torch.distributed all_reduce vs ncclsmoke at 64 MiB and 256 MiB"
  SIZES=(67108864 268435456)
  E_SWEEP=(--min-bytes 64M --max-bytes 256M --factor 4 --iters 20 --warmup-iters 5)
  NCCL_ARGS=()
  # the very library torch uses (unless COMMON already names it)
  [ -n "$TORCH_NCCL" ] && [ ${#NCCL_LIB_ARGS[@]} -eq 0 ] && NCCL_ARGS=(--nccl-lib "$TORCH_NCCL")
  mkdir -p "$WORK/e"
  TORCH_ARGS=(--ranks 2 --sizes "64M,256M" --iters 20 --warmup 5)
  # dry run: the same script on gloo (CPU), small sizes: its arithmetic and output, not a figure
  E_TRANSPORT=nccl
  if [ "$DRY" = 1 ]; then
    # the same arithmetic on CPU: torch on gloo vs ncclsmoke's socket transport, small sizes
    TORCH_ARGS=(--backend gloo --ranks 2 --sizes "1M,4M" --iters 3 --warmup 1)
    SIZES=(1048576 4194304)
    E_SWEEP=(--min-bytes 1M --max-bytes 4M --factor 4 --iters 3 --warmup-iters 1)
    E_TRANSPORT=socket
    CASE_COMMON=(--transports socket)
  fi
  tt=$(budget $CAP_TORCH)
  bounded "$tt" "$WORK/e/torch.log" env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
    NCCL_DEBUG_FILE="$WORK/e/torch-nccl.%h.%p" \
    "$PY" "$ROOT/bench/gpu/torch_allreduce.py" "${TORCH_ARGS[@]}" \
    --op-timeout $(( tt / 2 )) --timeout $(( tt - 5 )) --json "$WORK/e/torch.json"
  TRC=$?
  TORCH_NET=$(grep -h -o 'Using network .*' "$WORK"/e/torch-nccl.* 2>/dev/null | sort -u | sed 's/Using network //' | paste -sd, -)
  TORCH_LOGS=$(find "$WORK/e" -maxdepth 1 -name 'torch-nccl.*' -printf '%f\n' | sort | paste -sd, -)
  if [ "$TRC" != 0 ]; then
    row_cpu e-torch FAIL "torch reference failed rc=$TRC: $(grep -m1 -E 'Error|error' "$WORK/e/torch.log" | cut -c1-200); see e/torch.log"
  elif [ "$DRY" = 1 ]; then
    row_cpu e-torch PASS "gloo dry run of torch_allreduce.py: $(grep -c '^torch all_reduce' "$WORK/e/torch.log") sizes, mean and slowest rank printed"
  fi
  if [ "$DRY" = 1 ]; then run_case e 2 $CAP_E "${E_SWEEP[@]}"
  else run_case e 2 $CAP_E "${E_SWEEP[@]}" --nccl-net Socket --nccl-policy observe "${NCCL_ARGS[@]}"; fi
  CASE_COMMON=("${COMMON[@]}")
  load_case e
  read -r verdict _code codes nets wrong rows _ <<<"$SUMMARY"
  [ "$RC" = 0 ] || row e FAIL "ncclsmoke rc=$RC verdict=$verdict findings=$codes $(first_finding "$WORK/e/verdict.json")"
  row_cpu e INFO "NCCL: ncclsmoke $(nccl_version_of "$WORK/e/verdict.json") ${NCCL_ARGS[*]:-${NCCL_LIB_ARGS[*]:-(system library)}}; torch ${TORCH_NCCL_VER:-?} (its NCCL_DEBUG_FILE=torch-nccl.%h.%p gave: ${TORCH_LOGS:-no file}); data wrong=$wrong"
  for s in "${SIZES[@]}"; do
    mib=$(( s >> 20 ))
    # torch's all_reduce is in place: compared with ncclsmoke's in-place row
    read -r ours ours_oop <<<"$(busbw_at "$WORK/e/verdict.json" "$s" "$E_TRANSPORT")"
    [ "$ours" = - ] && ours=""
    oop_txt=-
    [ "${ours_oop:--}" != - ] && oop_txt=$(printf '%.2f' "$ours_oop")
    read -r theirs theirs_max < <("$PY" -c 'import json,sys
try:
  d=json.load(open(sys.argv[1])); r=next(r for r in d["rows"] if r["bytes"]==int(sys.argv[2]))
  print(r["busbw_gbps"], r.get("busbw_max_gbps", ""))
except Exception: print("- -")' "$WORK/e/torch.json" "$s" 2>/dev/null)
    if [ -n "$ours" ] && [ "${theirs:--}" != - ]; then
      ratio=$("$PY" -c 'import sys; print("%.3f" % (float(sys.argv[1]) / float(sys.argv[2])))' "$ours" "$theirs")
      verdict_r=$("$PY" -c 'import sys; print("PASS" if float(sys.argv[1]) >= 0.97 else "FAIL")' "$ratio")
      row "e${mib}M" "$verdict_r" "$(printf 'in-place busbw, mean over ranks: ncclsmoke/%s %.2f GB/s (out-of-place %s GB/s), torch %.2f GB/s (slowest rank %.2f); ratio %s (goal >= 0.97); nets ncclsmoke=%s torch=%s' \
        "$E_TRANSPORT" "$ours" "$oop_txt" "$theirs" "${theirs_max:-0}" "$ratio" "$nets" "${TORCH_NET:-?}")"
    else
      row "e${mib}M" FAIL "missing busbw: ncclsmoke='${ours}' torch='${theirs:-}'"
    fi
  done
fi

# ---- g: a current torchrun launching ncclsmoke, three rendezvous backends in parallel -----------
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# run_torchrun NAME LIMIT torchrun-args...: writes g-NAME/{torchrun.log,rc,verdict.json}
run_torchrun() {
  local name=$1 t dl; t=$(budget "$2"); shift 2
  local dir="$WORK/g-$name"
  mkdir -p "$dir"
  read -r -a dl <<<"$(deadline_args "$t")"
  local cmd=("$PY" -m torch.distributed.run --nnodes 1 --nproc_per_node "$NPROC_G" --max_restarts 0
             --monitor_interval 1 "$@" --no_python "$NS" run "${COMMON[@]}" --nccl-net Socket
             --nccl-policy observe --min-bytes 1M --max-bytes 4M --factor 4 --iters 2 --warmup-iters 1
             "${dl[@]}" --out-dir "$dir")
  echo "timeout -k 5 $t ${cmd[*]}" >"$dir/command.txt"
  bounded "$t" "$dir/torchrun.log" env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT \
    "${cmd[@]}"
  echo $? >"$dir/rc"
}
check_torchrun() {
  local name=$1 dir="$WORK/g-$1" verdict _code codes nets wrong rows source hosted dialect era job
  RC=$(cat "$dir/rc" 2>/dev/null || echo none)
  read -r verdict _code codes nets wrong rows <<<"$(summarize "$dir/verdict.json")"
  read -r source hosted dialect era job <<<"$(world_of "$dir/verdict.json")"
  local detail="rc=$RC verdict=$verdict ranks=$NPROC_G source=$source store=${hosted//_/ }/$dialect/${era//_/ } job=$job network=$nets wrong=$wrong findings=$codes"
  if [ "$RC" = 0 ] && [ "$verdict" = pass ] && [ "$source" = torchrun ] && [ "$hosted" = torchelastic_agent ] \
     && [ "$wrong" = 0 ]; then
    row "g-$name" PASS "$detail"
  else
    row "g-$name" FAIL "$detail (want rc=0 pass, torchrun, the agent's store) $(first_finding "$dir/verdict.json") $(grep -m1 -E 'Error|error' "$dir/torchrun.log" | cut -c1-160)"
  fi
}
if ! want g; then :
elif [ "$DRY" = 1 ] && [ "$TORCH_MAJOR" -lt 2 ]; then
  for n in static c10d standalone; do
    row_cpu "g-$n" SKIP "dry run with torch $TORCH_VER: its torchrun crashes on Python 3.11 (README, Launching it); needs torch 2.x"
  done
elif [ -z "$TORCH_VER" ]; then
  row g FAIL "torch not importable by $PY: no torchrun"
elif enough_time g; then
  say "g: torchrun --nproc_per_node $NPROC_G --no_python ncclsmoke run (static, c10d, standalone)"
  p1=$(free_port); p2=$(free_port)
  run_torchrun static $CAP_G --rdzv_backend static --master_addr 127.0.0.1 --master_port "$p1" \
    --rdzv_id gpucheck-static &
  g1=$!
  run_torchrun c10d $CAP_G --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$p2" --rdzv_id gpucheck-c10d &
  g2=$!
  run_torchrun standalone $CAP_G --standalone &
  g3=$!
  wait "$g1" "$g2" "$g3"
  for n in static c10d standalone; do check_torchrun "$n"; done
fi

# ---- m: one rank per real GPU, where there are several ---------------------------------------
if ! want m; then :
elif [ "$NGPU" -ge 2 ] && enough_time m; then
  say "m: $NGPU ranks, one per GPU (NVLink/P2P, not synthetic)"
  mkdir -p "$WORK/m"
  tm=$(budget $CAP_M)
  read -r -a dl <<<"$(deadline_args "$tm")"
  bounded "$tm" "$WORK/m/launch.log" "$NS" launch --nproc-per-node "$NGPU" --transports nccl \
    "${CUDART_ARGS[@]}" "${NCCL_LIB_ARGS[@]}" "${dl[@]}" --min-bytes 64M --max-bytes 256M --factor 4 \
    --iters 20 --warmup-iters 5 --nccl-policy observe --out-dir "$WORK/m"
  echo $? >"$WORK/m/rc"
  load_case m
  read -r verdict _code codes nets wrong rows _ <<<"$SUMMARY"
  read -r bw bw_oop <<<"$(busbw_at "$WORK/m/verdict.json" 268435456)"
  if [ "$RC" = 0 ] && [ "$verdict" = pass ] && [ "$wrong" = 0 ]; then
    row m PASS "$NGPU GPUs: busbw at 256 MiB ${bw} GB/s in place, ${bw_oop} out of place (mean over ranks), network=$nets, $(log_seen "$WORK/m/verdict.json")"
  else
    row m FAIL "rc=$RC verdict=$verdict findings=$codes wrong=$wrong $(first_finding "$WORK/m/verdict.json")"
  fi
elif [ "$NGPU" -lt 2 ]; then
  row_cpu m SKIP "one rank per real GPU needs 2+ GPUs; this machine has $NGPU"
fi

finish "$FAILED"
