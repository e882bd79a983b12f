#!/usr/bin/env bash
# GPU check for the NCCL transport: one command, unattended, under 5 minutes, prints a table last.
#
#   bash bench/gpu/check.sh            # from the repository root, on a machine with one NVIDIA GPU
#
# Needs: nvidia-smi + driver, the CUDA runtime and NCCL (libcudart.so.*, libnccl.so.2 in the library
# search path, or the ones torch loaded), cmake + a C++20 compiler, the build dependencies of the
# top-level CMakeLists.txt (REQUIRED there: nlohmann-json >= 3.11, CLI11; results/: valijson —
# apt: nlohmann-json3-dev libcli11-dev libvalijson-dev; the machine is offline, so they must already
# be installed or be under NCCLSMOKE_DEPS_PREFIX), python3 with torch (for step e). Nothing else,
# no network.
#
# Steps (each under its own `timeout`, all under one overall deadline):
#   build  configure + build the ncclsmoke binary only (tests and benchmarks off)
#   a      2 synthetic ranks on the one GPU, --nccl-net Socket, observe: pass, data check, Socket seen
#   b      4 synthetic ranks, --nccl-net Socket, pin: pass, data check, Socket seen
#   c      pin a network that does not exist: exit 1, TRANSPORT_INIT_FAILED
#   d      observe --nccl-net Libfabric with no plugin: SILENT_FALLBACK (NCCL falls back to Socket)
#   e      torch.distributed all_reduce (same NCCL library, same env, 2 ranks on the one GPU) vs
#          ncclsmoke at 64 MiB and 256 MiB: busbw ratio ncclsmoke/torch (goal >= 0.95)
#
# Offline GPU machines without the -dev packages: run bench/gpu/bundle.sh on a Debian 12 machine
# first; its folder build-gpubundle/bundle (binary + libraries) is used when building here fails.
# Environment knobs: NCCLSMOKE_BIN (use this binary, skip the build), NCCLSMOKE_BUNDLE (default
# build-gpubundle/bundle), NCCLSMOKE_BUILD_DIR
# (default build-gpucheck), NCCLSMOKE_DEPS_PREFIX (extra CMAKE_PREFIX_PATH), PYTHON (default
# python3), CHECK_BUDGET_S (default 290), CHECK_OUT (default /tmp/ncclsmoke-gpucheck.<pid>).
# Exit status: 0 when every step met its expectation, 1 otherwise, 2 when the machine is unfit.
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${NCCLSMOKE_BUILD_DIR:-$ROOT/build-gpucheck}"
PY="${PYTHON:-python3}"
OUT="${CHECK_OUT:-/tmp/ncclsmoke-gpucheck.$$}"
BUDGET="${CHECK_BUDGET_S:-290}"
START=$(date +%s)
mkdir -p "$OUT"
declare -a TABLE=()
FAILED=0

say() { printf '[check %3ds] %s\n' "$(( $(date +%s) - START ))" "$*"; }
row() {  # row STEP RESULT DETAIL
  TABLE+=("$(printf '%-6s %-5s %s' "$1" "$2" "$3")")
  [ "$2" = "PASS" ] || [ "$2" = "INFO" ] || FAILED=1
  say "$1: $2 $3"
}
# Seconds for the next step: at most $1, never past the overall deadline (minimum 5).
budget() {
  local left=$(( BUDGET - ( $(date +%s) - START ) ))
  local t=$1
  [ "$left" -lt "$t" ] && t=$left
  [ "$t" -lt 5 ] && t=5
  echo "$t"
}
print_table() {
  echo
  echo "==================== ncclsmoke GPU check ($(( $(date +%s) - START )) s; files in $OUT) ===================="
  printf '%-6s %-5s %s\n' STEP RESULT DETAIL
  for r in "${TABLE[@]}"; do echo "$r"; done
  echo "=========================================================================================="
}
finish() { print_table; exit "$1"; }

# ---- preflight ---------------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
  row gpu FAIL "nvidia-smi not found: this script needs a machine with an NVIDIA GPU and its driver"
  finish 2
fi
if ! GPU_LINE=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1) \
   || [ -z "$GPU_LINE" ]; then
  row gpu FAIL "nvidia-smi failed: ${GPU_LINE:-no output}"
  finish 2
