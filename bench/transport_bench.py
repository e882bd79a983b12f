#!/usr/bin/python3
"""Transport benchmark, side by side in one run: 2 ranks on loopback, float32 sum
all-reduce, the same sizes, warm-up and iteration counts for every contender:

  socket    ncclsmoke launch -n 2 --transports socket            (out-of-place world rows)
  gloo      torch 1.13 gloo all_reduce, 2 processes, GLOO_SOCKET_IFNAME=lo (in place: gloo's only form)
  ompi-tcp  Open MPI MPI_Allreduce, pml ob1 + btl tcp,self on lo (bench/allreduce_ref/mpi_allreduce_ref.c)
  fabric    ncclsmoke launch -n 2 --transports fabric --fabric-provider tcp
  ompi-ofi  Open MPI MPI_Allreduce, pml cm + mtl ofi, libfabric provider tcp
  stream    the physical reference: one TCP stream over loopback (iperf3 -t 2), GB/s
  bidir     for information: two streams at once, one each way (iperf3 --bidir), GB/s per
            direction. A 2-rank ring sends and receives `bytes` per rank at the same time, so
            this is closer than one stream to what loopback gives a 2-rank ring (iperf3 is
            single-threaded with 128 KiB writes: a reference, not a ceiling).

Contenders run one after another, their order rotated every round (R rounds); the figures are
per-size medians over the rounds. Every contender times the same schedule as ncclsmoke's sweep
(check, warm-up, line-up, back-to-back timed iterations, each rank's mean), and the time used is
the max over ranks. busbw = algbw * 2(n-1)/n (= algbw for n = 2), GB/s = 1e9 B/s.

    /usr/bin/python3 bench/transport_bench.py [--build-dir build] [--quick] [--rounds 5]
                                              [--json-out FILE]

Goals, at 64 MiB: socket >= 1.2x gloo, >= 1.2x ompi-tcp, >= 0.8x stream;
fabric >= 1.0x ompi-ofi. Only 127.0.0.1 is used. Every process is started in its own session
and killed on exit; no round starts past --budget. Exit 1 when a contender failed in every
round or a data check found wrong elements.
"""

import argparse
import atexit
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF_DIR = os.path.join(ROOT, "bench", "allreduce_ref")
MIB = 1 << 20
WORLD = 2
BUSBW_FACTOR = 2 * (WORLD - 1) / WORLD
CONTENDERS = ("socket", "gloo", "ompi-tcp", "fabric", "ompi-ofi", "stream", "bidir")
STREAMS = ("stream", "bidir")
MPIRUN = ["mpirun", "--allow-run-as-root", "-np", str(WORLD)]
OMPI_TCP = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
            "--mca", "oob_tcp_if_include", "lo"]
OMPI_OFI = ["--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "tcp",
            "--mca", "oob_tcp_if_include", "lo", "-x", "FI_PROVIDER", "-x", "FI_TCP_IFACE"]
FI_ENV = {"FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo"}

_live = set()  # process groups still running


def _kill_all():
    for pgid in list(_live):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        _live.discard(pgid)


def _on_signal(signum, _frame):
    _kill_all()
    sys.exit(128 + signum)


