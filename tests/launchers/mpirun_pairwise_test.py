"""The pairwise rounds for the mpi transport under real mpirun: per-peer timings for MPI.

Each pair of the rounds forms a 2-rank communicator with MPI_Comm_create_group inside the mpirun
world the mpi transport opened (transports/mpi/mpi_transport.h), so an mpirun-launched cluster
gets the same pair times as socket, fabric and NCCL, and the link rules can tell a slow host
from a slow link (results/judging/link_rules.h).

Each rank runs in its own UTS namespace with host name mpihost<rank> (`unshare --uts`, as root),
so every pair is an inter-host link and the link rules really judge the samples; where unshare
cannot do that the ranks share the machine's name, and the "no SLOW_HOST / SLOW_LINK" check holds
trivially (said in the output).

Cases:
1. healthy: 4 ranks, `run --transports mpi --pairwise`, small sizes. The run passes; every rank's
   phase pairwise:mpi passes (3 rounds); every one of the 6 pairs has a sample on both sides, in
   the same round, with a time and no error; no SLOW_HOST or SLOW_LINK. The same run without
   --pairwise is timed too, for the cost of the rounds.
2. the mpi transport failed: the same 4 ranks with `--mca btl self` (Open MPI aborts in
   MPI_Init_thread; the mpi transport's child catches it) and `--transports mpi,socket
   --pairwise`: every rank ends (no hang), its pairwise:mpi phase is degraded and says why (its
   MPI is unusable: MPI_Init_thread failed), each of its mpi samples is an unavailable error and
   the rounds took well under a second, while pairwise:socket passes; no SLOW_HOST or SLOW_LINK
   (a pair the backend could not run is no link evidence), and rank 0 writes verdict.json with
   mpirun's defaults (a failing rank waits for it before its non-zero exit).
3. the mpi transport did not run: `ncclsmoke launch -n 2 --transports mpi,socket --pairwise`
   (no mpirun): pairwise:mpi is skipped, saying transport:mpi did not run and why.

Prints the wall times, each pair's time and the findings of the failed case.
Exit: 0 pass, 1 fail, 77 skipped (no mpirun, or the binary is missing).
Usage: /usr/bin/python3 mpirun_pairwise_test.py --binary build/ncclsmoke [--keep]
"""

import argparse
import itertools
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SCRUB = ("PET_", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_NAME",
         "NCCLSMOKE_", "TORCHELASTIC_", "SLURM_", "OMPI_", "PMIX_", "JOB_COMPLETION_INDEX")
SIZES = ["--min-bytes", "64K", "--max-bytes", "256K", "--gate-bytes", "256K",
         "--pairwise-bytes", "256K"]
NP = 4
FAILS = []


def log(msg):
    print("mpirun_pairwise: " + msg, flush=True)


def check(ok, what):
    log(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}


