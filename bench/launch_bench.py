#!/usr/bin/python3
"""What ncclsmoke costs on top of torch's elastic agent: 8 ranks (1 agent x 8 workers, static
rendezvous by default, so the agent hosts the store), socket transport with a small sweep.

For each repetition, alternately: the agent launching /bin/true (the agent's own start-up,
rendezvous, worker spawn and reaping) and the agent launching ncclsmoke with the same config.
Times are measured inside the agent process, from the elastic_launch call to its return (the
torch import is excluded); rank 0 has written verdict.json by the time its worker exits.
Prints the medians and their difference (goal: < 2 s). Not a test: it only prints figures;
exit 1 only when a run failed (a figure from a failed run would mean nothing).

Usage: /usr/bin/python3 bench/launch_bench.py NCCLSMOKE_BINARY [--reps 5] [--nproc 8] [--backend static|c10d]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"
RUN_FLAGS = ["run", "--transports", "socket", "--min-bytes", "64K", "--max-bytes", "1M",
             "--connect-timeout", "20", "--join-timeout", "20", "--timeout", "60", "--quiet"]


def agent_main(cfg):
    from torch.distributed.elastic.multiprocessing import Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch
    lc = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=cfg["nproc"], run_id=cfg["run_id"],
                      rdzv_backend=cfg["backend"], rdzv_endpoint=f"127.0.0.1:{cfg['port']}",
                      rdzv_configs={"rank": 0, "timeout": 60, "join_timeout": 60}, max_restarts=0,
                      monitor_interval=0.1, redirects=Std.NONE, tee=Std.NONE,
                      log_dir=cfg["log_dir"])
    res = {"ok": False}
    t0 = time.monotonic()
    try:
        elastic_launch(lc, cfg["entrypoint"])(*cfg["args"])
        res["ok"] = True
    except ChildFailedError as e:
        res["error"] = f"workers failed: {({r: f.exitcode for r, f in e.failures.items()})}"
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {e}"
    res["wall_s"] = time.monotonic() - t0
    print("AGENT_RESULT " + json.dumps(res), flush=True)
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(entrypoint, args, nproc, workdir, tag, backend):
    cfg = {"backend": backend, "nproc": nproc, "run_id": f"launch-bench-{tag}", "port": free_port(),
           "entrypoint": entrypoint, "args": args, "log_dir": os.path.join(workdir, f"logs-{tag}")}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MASTER_", "TORCHELASTIC_", "SLURM_", "OMPI_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    try:
        p = subprocess.run([PY, os.path.abspath(__file__), "--agent", json.dumps(cfg)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        out = p.stdout
    except subprocess.TimeoutExpired as e:
        return {"ok": False, "error": "agent still running after 120 s (killed)"}, str(e.stdout)
    for line in out.splitlines():
        if line.startswith("AGENT_RESULT "):
            return json.loads(line[len("AGENT_RESULT "):]), out
    return {"ok": False, "error": f"agent exited {p.returncode} without a result"}, out


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--agent":
        return agent_main(json.loads(sys.argv[2]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--nproc", type=int, default=8)
    ap.add_argument("--backend", choices=["static", "c10d"], default="static",
                    help="rendezvous (static: the agent hosts the store; c10d in torch 1.13: rank 0 does)")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    try:
        import torch
    except Exception as e:
        print(f"launch_bench: torch not importable with {sys.executable}: {e}")
        return 77
    print(f"launch_bench: torch {torch.__version__}, 1 agent x {a.nproc}, {a.backend}, {a.reps} alternated reps")
    base, smoke, durs, failed = [], [], [], False
    with tempfile.TemporaryDirectory(prefix="launch-bench.") as root:
        for i in range(a.reps):
            r, out = launch("/bin/true", [], a.nproc, root, f"true{i}", a.backend)
            if not r["ok"]:
                print(f"  rep {i}: /bin/true under the agent failed: {r.get('error')}\n{out[-2000:]}")
                failed = True
            base.append(r["wall_s"] if r.get("ok") else float("nan"))
            d = os.path.join(root, f"out{i}")
            os.makedirs(d)
            r, out = launch(binary, RUN_FLAGS + ["--out-dir", d], a.nproc, root, f"smoke{i}", a.backend)
            dur = None
            try:
                with open(os.path.join(d, "verdict.json")) as f:
                    v = json.load(f)
                dur = v.get("duration_s")
                if v.get("verdict") != "pass":
                    r["ok"], r["error"] = False, f"verdict {v.get('verdict')}: " + str(
                        [x.get("code") for x in v.get("findings", [])])
            except (OSError, ValueError) as e:
                r["ok"], r["error"] = False, (r.get("error") or "") + f"; no verdict.json ({e})"
            if not r["ok"]:
                failed = True
                print(f"  rep {i}: ncclsmoke under the agent failed: {r.get('error')}")
            smoke.append(r["wall_s"] if r.get("ok") else float("nan"))
            durs.append(dur if dur is not None else float("nan"))
            print(f"  rep {i}: agent+/bin/true {base[-1]:.3f} s   agent+ncclsmoke {smoke[-1]:.3f} s"
                  f"   verdict duration_s {durs[-1]:.3f}")
    if failed:
        print("launch_bench: some runs failed; medians of failed runs are not figures")
        return 1
    mb, ms, md = statistics.median(base), statistics.median(smoke), statistics.median(durs)
    diff = ms - mb
    print(f"launch_bench: median agent+/bin/true {mb:.3f} s, agent+ncclsmoke {ms:.3f} s, "
          f"ncclsmoke's cost {diff:.3f} s (goal < 2 s: {'met' if diff < 2 else 'NOT met'}), "
          f"median verdict duration_s {md:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
