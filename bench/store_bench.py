#!/usr/bin/python3
"""Side-by-side store benchmark: our TCPStore server against PyTorch 1.13's, in one run.

Starts both servers on loopback, drives each with the same store_load workloads, alternating which
contender goes first from round to round, and prints medians over the rounds:

  barrier     N clients ADD a counter, the last arriver SETs a done key, all WAIT on it.
              barrier = t1 - t0 (t0: all N connected, t1: the last STOP_WAITING received);
              total = t1 - first connect() (includes connecting).
  throughput  C connections each doing SET+GET pairs (one round trip per pair) for D seconds.

ratio = how many times faster ours is: torch_time / ours_time for times, ours_ops / torch_ops for
throughput; > 1 means ours is faster. The comparison uses the legacy dialect (the only one torch
1.13 speaks); an extra column shows our server in the modern (VALIDATE/PING) dialect.

Run with Debian's interpreter, which can import torch:
  /usr/bin/python3 bench/store_bench.py [--build-dir build] [--quick] [--json-out results.json]
  [--server store_server]   (our server from the bench-only binary instead of ncclsmoke)
"""
import argparse
import atexit
import datetime
import json
import os
import platform
import re
import resource
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILDREN = []

TORCH_SERVER = r"""
import signal, sys, time
import torch, torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
print("torch", torch.__version__, "store listening on port", store.port, flush=True)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    time.sleep(3600)
"""


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def kill_children():
    for proc in CHILDREN:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 5
    for proc in CHILDREN:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def start_server(name, argv, log_path, timeout_s=30):
    """Starts a server in its own process group; returns (proc, port) from its first line."""
    log = open(log_path, "wb")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    CHILDREN.append(proc)
    deadline = time.monotonic() + timeout_s
    line = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
            if b"\n" in line:
                break
        elif proc.poll() is not None:
            break
    m = re.search(rb"listening on port (\d+)", line)
    if not m:
        raise RuntimeError(f"{name} server did not report its port within {timeout_s}s "
                           f"(exit {proc.poll()}, said {line[:200]!r}; log {log_path})")
    return proc, int(m.group(1)), line.decode(errors="replace").strip()


def run_load(store_load, port, dialect, workload, n, label, args):
    """One store_load process; returns its result objects (several for a repeated barrier)."""
    reps = args.barrier_reps if workload == "barrier" else 1
    argv = [store_load, "--host", "127.0.0.1", "--port", str(port), "--dialect", dialect,
            "--workload", workload, "--clients", str(n), "--format", "json", "--label", label,
            "--timeout", str(args.timeout), "--repeat", str(reps)]
    if workload == "throughput":
        argv += ["--duration", str(args.duration)]
    limit = reps * args.timeout + (args.duration if workload == "throughput" else 0) + 15
    try:
        out = subprocess.run(argv, capture_output=True, timeout=limit, text=True)
    except subprocess.TimeoutExpired:
        return [{"ok": False, "error": f"store_load did not finish within {limit}s"}]
    results = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if not results:
        results = [{"ok": False,
                    "error": f"store_load exit {out.returncode}: {out.stderr.strip()[:300]}"}]
    return results


def machine_context(build_dir):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(), "cpu": cpu,
        "commit": commit + ("-dirty" if dirty else ""), "build_dir": build_dir,
        "python": sys.executable, "loadavg_start": round(os.getloadavg()[0], 2),
    }


def fmt_value(metric, v):
    if v is None:
        return "ERR"
    if metric in ("barrier_s", "total_s"):
        return f"{v * 1000:.2f} ms"
    return f"{v:,.0f}"