fi
row gpu INFO "$GPU_LINE"
NCCL_SYS=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
row nccl INFO "system libnccl.so.2: ${NCCL_SYS:-not in ldconfig cache}"

PROBE="{}"
if command -v "$PY" >/dev/null 2>&1; then
  PROBE=$(timeout "$(budget 60)" "$PY" "$ROOT/bench/gpu/torch_allreduce.py" --probe 2>"$OUT/probe.err" | tail -1)
  [ -n "$PROBE" ] || PROBE="{}"
fi
jget() { "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); v=d.get(sys.argv[2]); print("" if v is None else v)' "$1" "$2" 2>/dev/null; }
TORCH_VER=$(jget "$PROBE" torch); TORCH_NCCL=$(jget "$PROBE" libnccl); TORCH_NCCL_VER=$(jget "$PROBE" nccl_version)
TORCH_CUDART=$(jget "$PROBE" libcudart)
if [ -n "$TORCH_VER" ]; then
  row torch INFO "torch $TORCH_VER, NCCL $TORCH_NCCL_VER from ${TORCH_NCCL:-(statically linked)}"
else
  row torch FAIL "torch not importable by $PY (step e will fail): $(tail -1 "$OUT/probe.err" 2>/dev/null)"
fi

# The CUDA runtime for ncclsmoke: the system's if the loader finds one, else /usr/local/cuda's,
# else the one torch loaded.
CUDART_ARGS=()
if ! ldconfig -p 2>/dev/null | grep -q 'libcudart\.so'; then
  if ls /usr/local/cuda/lib64/libcudart.so* >/dev/null 2>&1; then
    export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  elif [ -n "$TORCH_CUDART" ]; then
    CUDART_ARGS=(--cudart-lib "$TORCH_CUDART")
  fi
fi

# NCCL for ncclsmoke: the system's libnccl.so.2 if the loader finds one, else the one torch loaded
# (a pip-installed torch carries its own under site-packages/nvidia/nccl/lib).
NCCL_LIB_ARGS=()
if [ -z "$NCCL_SYS" ] && [ -n "$TORCH_NCCL" ]; then
  NCCL_LIB_ARGS=(--nccl-lib "$TORCH_NCCL")
  row nccl INFO "no system libnccl.so.2: every step uses torch's, $TORCH_NCCL"
fi

# ---- build -------------------------------------------------------------------------------------
BIN="${NCCLSMOKE_BIN:-}"
# bench/gpu/bundle.sh's output: a binary plus the libraries an offline machine lacks.
BUNDLE="${NCCLSMOKE_BUNDLE:-$ROOT/build-gpubundle/bundle}"
use_bundle() {
  BIN="$BUNDLE/ncclsmoke"
  export LD_LIBRARY_PATH="$BUNDLE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  row build INFO "$1; using the bundle $BIN"
}
if [ -z "$BIN" ]; then
  CMAKE_ARGS=(-S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DNCCLSMOKE_TESTS=OFF -DNCCLSMOKE_BENCH=OFF)
  command -v ninja >/dev/null 2>&1 && CMAKE_ARGS+=(-G Ninja)
  [ -n "${NCCLSMOKE_DEPS_PREFIX:-}" ] && CMAKE_ARGS+=("-DCMAKE_PREFIX_PATH=$NCCLSMOKE_DEPS_PREFIX")
  if ! command -v cmake >/dev/null 2>&1; then
    if [ -x "$BUNDLE/ncclsmoke" ]; then use_bundle "cmake not found"
    else row build FAIL "cmake not found (or make a bundle elsewhere: bench/gpu/bundle.sh)"; finish 1; fi
  elif ! timeout "$(budget 60)" cmake "${CMAKE_ARGS[@]}" >"$OUT/configure.log" 2>&1; then
    missing=$(grep -o 'provided by "[^"]*"' "$OUT/configure.log" | sed 's/provided by //; s/"//g' | sort -u | tr '\n' ' ')
    if [ -x "$BUNDLE/ncclsmoke" ]; then
      use_bundle "cannot configure here${missing:+ (missing: $missing)}"
    else
      row build FAIL "cmake configure failed${missing:+; missing packages: $missing}(apt: see scripts/install-deps.sh; offline: run bench/gpu/bundle.sh on a Debian 12 machine and carry build-gpubundle/bundle, or set NCCLSMOKE_BIN); see $OUT/configure.log"
      finish 1
    fi
  elif ! timeout "$(budget 150)" cmake --build "$BUILD" --target ncclsmoke -j "$(nproc)" >"$OUT/build.log" 2>&1; then
    if [ -x "$BUNDLE/ncclsmoke" ]; then
      use_bundle "build failed here ($(grep -m1 -E 'error|Error' "$OUT/build.log"))"
    else
      row build FAIL "build failed or timed out: $(grep -m1 -E 'error|Error' "$OUT/build.log"); see $OUT/build.log"
      finish 1
    fi
  else
    BIN="$BUILD/ncclsmoke"
    row build PASS "$BIN ($(( $(date +%s) - START )) s so far)"
  fi
fi
[ -x "$BIN" ] || { row build FAIL "no executable at $BIN"; finish 1; }

# Same NCCL settings for every run, ncclsmoke and torch alike: loopback only, no network.
export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}"