def uts_wrapper():
    """The argv prefix that runs a rank as host mpihost<rank>, or [] when unshare cannot."""
    unshare = shutil.which("unshare")
    if not unshare:
        return []
    try:
        p = subprocess.run([unshare, "--uts", "/bin/sh", "-c",
                            "hostname mpihost-probe && hostname"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if p.returncode != 0 or p.stdout.strip() != "mpihost-probe":
        return []
    return [unshare, "--uts", "/bin/sh", "-c",
            'hostname "mpihost$OMPI_COMM_WORLD_RANK" && exec "$@"', "sh"]


def mpirun_run(mpirun, binary, wrap, out_dir, run_args, mpi_args=(), limit=120):
    """Runs `ncclsmoke run` under mpirun; returns (rc, seconds, output)."""
    os.makedirs(out_dir, exist_ok=True)
    cmd = ([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(NP)] + list(mpi_args) +
           ["-x", "MASTER_ADDR=127.0.0.1", "-x", "MASTER_PORT=%d" % free_port(),
            "-x", "NCCLSMOKE_MPI_FINALIZE_TIMEOUT_S=10"] +
           wrap + [binary, "run", "--out-dir", out_dir, "--timeout", "60"] + run_args)
    log("starting: " + " ".join(cmd))
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            stdin=subprocess.DEVNULL)
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        check(False, "mpirun did not end within %d s (hang)" % limit)
    return proc.returncode, time.monotonic() - start, out


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        check(False, "cannot read %s: %s" % (path, e))
        return None


def phase(v, name):
    return next((p for p in v.get("phases", []) if p.get("name") == name), None)


def samples(v, transport):
    """rank -> that rank's pairwise samples for `transport` (its identity row's `pairwise`)."""
    out = {}
    for i in v.get("identities", []):
        if i.get("transport") == transport and i.get("rank", -1) >= 0:
            out.setdefault(i["rank"], []).extend((i.get("observed") or {}).get("pairwise", []))
    return out


def locals_of(out_dir):
    return {r: load(os.path.join(out_dir, "verdict.rank%d.json" % r)) for r in range(NP)}


def case_healthy(mpirun, binary, wrap, tmp):
    log("case 1: healthy, --transports mpi --pairwise")
    out_base = os.path.join(tmp, "base")
    rc0, wall0, _ = mpirun_run(mpirun, binary, wrap, out_base, ["--transports", "mpi"] + SIZES)
    out_dir = os.path.join(tmp, "healthy")
    rc, wall, out = mpirun_run(mpirun, binary, wrap, out_dir,
                               ["--transports", "mpi", "--pairwise"] + SIZES)
    log("wall time: %.2f s without --pairwise (rc %s), %.2f s with it (rc %s)" %
        (wall0, rc0, wall, rc))
    v = load(os.path.join(out_dir, "verdict.json"))
    if not check(rc == 0 and v is not None and v.get("verdict") == "pass",
                 "healthy: the run passes (mpirun rc %s, verdict %s)" %
                 (rc, v and v.get("verdict"))):
        log("output (tail):\n" + out[-4000:])
    if v is None:
        return
    hosts = sorted({r.get("host") for r in v.get("ranks", [])})
    distinct = len(hosts) == NP
    log("ranks' hosts: %s%s" % (hosts, "" if distinct else
                                 " (not distinct: the link rules judge no link here)"))
    if wrap:
        check(distinct, "healthy: every rank has its own host name (unshare --uts)")
    for r, lv in locals_of(out_dir).items():
        if lv is None:
            continue
        ph = phase(lv, "pairwise:mpi")
        check(ph is not None and ph.get("status") == "pass",
              "healthy: rank %d's pairwise:mpi passes: %s" % (r, ph and ph.get("detail")))
        if ph and r == 0:
            log("rank 0's pairwise:mpi: %.3f s: %s" % (ph.get("duration_s", 0), ph.get("detail")))
    got = samples(v, "mpi")
    by_pair = {}
    for r, ss in got.items():
        for s in ss:
            by_pair.setdefault(tuple(sorted((r, s.get("peer")))), []).append((r, s))
    want = set(itertools.combinations(range(NP), 2))
    check(set(by_pair) == want, "healthy: every pair of the %d ranks has a sample: %s" %
          (NP, sorted(by_pair)))
    for pair in sorted(want):
        ss = by_pair.get(pair, [])
        sides = sorted(r for r, _ in ss)
        rounds = {s.get("round") for _, s in ss}
        timed = all(isinstance(s.get("time_us"), (int, float)) and math.isfinite(s["time_us"]) and
                    s["time_us"] > 0 and not s.get("error") for _, s in ss)
        check(sides == list(pair) and len(rounds) == 1 and timed,
              "healthy: pair %s: both sides, one round, a time: %s" %
              (pair, ["rank %d: round %s, %.0f us, %.3f GB/s%s" %
                      (r, s.get("round"), s.get("time_us") or float("nan"),
                       s.get("busbw_gbps") or float("nan"),
                       ", error " + s["error"] if s.get("error") else "") for r, s in ss]))
    slow = [(f.get("code"), f.get("message")) for f in v.get("findings", [])
            if f.get("code") in ("SLOW_HOST", "SLOW_LINK")]
    check(not slow, "healthy: no SLOW_HOST / SLOW_LINK: %s" % slow)


def case_transport_failed(mpirun, binary, wrap, tmp):
    log("case 2: the mpi transport failed (--mca btl self), --transports mpi,socket --pairwise")
    out_dir = os.path.join(tmp, "failed")
    # Every rank fails, and mpirun kills the job's other processes at the first non-zero exit:
    # a failing rank stays until rank 0 has written the world's verdict (harness/run/gather.h), so
    # rank 0's verdict.json is there with mpirun's defaults.
    rc, wall, out = mpirun_run(mpirun, binary, wrap, out_dir,
                               ["--transports", "mpi,socket", "--pairwise"] + SIZES,
                               ["--mca", "btl", "self"], limit=100)
    log("wall time: %.2f s (mpirun rc %s)" % (wall, rc))
    v = load(os.path.join(out_dir, "verdict.json"))
    check(v is not None and v.get("verdict") == "fail",
          "failed: rank 0's verdict.json says fail: %s" % (v and v.get("verdict")))
    for r, lv in locals_of(out_dir).items():
        if lv is None:
            continue
        tp = phase(lv, "transport:mpi")
        check(tp is not None and tp.get("status") == "fail",
              "failed: rank %d's transport:mpi fails" % r)
        ph = phase(lv, "pairwise:mpi")
        detail = (ph or {}).get("detail", "")
        check(ph is not None and ph.get("status") == "degraded" and
              "MPI is unusable in this process because MPI_Init_thread failed" in detail,
              "failed: rank %d's pairwise:mpi is degraded and says why: %s" % (r, detail[:400]))
        check(ph is not None and ph.get("duration_s", 99) < 2.0,
              "failed: rank %d's mpi rounds took %.3f s (no waiting)" %
              (r, (ph or {}).get("duration_s", float("nan"))))
        ss = samples(lv, "mpi").get(r, [])
        check(len(ss) == NP - 1 and all(s.get("error", "").startswith("unavailable: ") for s in ss),
              "failed: rank %d's %d mpi samples are unavailable errors" % (r, len(ss)))
        sp = phase(lv, "pairwise:socket")
        check(sp is not None and sp.get("status") == "pass",
              "failed: rank %d's pairwise:socket still passes: %s" % (r, sp and sp.get("detail")))
    if v is not None:
        for f in v.get("findings", []):
            log("  failed case finding: %s %s: %s" % (f.get("code"), f.get("severity"),
                                                       f.get("message", "")[:200]))
        # A pair the backend could not run (its MPI failed) is no evidence about a link.
        slow = [f.get("hosts") for f in v.get("findings", [])
                if f.get("code") in ("SLOW_HOST", "SLOW_LINK")]
        check(not slow, "failed: no SLOW_HOST / SLOW_LINK from unavailable pairs: %s" % slow)
    if FAILS:
        log("output (tail):\n" + out[-4000:])


def case_not_run(binary, tmp):
    log("case 3: the mpi transport did not run (no mpirun), --transports mpi,socket --pairwise")
    out_dir = os.path.join(tmp, "not-run")
    os.makedirs(out_dir, exist_ok=True)
    cmd = [binary, "launch", "-n", "2", "--out-dir", out_dir, "--transports", "mpi,socket",
           "--pairwise"] + SIZES
    p = subprocess.run(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    v = load(os.path.join(out_dir, "verdict.json"))
    if v is None:
        log("output (tail):\n" + p.stdout[-3000:])
        return
    ph = phase(v, "pairwise:mpi")
    detail = (ph or {}).get("detail", "")
    check(ph is not None and ph.get("status") == "skipped" and
          "transport:mpi did not run" in detail and "mpirun" in detail,
          "not run: pairwise:mpi is skipped and says why: %s" % detail)
    sp = phase(v, "pairwise:socket")
    check(sp is not None and sp.get("status") == "pass",
          "not run: pairwise:socket passes: %s" % (sp and sp.get("detail")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/ncclsmoke")
    ap.add_argument("--keep", action="store_true", help="keep the out dirs")
    args = ap.parse_args()
    mpirun = shutil.which("mpirun")
    if not mpirun:
        log("SKIP: mpirun not found")
        return 77
    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        log("SKIP: binary %s not found" % binary)
        return 77
    wrap = uts_wrapper()
    log("ranks as hosts mpihost<rank> (unshare --uts): %s" % ("yes" if wrap else "no"))
    tmp = tempfile.mkdtemp(prefix="ncclsmoke-mpirun-pairwise-")
    try:
        case_healthy(mpirun, binary, wrap, tmp)
        case_transport_failed(mpirun, binary, wrap, tmp)
        case_not_run(binary, tmp)
    finally:
        if args.keep:
            log("out dirs kept: " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    for f in FAILS:
        log("FAIL: " + f)
    if not FAILS:
        log("PASS")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