def fmt_ratio(r):
    return f"{r:.2f}x" if r else "n/a"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--build-dir", default=os.environ.get("NCCLSMOKE_BUILD_DIR",
                                                          os.path.join(ROOT, "build")))
    p.add_argument("--rounds", type=int, default=None, help="rounds per point (default 5; quick 3)")
    p.add_argument("--barrier", default="64,256,1024", help="client counts for the barrier")
    p.add_argument("--barrier-reps", type=int, default=None,
                   help="barriers per contender per round, back to back (default 5; quick 3)")
    p.add_argument("--throughput", default=None,
                   help="connection counts for throughput (default 1,16,64; quick 1,64)")
    p.add_argument("--duration", type=float, default=None,
                   help="seconds per throughput run (default 2; quick 0.5)")
    p.add_argument("--timeout", type=float, default=30, help="seconds a store_load run may take")
    p.add_argument("--budget", type=float, default=None,
                   help="overall seconds; no new run starts after it (default 270; quick 75)")
    p.add_argument("--quick", action="store_true", help="about a minute: fewer rounds and points")
    p.add_argument("--no-modern", action="store_true",
                   help="skip our server in the modern dialect (the extra column)")
    p.add_argument("--json-out", help="write every run and the medians here")
    p.add_argument("--server", choices=("ncclsmoke", "store_server"), default="ncclsmoke",
                   help="how to start our server: `ncclsmoke store serve` (default) or the "
                        "bench-only store_server binary (same server, linked only to rendezvous/)")
    args = p.parse_args()
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.barrier_reps = args.barrier_reps or (3 if args.quick else 5)
    args.duration = args.duration or (0.5 if args.quick else 2.0)
    args.budget = args.budget or (75 if args.quick else 270)
    args.throughput = args.throughput or ("1,64" if args.quick else "1,16,64")
    barrier_ns = [int(x) for x in args.barrier.split(",") if x]
    tp_ns = [int(x) for x in args.throughput.split(",") if x]

    start = time.monotonic()
    build_dir = os.path.abspath(args.build_dir)
    server_bin = os.path.join(build_dir, args.server)
    store_load = os.path.join(build_dir, "store_load")
    for path in (server_bin, store_load):
        if not os.access(path, os.X_OK):
            sys.exit(f"store_bench: {path} is missing; build it first "
                     f"(cmake --build {build_dir} --target {args.server} store_load)")
    ours_argv = [server_bin] + (["store", "serve"] if args.server == "ncclsmoke" else []) + \
        ["--port", "0", "--host", "127.0.0.1"]

    nofile = raise_nofile()
    if nofile < max(barrier_ns + tp_ns) + 64:
        sys.exit(f"store_bench: the descriptor limit ({nofile}) is too low for "
                 f"{max(barrier_ns)} clients; raise `ulimit -Hn`")
    atexit.register(kill_children)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *a: sys.exit(130))

    logdir = tempfile.mkdtemp(prefix="store_bench.")
    ours_proc, ours_port, ours_banner = start_server(
        "ours", ours_argv, os.path.join(logdir, "ours.log"))
    torch_proc, torch_port, torch_banner = start_server(
        "torch", [sys.executable, "-c", TORCH_SERVER], os.path.join(logdir, "torch.log"), 60)

    contenders = [("ours", ours_proc, ours_port, "legacy"), ("torch", torch_proc, torch_port, "legacy")]
    if not args.no_modern:
        contenders.append(("ours-modern", ours_proc, ours_port, "modern"))
    ctx = machine_context(build_dir)
    print(f"# {ctx['date']}  {ctx['host']}  {ctx['cpus']} CPU ({ctx['cpu']})  kernel {ctx['kernel']}  "
          f"commit {ctx['commit']}")
    print(f"# ours : {ours_banner}\n# torch: {torch_banner}")
    print(f"# rounds {args.rounds} (barrier: {args.barrier_reps} per round), barrier N {barrier_ns}, throughput C {tp_ns} x {args.duration}s, "
          f"budget {args.budget}s, server logs in {logdir}", flush=True)

    points = [("barrier", n) for n in barrier_ns] + [("throughput", n) for n in tp_ns]
    runs = []
    incomplete = False
    for rnd in range(args.rounds):
        for workload, n in points:
            k = rnd % len(contenders)
            order = contenders[k:] + contenders[:k]  # rotate who goes first
            for name, proc, port, dialect in order:
                if time.monotonic() - start > args.budget:
                    incomplete = True
                    break
                if proc.poll() is not None:
                    results = [{"ok": False, "error": f"{name} server exited with {proc.returncode}"}]
                else:
                    results = run_load(store_load, port, dialect, workload, n, name, args)
                for r in results:
                    r.update({"contender": name, "round": rnd, "workload": workload, "clients": n})
                    runs.append(r)
                    if not r.get("ok"):
                        print(f"  round {rnd} {workload} n={n} {name}: ERROR {r.get('error')}",
                              flush=True)
            if incomplete:
                break
        if incomplete:
            break
        print(f"  round {rnd + 1}/{args.rounds} done at {time.monotonic() - start:.0f}s", flush=True)

    def median(name, workload, n, metric):
        vals = [r[metric] for r in runs if r["contender"] == name and r["workload"] == workload
                and r["clients"] == n and r.get("ok")]
        return (statistics.median(vals) if vals else None), len(vals)

    def rounds_won(workload, n, metric):
        """Rounds where ours beat torch, each round judged on its own medians."""
        won = judged = 0
        for rnd in range(args.rounds):
            per = {}
            for name in ("ours", "torch"):
                vals = [r[metric] for r in runs if r["contender"] == name and r["round"] == rnd
                        and r["workload"] == workload and r["clients"] == n and r.get("ok")]
                per[name] = statistics.median(vals) if vals else None
            if per["ours"] is None or per["torch"] is None:
                continue
            judged += 1
            better = per["ours"] > per["torch"] if metric == "ops_s" else per["ours"] < per["torch"]
            won += better
        return f"{won}/{judged}"

    rows = []
    metrics = [("barrier", "barrier_s", "barrier t1-t0"), ("barrier", "total_s", "total incl. connect"),
               ("throughput", "ops_s", "ops/s"), ("throughput", "p99_us", "pair p99 us")]
    for workload, metric, title in metrics:
        for n in barrier_ns if workload == "barrier" else tp_ns:
            cells = {name: median(name, workload, n, metric) for name, *_ in contenders}
            ours, torch_v = cells["ours"][0], cells["torch"][0]
            ratio = None
            if ours and torch_v:
                ratio = ours / torch_v if metric == "ops_s" else torch_v / ours
            rows.append({"workload": workload, "n": n, "metric": metric, "title": title,
                         "ours": ours, "torch": torch_v, "ratio": ratio,
                         "ours_modern": cells.get("ours-modern", (None, 0))[0],
                         "won": rounds_won(workload, n, metric),
                         "samples": {k: v[1] for k, v in cells.items()}})

    head = f"{'workload':<11} {'N':>5}  {'metric':<20} {'ours':>12} {'torch':>12} {'ratio':>7} {'won':>5}"
    if not args.no_modern:
        head += f" {'ours-modern':>12}"
    print()
    print(head)
    print("-" * len(head))
    for r in rows:
        line = (f"{r['workload']:<11} {r['n']:>5}  {r['title']:<20} "
                f"{fmt_value(r['metric'], r['ours']):>12} {fmt_value(r['metric'], r['torch']):>12} "
                f"{fmt_ratio(r['ratio']):>7} {r['won']:>5}")
        if not args.no_modern:
            line += f" {fmt_value(r['metric'], r['ours_modern']):>12}"
        print(line)
    print("ratio: >1 means ours is faster (torch_time/ours_time; ours_ops/torch_ops); medians of "
          f"{args.rounds} rounds (barrier: of {args.rounds} x {args.barrier_reps} runs); won = "
          "rounds in which ours beat torch"
          + (" (INCOMPLETE: budget reached)" if incomplete else ""))

    # Goals.
    big = max(barrier_ns)
    total_big = next((r["ours"] for r in rows if r["metric"] == "total_s" and r["n"] == big), None)
    goal1 = total_big is not None and total_big < 1.0
    judged = [r for r in rows if r["metric"] in ("barrier_s", "ops_s")]
    behind = [f"{r['workload']} N={r['n']} ({r['ratio']:.2f}x)" if r["ratio"] else
              f"{r['workload']} N={r['n']} (missing)" for r in judged if not r["ratio"] or r["ratio"] < 1]
    print(f"goal: {big}-client barrier under 1 s (ours, total incl. connect): "
          f"{'PASS' if goal1 else 'FAIL'} ({fmt_value('total_s', total_big)})")
    print(f"goal: ours >= torch at every N (barrier t1-t0 and ops/s): "
          f"{'PASS' if not behind else 'FAIL: ' + ', '.join(behind)}")
    errors = [r for r in runs if not r.get("ok")]
    if errors:
        print(f"{len(errors)} run(s) failed; first: {errors[0]['contender']} {errors[0]['workload']} "
              f"n={errors[0]['clients']}: {errors[0].get('error')}")
    for name, path in (("ours", "ours.log"), ("torch", "torch.log")):
        try:
            with open(os.path.join(logdir, path), errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            lines = []
        if lines:
            print(f"{name} server wrote {len(lines)} log line(s); last: {lines[-1][:200]}")
    ctx["loadavg_end"] = round(os.getloadavg()[0], 2)
    print(f"elapsed {time.monotonic() - start:.0f}s; 1-min load average {ctx['loadavg_start']} at "
          f"start, {ctx['loadavg_end']} at the end (other work on the machine skews both contenders)")
    kill_children()
    if all(os.path.getsize(os.path.join(logdir, f)) == 0 for f in os.listdir(logdir)):
        for f in os.listdir(logdir):
            os.unlink(os.path.join(logdir, f))
        os.rmdir(logdir)

    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"context": ctx, "args": vars(args), "rows": rows, "runs": runs,
                       "incomplete": incomplete}, f, indent=1)
    return 0 if not errors and not incomplete else 1


if __name__ == "__main__":
    sys.exit(main())