def run_proc(cmd, timeout, env=None, cwd=None):
    """Runs cmd in its own session; kills the whole group on timeout. -> (rc, stdout, stderr);
    rc is None on timeout."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=full_env, cwd=cwd,
                             start_new_session=True)
        _live.add(p.pid)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        # Children (ranks, orted helpers) must not outlive their launcher.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        _live.discard(p.pid)
        out.seek(0)
        err.seek(0)
        return rc, out.read().decode(errors="replace"), err.read().decode(errors="replace")


def tail(text, n=600):
    text = text.strip()
    return text[-n:].replace("\n", " | ")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sizes_of(lo, hi):
    out, b = [], lo
    while b <= hi:
        out.append(b)
        b *= 2
    return out


def busbw(nbytes, time_us):
    return nbytes / (time_us * 1e-6) / 1e9 * BUSBW_FACTOR if time_us and time_us > 0 else None


# --- contenders: each returns {"rows": {bytes: {"busbw", "time_us", "wrong"}}} or {"gbps"},
# with "error" set when the run failed.


def run_ncclsmoke(args, transport):
    out_dir = tempfile.mkdtemp(prefix=f"tbench-{transport}-")
    try:
        cmd = [args.ncclsmoke, "launch", "-n", str(WORLD), "--transports", transport,
               "--store-bind", "127.0.0.1",
               "--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes),
               "--factor", "2", "--warmup-iters", str(args.warmup), "--iters", str(args.iters),
               "--dtype", "float32", "--op-timeout", str(args.op_timeout),
               "--transport-timeout", str(args.run_timeout), "--timeout", str(args.run_timeout + 30),
               "--out-dir", out_dir, "--quiet"]
        env = {}
        if transport == "socket":
            if args.socket_nconn:
                cmd += ["--socket-nconn", str(args.socket_nconn)]
            if args.socket_chunk:
                cmd += ["--socket-chunk", args.socket_chunk]
        else:
            cmd += ["--fabric-provider", "tcp"]
            env = dict(FI_ENV)
        # cwd = the scratch dir, so anything a crashing rank drops (core, backtrace) goes too.
        rc, out, err = run_proc(cmd, args.run_timeout + 45, env=env, cwd=out_dir)
        path = os.path.join(out_dir, "verdict.json")
        if not os.path.exists(path):
            return {"error": f"rc={rc}, no verdict.json: {tail(out + err)}"}
        with open(path) as f:
            doc = json.load(f)
        world, per_rank = {}, {}
        for r in doc.get("transports", []):
            if r.get("transport") != transport or r.get("in_place"):
                continue
            b = r.get("bytes")
            if r.get("rank", -1) == -1:  # the world row (its rank may be left out)
                world[b] = r
            elif isinstance(r.get("time_us"), (int, float)):
                per_rank.setdefault(b, []).append(r["time_us"])
        rows = {}
        for b, w in world.items():
            t = max(per_rank[b]) if len(per_rank.get(b, [])) == WORLD else w.get("time_us")
            rows[b] = {"busbw": busbw(b, t), "time_us": t, "wrong": w.get("wrong")}
        res = {"rows": rows}
        missing = [b for b in sizes_of(args.min_bytes, args.max_bytes) if b not in rows]
        if missing or rc is None:
            codes = [f.get("code") for f in doc.get("findings", []) if isinstance(f, dict)]
            res["error"] = (f"rc={rc}, sizes missing {[b // MIB for b in missing]} MiB, "
                            f"findings {codes}: {tail(err or out, 300)}")
        ids = [i for i in doc.get("identities", [])
               if isinstance(i, dict) and i.get("transport") == transport]
        if ids:
            res["identity"] = ids[0].get("observed")
        return res
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def parse_json_lines(text):
    rows = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        b = d["bytes"]
        rows[b] = {"busbw": busbw(b, d["time_us_max"]), "time_us": d["time_us_max"],
                   "wrong": d.get("wrong")}
    return rows


def finish(args, rc, out, err):
    rows = parse_json_lines(out)
    res = {"rows": rows}
    missing = [b for b in sizes_of(args.min_bytes, args.max_bytes) if b not in rows]
    if rc != 0 or missing:
        res["error"] = ("timed out" if rc is None else f"rc={rc}") + \
            (f", sizes missing {[b // MIB for b in missing]} MiB" if missing else "") + \
            f": {tail(err or out)}"
    return res


def run_gloo(args):
    cmd = ["/usr/bin/python3", os.path.join(REF_DIR, "gloo_allreduce.py"), "--world", str(WORLD),
           "--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes),
           "--warmup", str(args.warmup), "--iters", str(args.iters),
           "--timeout", str(args.run_timeout)]
    return finish(args, *run_proc(cmd, args.run_timeout + 15, env={"GLOO_SOCKET_IFNAME": "lo"}))


def run_ompi(args, mca, env):
    cmd = MPIRUN + mca + [args.mpi_ref, str(args.min_bytes), str(args.max_bytes),
                          str(args.warmup), str(args.iters)]
    return finish(args, *run_proc(cmd, args.run_timeout + 15, env=env))


def run_stream(args, bidir=False):
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    _live.add(server.pid)
    try:
        # The server needs a moment to listen; a probe connection would use up its one (-1)
        # test, so the client itself retries while the connection is refused.
        for _ in range(30):
            time.sleep(0.2)
            rc, out, err = run_proc(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t",
                                     str(args.stream_seconds), "-J"] + (["--bidir"] if bidir else []),
                                    args.stream_seconds + 20)
            if "Connection refused" not in out or server.poll() is not None:
                break
        try:
            end = json.loads(out)["end"]
            bps = end["sum_received"]["bits_per_second"]
            if bidir:  # per direction: the mean of the two directions
                bps = (bps + end["sum_received_bidir_reverse"]["bits_per_second"]) / 2
            return {"gbps": bps / 8 / 1e9}
        except (ValueError, KeyError) as e:
            return {"error": f"rc={rc}, iperf3 output unreadable ({e}): {tail(err or out)}"}
    finally:
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        server.wait()
        _live.discard(server.pid)


def run_contender(args, name):
    if name == "socket":
        return run_ncclsmoke(args, "socket")
    if name == "fabric":
        return run_ncclsmoke(args, "fabric")
    if name == "gloo":
        return run_gloo(args)
    if name == "ompi-tcp":
        return run_ompi(args, OMPI_TCP, {})
    if name == "ompi-ofi":
        return run_ompi(args, OMPI_OFI, FI_ENV)
    return run_stream(args, bidir=name == "bidir")


# --- set-up, report


def build_mpi_ref(build_dir):
    src = os.path.join(REF_DIR, "mpi_allreduce_ref.c")
    exe = os.path.join(build_dir, "mpi_allreduce_ref")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        p = subprocess.run(["mpicc", "-O2", "-Wall", "-o", exe, src], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        if p.returncode != 0:
            sys.exit(f"transport_bench: mpicc failed:\n{p.stdout}")
    return exe


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def loadavg():
    return "%.2f %.2f %.2f" % os.getloadavg()


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(x, w=8, p=3):
    return f"{x:{w}.{p}f}" if isinstance(x, (int, float)) else f"{'-':>{w}}"


def fmt_ratio(x, w=7):
    return f"{x:{w - 1}.2f}x" if isinstance(x, (int, float)) else f"{'-':>{w}}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"),
                    help="where ncclsmoke is built (the MPI reference is compiled into it)")
    ap.add_argument("--quick", action="store_true", help="1..64 MiB, 3 rounds, budget 100 s")
    ap.add_argument("--rounds", type=int, help="rounds (default 5; --quick 3)")
    ap.add_argument("--min-bytes", type=int, default=1 * MIB)
    ap.add_argument("--max-bytes", type=int, help="default 256 MiB (--quick 64 MiB)")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up iterations per size (all)")
    ap.add_argument("--iters", type=int, default=5, help="timed iterations per size (all)")
    ap.add_argument("--gate-bytes", type=int, default=64 * MIB, help="size the goals are judged at")
    ap.add_argument("--contenders", default=",".join(CONTENDERS),
                    help="comma-separated subset of " + ",".join(CONTENDERS))
    ap.add_argument("--socket-nconn", type=int, help="passed to the socket transport")
    ap.add_argument("--socket-chunk", help="passed to the socket transport (e.g. 1M)")
    ap.add_argument("--stream-seconds", type=int, default=2, help="iperf3 -t")
    ap.add_argument("--budget", type=float, help="no round starts after this many seconds "
                    "(default 450; --quick 100)")
    ap.add_argument("--run-timeout", type=float, help="one contender run (default 90 s; --quick 40 s)")
    ap.add_argument("--op-timeout", type=float, default=20, help="one ncclsmoke collective (s)")
    ap.add_argument("--json-out", help="write every round's figures and the medians here")
    args = ap.parse_args()
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.max_bytes = args.max_bytes or (64 if args.quick else 256) * MIB
    args.budget = args.budget or (100 if args.quick else 450)
    args.run_timeout = args.run_timeout or (40 if args.quick else 90)
    names = [c for c in args.contenders.split(",") if c]
    bad = [c for c in names if c not in CONTENDERS]
    if bad or not names:
        ap.error(f"unknown contenders {bad}; choose from {','.join(CONTENDERS)}")
    if args.min_bytes < 4 or args.max_bytes < args.min_bytes:
        ap.error("need 4 <= --min-bytes <= --max-bytes")

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    atexit.register(_kill_all)

    args.build_dir = os.path.abspath(args.build_dir)
    args.ncclsmoke = os.path.join(args.build_dir, "ncclsmoke")
    if ("socket" in names or "fabric" in names) and not os.access(args.ncclsmoke, os.X_OK):
        sys.exit(f"transport_bench: {args.ncclsmoke} not found (cmake --build {args.build_dir} "
                 "--target ncclsmoke)")
    if "ompi-tcp" in names or "ompi-ofi" in names:
        args.mpi_ref = build_mpi_ref(args.build_dir)
    for tool, users in (("iperf3", STREAMS), ("mpirun", ("ompi-tcp", "ompi-ofi"))):
        if any(u in names for u in users) and not shutil.which(tool):
            sys.exit(f"transport_bench: {tool} not installed")

    sizes = sizes_of(args.min_bytes, args.max_bytes)
    gate = max([b for b in sizes if b <= args.gate_bytes] or [sizes[0]])
    print(f"transport_bench: {WORLD} ranks on 127.0.0.1, float32 sum, sizes "
          f"{sizes[0] // MIB if sizes[0] >= MIB else sizes[0]}..{sizes[-1] // MIB} MiB, "
          f"warm-up {args.warmup}, iters {args.iters}, {args.rounds} rounds, contenders "
          f"{','.join(names)}")
    print(f"machine: {os.cpu_count()} CPUs, {cpu_model()}; load average at start {loadavg()}",
          flush=True)

    t_start = time.monotonic()
    rounds = []  # [{name: result}]
    loads = []
    for r in range(args.rounds):
        elapsed = time.monotonic() - t_start
        if rounds:
            per_round = elapsed / len(rounds)
            if elapsed + per_round > args.budget:
                print(f"budget: stopping after {len(rounds)} rounds "
                      f"({elapsed:.0f} s, about {per_round:.0f} s per round, budget {args.budget:.0f} s)")
                break
        order = names[r % len(names):] + names[:r % len(names)]
        results = {}
        for name in order:
            t0 = time.monotonic()
            res = run_contender(args, name)
            res["wall_s"] = round(time.monotonic() - t0, 2)
            results[name] = res
        loads.append(loadavg())
        rounds.append(results)
        brief = []
        for name in names:
            res = results[name]
            if "error" in res and not res.get("rows") and "gbps" not in res:
                brief.append(f"{name}=FAILED")
            elif name in STREAMS:
                brief.append(f"{name}={res['gbps']:.2f}")
            else:
                g = res["rows"].get(gate, {}).get("busbw")
                brief.append(f"{name}={fmt(g, 0, 2)}" + ("(!)" if "error" in res else ""))
        print(f"round {r + 1}/{args.rounds} ({time.monotonic() - t_start:.0f} s, load {loads[-1]}), "
              f"busbw GB/s at {gate // MIB} MiB: " + " ".join(brief), flush=True)
        for name in names:
            if "error" in results[name]:
                print(f"  {name}: {results[name]['error']}", flush=True)

    # Medians per contender and size.
    med = {}
    wrong = {}
    for name in names:
        if name in STREAMS:
            med[name] = median([rd[name].get("gbps") for rd in rounds])
            continue
        med[name] = {}
        for b in sizes:
            vals = [rd[name].get("rows", {}).get(b, {}).get("busbw") for rd in rounds]
            med[name][b] = median(vals)
            for rd in rounds:
                w = rd[name].get("rows", {}).get(b, {}).get("wrong")
                if isinstance(w, int) and w > 0:
                    wrong.setdefault(name, []).append((b, w))

    def m(name, b):
        if name not in med:
            return None
        return med[name] if name in STREAMS else med[name].get(b)

    print()
    print(f"busbw GB/s (median of {len(rounds)} rounds; time = max over ranks; n=2 so busbw = algbw)")
    cols = [c for c in ("socket", "gloo", "ompi-tcp", "fabric", "ompi-ofi") if c in names]
    ratios = [("sock/gloo", "socket", "gloo"), ("sock/ompi", "socket", "ompi-tcp"),
              ("sock/strm", "socket", "stream"), ("sock/bidir", "socket", "bidir"),
              ("fab/ompiofi", "fabric", "ompi-ofi")]
    ratios = [r for r in ratios if r[1] in names and r[2] in names]
    header = f"{'size':>8} " + " ".join(f"{c:>9}" for c in cols) + " " + \
        " ".join(f"{r[0]:>11}" for r in ratios)
    print(header)
    table = []
    for b in sizes:
        line = f"{b // MIB:>4} MiB " + " ".join(fmt(m(c, b), 9) for c in cols) + " " + \
            " ".join(fmt_ratio(ratio(m(r[1], b), m(r[2], b)), 11) for r in ratios)
        print(line)
        table.append(line)
    for name, what in (("stream", "single TCP stream over loopback"),
                       ("bidir", "two streams, one each way (--bidir), per direction")):
        if name in names:
            line = (f"{what} (iperf3 -t {args.stream_seconds}): {fmt(med[name], 0, 3)} GB/s "
                    "(median; rounds: " + ", ".join(fmt(rd[name].get("gbps"), 0, 2) for rd in rounds) + ")")
            print(line)
            table.append(line)

    # Goals, at the gate size.
    print()
    goals = [("socket", "gloo", 1.2), ("socket", "ompi-tcp", 1.2), ("socket", "stream", 0.8),
             ("fabric", "ompi-ofi", 1.0)]
    goal_lines = []
    for a, b, need in goals:
        if a not in names or b not in names:
            continue
        x, y = m(a, gate), m(b, gate)
        q = ratio(x, y)
        won = 0
        for rd in rounds:
            xa = rd[a].get("rows", {}).get(gate, {}).get("busbw")
            yb = rd[b].get("gbps") if b in STREAMS else rd[b].get("rows", {}).get(gate, {}).get("busbw")
            won += bool(xa and yb and xa / yb >= need)
        verdict = "PASS" if q is not None and q >= need else "MISS"
        line = (f"goal {a} >= {need:.1f}x {b} at {gate // MIB} MiB: {verdict} "
                f"({a} {fmt(x, 0, 3)} GB/s, {b} {fmt(y, 0, 3)} GB/s, ratio {fmt(q, 0, 2)}x; "
                f"{won}/{len(rounds)} rounds met it)")
        print(line)
        goal_lines.append(line)
    print(f"load average per round: {'; '.join(loads)}; at end {loadavg()}; "
          f"wall {time.monotonic() - t_start:.0f} s")
    for name, ws in wrong.items():
        print(f"DATA CHECK FAILED: {name} wrong elements at " +
              ", ".join(f"{b // MIB} MiB: {w}" for b, w in ws))

    if args.json_out:
        def keyed(res):
            res = dict(res)
            if "rows" in res:
                res["rows"] = {str(k): v for k, v in res["rows"].items()}
            return res
        doc = {"sizes": sizes, "gate_bytes": gate, "warmup": args.warmup, "iters": args.iters,
               "cpus": os.cpu_count(), "cpu_model": cpu_model(), "loadavg_rounds": loads,
               "rounds": [{k: keyed(v) for k, v in rd.items()} for rd in rounds],
               "median_busbw_gbps": {k: (v if k in STREAMS else {str(b): x for b, x in v.items()})
                                     for k, v in med.items()},
               "table": [header] + table, "goals": goal_lines}
        with open(args.json_out, "w") as f:
            json.dump(doc, f, indent=1)

    failed = [n for n in names
              if rounds and all("error" in rd[n] and not rd[n].get("rows") and "gbps" not in rd[n]
                                for rd in rounds)]
    if failed:
        print(f"failed in every round: {', '.join(failed)}")
    return 1 if failed or wrong or not rounds else 0


if __name__ == "__main__":
    sys.exit(main())