# verdict.json → "verdict exit findings network wrong_total rows" (one line, for the table)
summarize() {
  "$PY" - "$1" <<'PYEOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception as e:
    print("none - - - - no verdict.json (%s)" % e); sys.exit(0)
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
# world-row busbw at one size (bytes): in-place row if there is one, else out-of-place
busbw_at() {
  "$PY" - "$1" "$2" <<'PYEOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception:
    print(""); sys.exit(0)
size = int(sys.argv[2])
rows = [r for r in v.get("transports", [])
        if r.get("transport") == "nccl" and "rank" not in r and r.get("bytes") == size
        and r.get("busbw_gbps") is not None]
rows.sort(key=lambda r: not r.get("in_place", False))
print(rows[0]["busbw_gbps"] if rows else "")
PYEOF
}

COMMON=(--transports nccl --nccl-share-gpu --timeout 100 --transport-timeout 80 --op-timeout 30
        "${CUDART_ARGS[@]}" "${NCCL_LIB_ARGS[@]}")
run_case() {  # run_case NAME RANKS TIMEOUT args... → sets RC and SUMMARY
  local name=$1 n=$2 t=$3; shift 3
  mkdir -p "$OUT/$name"
  timeout -k 5 "$(budget "$t")" "$BIN" launch -n "$n" "${COMMON[@]}" --out-dir "$OUT/$name" "$@" \
    >"$OUT/$name/launch.log" 2>&1
  RC=$?
  SUMMARY=$(summarize "$OUT/$name/verdict.json")
}
check_pass_socket() {  # NAME: pass, exit 0, no findings of severity error, Socket observed, data OK
  read -r verdict _code codes nets wrong rows <<<"$SUMMARY"
  local detail="rc=$RC verdict=$verdict findings=$codes network=$nets wrong=$wrong rows=$rows"
  if [ "$RC" = 0 ] && [ "$verdict" = pass ] && [ "$nets" = Socket ] && [ "$wrong" = 0 ]; then
    row "$1" PASS "$detail"
  else
    row "$1" FAIL "$detail (want rc=0 pass Socket wrong=0) $(first_finding "$OUT/$1/verdict.json")"
  fi
}

SMALL=(--min-bytes 1M --max-bytes 64M --factor 4 --iters 5 --warmup-iters 1)
say "a: 2 synthetic ranks over NET/Socket (observe)"
run_case a 2 60 "${SMALL[@]}" --nccl-net Socket --nccl-policy observe
check_pass_socket a

say "b: 4 synthetic ranks over NET/Socket (pin)"
run_case b 4 75 "${SMALL[@]}" --nccl-net Socket --nccl-policy pin
check_pass_socket b

say "c: pin a network that does not exist"
run_case c 2 45 --min-bytes 1M --max-bytes 1M --nccl-net NoSuchNet --nccl-policy pin
read -r verdict _code codes nets wrong rows <<<"$SUMMARY"
if [ "$RC" = 1 ] && [[ ",$codes," == *",TRANSPORT_INIT_FAILED,"* ]]; then
  row c PASS "rc=$RC verdict=$verdict findings=$codes"
else
  row c FAIL "rc=$RC verdict=$verdict findings=$codes (want rc=1 with TRANSPORT_INIT_FAILED) $(first_finding "$OUT/c/verdict.json")"
fi

say "d: observe Libfabric where no plugin exists"
run_case d 2 45 --min-bytes 1M --max-bytes 1M --nccl-net Libfabric --nccl-policy observe
read -r verdict _code codes nets wrong rows <<<"$SUMMARY"
if [ "$RC" != 0 ] && [[ ",$codes," == *",SILENT_FALLBACK,"* ]]; then
  row d PASS "rc=$RC verdict=$verdict findings=$codes network=$nets"
else
  row d FAIL "rc=$RC verdict=$verdict findings=$codes network=$nets (want SILENT_FALLBACK, rc!=0) $(first_finding "$OUT/d/verdict.json")"
fi

# ---- e: torch vs ncclsmoke, same NCCL library and environment ---------------------------------
say "e: torch.distributed all_reduce vs ncclsmoke at 64 MiB and 256 MiB"
SIZES=(67108864 268435456)
NCCL_ARGS=()
# the very library torch uses (unless COMMON already names it)
[ -n "$TORCH_NCCL" ] && [ ${#NCCL_LIB_ARGS[@]} -eq 0 ] && NCCL_ARGS=(--nccl-lib "$TORCH_NCCL")
timeout -k 5 "$(budget 90)" env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
  NCCL_DEBUG_FILE="$OUT/torch-nccl.%h.%p" \
  "$PY" "$ROOT/bench/gpu/torch_allreduce.py" --ranks 2 --sizes 64M,256M --iters 20 --warmup 5 \
  --timeout 80 --json "$OUT/torch.json" >"$OUT/torch.log" 2>&1
TRC=$?
TORCH_NET=$(grep -h -o 'Using network .*' "$OUT"/torch-nccl.* 2>/dev/null | sort -u | sed 's/Using network //' | paste -sd, -)
run_case e 2 75 --min-bytes 64M --max-bytes 256M --factor 4 --iters 20 --warmup-iters 5 \
  --nccl-net Socket --nccl-policy observe "${NCCL_ARGS[@]}"
read -r verdict _code codes nets wrong rows <<<"$SUMMARY"
if [ "$TRC" != 0 ]; then
  row e FAIL "torch reference failed rc=$TRC: $(grep -m1 -E 'Error|error' "$OUT/torch.log"); see $OUT/torch.log"
fi
[ "$RC" = 0 ] || row e FAIL "ncclsmoke rc=$RC verdict=$verdict findings=$codes $(first_finding "$OUT/e/verdict.json")"
row e INFO "NCCL: ncclsmoke $(nccl_version_of "$OUT/e/verdict.json") ${NCCL_ARGS[*]:-${NCCL_LIB_ARGS[*]:-(system library)}}; torch ${TORCH_NCCL_VER:-?}"
for s in "${SIZES[@]}"; do
  mib=$(( s >> 20 ))
  ours=$(busbw_at "$OUT/e/verdict.json" "$s")
  theirs=$("$PY" -c 'import json,sys
try:
  d=json.load(open(sys.argv[1])); print(next(r["busbw_gbps"] for r in d["rows"] if r["bytes"]==int(sys.argv[2])))
except Exception: print("")' "$OUT/torch.json" "$s" 2>/dev/null)
  if [ -n "$ours" ] && [ -n "$theirs" ]; then
    ratio=$("$PY" -c 'import sys; print("%.3f" % (float(sys.argv[1]) / float(sys.argv[2])))' "$ours" "$theirs")
    verdict_r=$("$PY" -c 'import sys; print("PASS" if float(sys.argv[1]) >= 0.95 else "FAIL")' "$ratio")
    row "e${mib}M" "$verdict_r" "$(printf 'busbw ncclsmoke %.2f GB/s, torch %.2f GB/s, ratio %s (goal >= 0.95); nets ncclsmoke=%s torch=%s' \
      "$ours" "$theirs" "$ratio" "$nets" "${TORCH_NET:-?}")"
  else
    row "e${mib}M" FAIL "missing busbw: ncclsmoke='${ours}' torch='${theirs}'"
  fi
done

finish "$FAILED"
