#!/usr/bin/python3
"""ncclsmoke under torch's real elastic agent (the one torchrun runs), driven through its Python
API because Debian's /usr/bin/torchrun 1.13 crashes on Python 3.11 while parsing --redirects.

Cases (each agent is its own Python process, as on a real node; the agents meet on loopback):
  static-1x4   static rendezvous, 1 agent x 4 workers  (1.13: the agent hosts the store, legacy)
  c10d-1x4     c10d rendezvous,   1 agent x 4 workers  (1.13: rank 0 hosts the store)
  static-2x2   static rendezvous, 2 agents x 2 workers
  c10d-2x2     c10d rendezvous,   2 agents x 2 workers
Each: every worker exits 0, and rank 0's verdict is pass with 4 ranks, names the launcher
(world.source "torchrun"), the run id as job id, and the store it met (world.store: host, port,
hosted_by, dialect, era). Prints per case the wall time from launch to the agent returning and
the verdict's duration_s.

Usage: /usr/bin/python3 torch_elastic_test.py [--binary] NCCLSMOKE_BINARY [--case NAME ...] [--debug-env] [--keep]
  --debug-env  also launch /usr/bin/env under a static 1x2 agent and print what a worker sees.
  --keep       keep the temp dir (agent logs, every rank's verdict) and print its path.
Exit: 0 pass, 1 fail, 77 skipped (torch not importable).
Internal: torch_elastic_test.py --agent CONFIG_JSON runs one agent and prints AGENT_RESULT {...}.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"
AGENT_TIMEOUT_S = 120  # one case, all agents; the run's own --timeout is 60

RUN_FLAGS = ["run", "--transports", "socket", "--min-bytes", "64K", "--max-bytes", "256K",
             "--iters", "2", "--warmup-iters", "0", "--connect-timeout", "20",
             "--join-timeout", "20", "--timeout", "60", "--quiet"]

CASES = {  # name: (backend, agents, workers per agent)
    "static-1x4": ("static", 1, 4),
    "c10d-1x4": ("c10d", 1, 4),
    "static-2x2": ("static", 2, 2),
    "c10d-2x2": ("c10d", 2, 2),
}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- one agent (runs in its own process) ------------------------------------------------------
def agent_main(cfg):
    from torch.distributed.elastic.multiprocessing import Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    rdzv_configs = {"timeout": 60}
    if cfg["backend"] == "static":
        rdzv_configs["rank"] = cfg["node_rank"]
    else:
        rdzv_configs.update({"join_timeout": 60, "read_timeout": 60, "last_call_timeout": 1})
    lc = LaunchConfig(
        min_nodes=cfg["nodes"], max_nodes=cfg["nodes"], nproc_per_node=cfg["nproc"],
        run_id=cfg["run_id"], rdzv_backend=cfg["backend"], rdzv_endpoint=cfg["endpoint"],
        rdzv_configs=rdzv_configs, max_restarts=0, monitor_interval=0.2,
        redirects=Std.NONE, tee=Std.NONE, log_dir=cfg["log_dir"])
    result = {"node_rank": cfg["node_rank"], "ok": False, "failures": {}}
    t0 = time.monotonic()
    try:
        elastic_launch(lc, cfg["entrypoint"])(*cfg["args"])
        result["ok"] = True
    except ChildFailedError as e:
        result["failures"] = {str(r): f.exitcode for r, f in e.failures.items()}
    except Exception as e:  # the agent itself failed (rendezvous, store...): say so
        result["error"] = f"{type(e).__name__}: {e}"
    result["wall_s"] = time.monotonic() - t0
    sys.stdout.flush()
    print("AGENT_RESULT " + json.dumps(result), flush=True)
    return 0


# ---- the test ---------------------------------------------------------------------------------
def run_agents(backend, nodes, nproc, entrypoint, args, workdir, run_id):
    """Starts `nodes` agent processes and waits (bounded) for all. Returns (results, logs)."""
    port = free_port()
    procs = []
    for node_rank in range(nodes):
        cfg = {"backend": backend, "nodes": nodes, "nproc": nproc, "node_rank": node_rank,
               "run_id": run_id, "endpoint": f"127.0.0.1:{port}", "entrypoint": entrypoint,
               "args": args, "log_dir": os.path.join(workdir, f"agent{node_rank}-logs")}
        log = open(os.path.join(workdir, f"agent{node_rank}.log"), "w+")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MASTER_", "TORCHELASTIC_", "SLURM_", "OMPI_", "PMIX_"))
               and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NCCLSMOKE_JOB_ID")}
        p = subprocess.Popen([PY, os.path.abspath(__file__), "--agent", json.dumps(cfg)],
                             stdout=log, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        procs.append((p, log))
    deadline = time.monotonic() + AGENT_TIMEOUT_S
    results, logs = [], []
    for node_rank, (p, log) in enumerate(procs):
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"  agent {node_rank} (pid {p.pid}) still running after {AGENT_TIMEOUT_S} s: killing its group")
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=5)
                    break
                except subprocess.TimeoutExpired:
                    continue
        log.seek(0)
        text = log.read()
        log.close()
        logs.append(text)
        res = None
        for line in text.splitlines():
            if line.startswith("AGENT_RESULT "):
                res = json.loads(line[len("AGENT_RESULT "):])
        if res is None:
            res = {"node_rank": node_rank, "ok": False,
                   "error": f"agent exited {p.returncode} without a result"}
        res["returncode"] = p.returncode
        results.append(res)
    return results, logs


def tail(text, n=25):
    return "\n".join("    | " + l for l in text.splitlines()[-n:])


def expected_agent_store(backend):
    """Whether this torch's agent shares its store with the workers (LAUNCHERS.md)."""
    import torch
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    if backend == "static":
        return True
    return (major, minor) >= (2, 4) and os.environ.get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE") != "1"


def check_verdict(name, backend, out_dir, run_id):
    errors = []
    path = os.path.join(out_dir, "verdict.json")
    try:
        with open(path) as f:
            v = json.load(f)
    except (OSError, ValueError) as e:
        files = sorted(os.listdir(out_dir))
        errors.append(f"no rank-0 verdict at {path} ({e}); files: {files}")
        for fn in files[:2]:
            if fn.endswith(".json"):
                try:
                    with open(os.path.join(out_dir, fn)) as f:
                        lv = json.load(f)
                    print(f"  {name}: {fn}: {lv.get('verdict')} world={json.dumps(lv.get('world'))} findings="
                          f"{[(x.get('code'), x.get('message')) for x in lv.get('findings', [])]}")
                except (OSError, ValueError) as e2:
                    print(f"  {name}: {fn}: unreadable ({e2})")
        return None, errors
    w = v.get("world", {})
    print(f"  {name}: verdict={v.get('verdict')} ranks={len(v.get('ranks', []))} "
          f"duration_s={v.get('duration_s')} world={json.dumps(w)}")
    if v.get("verdict") != "pass":
        errors.append(f"verdict is {v.get('verdict')!r}, findings "
                      f"{[(x.get('code'), x.get('message')) for x in v.get('findings', [])]}")
    if len(v.get("ranks", [])) != 4 or w.get("size") != 4:
        errors.append(f"expected 4 ranks: ranks={len(v.get('ranks', []))} world.size={w.get('size')}")
    if w.get("source") != "torchrun":
        errors.append(f"world.source is {w.get('source')!r}, expected 'torchrun'")
    if w.get("job_id") != run_id:
        errors.append(f"world.job_id is {w.get('job_id')!r}, expected the run id {run_id!r} "
                      f"(TORCHELASTIC_RUN_ID); source {w.get('job_id_source')!r}")
    store = w.get("store")
    if not isinstance(store, dict):
        errors.append("world.store is absent: the verdict does not say which store it met or how")
    else:
        agent = expected_agent_store(backend)
        if not store.get("host"):
            errors.append(f"world.store.host is empty: {store}")
        if store.get("port") != w.get("master_port"):
            errors.append(f"world.store.port {store.get('port')} != MASTER_PORT {w.get('master_port')}")
        hosted = str(store.get("hosted_by", ""))
        if agent and "agent" not in hosted:
            errors.append(f"world.store.hosted_by is {hosted!r}: the {backend} agent hosts the store here "
                          "(TORCHELASTIC_USE_AGENT_STORE=True)")
        if not agent and hosted != "rank 0":
            errors.append(f"world.store.hosted_by is {hosted!r}, expected 'rank 0' "
                          "(TORCHELASTIC_USE_AGENT_STORE=False)")
        if store.get("dialect") not in ("legacy", "modern"):
            errors.append(f"world.store.dialect is {store.get('dialect')!r}")
        import torch
        if agent and torch.__version__.startswith("1."):
            if store.get("dialect") != "legacy" or store.get("era") != "torch<=2.0":
                errors.append(f"torch {torch.__version__}'s agent store speaks legacy (era torch<=2.0), "
                              f"verdict says dialect {store.get('dialect')!r} era {store.get('era')!r}")
    return v, errors


def run_case(name, binary, root):
    backend, nodes, nproc = CASES[name]
    workdir = tempfile.mkdtemp(prefix=f"{name}.", dir=root)
    out_dir = os.path.join(workdir, "out")
    os.makedirs(out_dir)
    run_id = f"ncclsmoke-{name}-{os.getpid()}"
    t0 = time.monotonic()
    results, logs = run_agents(backend, nodes, nproc, binary, RUN_FLAGS + ["--out-dir", out_dir],
                               workdir, run_id)
    outer = time.monotonic() - t0
    errors = []
    for r, text in zip(results, logs):
        if not r.get("ok"):
            what = r.get("error") or f"workers failed, exit codes by global rank {r.get('failures')}"
            errors.append(f"agent {r['node_rank']}: {what}")
            print(f"  {name}: agent {r['node_rank']} output (last lines):\n{tail(text)}")
    v, verrs = check_verdict(name, backend, out_dir, run_id)
    errors += verrs
    walls = ", ".join(f"{r.get('wall_s', float('nan')):.2f}" for r in results)
    dur = v.get("duration_s") if v else None
    dur_s = f"{dur:.3f}" if isinstance(dur, (int, float)) else "n/a"
    print(f"  {name}: launch->agent return {walls} s (per agent; {outer:.2f} s incl. python+torch import), "
          f"verdict duration_s {dur_s}")
    if v and isinstance(v.get("world", {}).get("store"), dict):
        print(f"  {name}: store {json.dumps(v['world']['store'])}")
    for e in errors:
        print(f"  {name}: FAIL: {e}")
    print(f"CASE {name} ({backend}, {nodes} agent(s) x {nproc}): {'PASS' if not errors else 'FAIL'}")
    return not errors


def debug_env(root):
    workdir = tempfile.mkdtemp(prefix="debug-env.", dir=root)
    results, logs = run_agents("static", 1, 2, "/usr/bin/env", [], workdir, "ncclsmoke-debug-env")
    keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
            "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
            "TORCHELASTIC_", "TORCH_", "NCCL_", "OMP_")
    seen = [l for l in logs[0].splitlines() if l.startswith(keys)]
    print(f"debug-env: what the workers of a static 1x2 agent see ({len(seen)} lines, both workers):")
    for l in sorted(seen):
        print("    " + l)
    print(f"debug-env: agent result {results[0]}")


def main(argv):
    if len(argv) >= 2 and argv[0] == "--agent":
        return agent_main(json.loads(argv[1]))
    if len(argv) >= 2 and argv[0] == "--binary":  # the form the other launcher tests take
        argv = argv[1:]
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    try:
        import torch  # noqa: F401
        import torch.distributed.launcher.api  # noqa: F401
    except Exception as e:
        print(f"SKIP: torch's elastic agent is not importable with {sys.executable}: {e}")
        return 77
    binary = os.path.abspath(argv[0])
    if not os.access(binary, os.X_OK):
        print(f"FAIL: ncclsmoke binary {binary!r} is not executable")
        return 1
    names, dbg, keep, i = [], False, False, 1
    while i < len(argv):
        if argv[i] == "--case" and i + 1 < len(argv) and argv[i + 1] in CASES:
            names.append(argv[i + 1])
            i += 2
        elif argv[i] == "--debug-env":
            dbg, i = True, i + 1
        elif argv[i] == "--keep":
            keep, i = True, i + 1
        else:
            print(f"bad argument {argv[i]!r}: expected --case {'|'.join(CASES)} or --debug-env")
            return 2
    import torch
    print(f"torch {torch.__version__} from {os.path.dirname(torch.__file__)}, python {sys.version.split()[0]}")
    root = tempfile.mkdtemp(prefix="ncclsmoke-elastic-test.")
    try:
        if dbg:
            debug_env(root)
        ok = [run_case(n, binary, root) for n in (names or list(CASES))]
    finally:
        if keep:
            print(f"kept {root} (agent logs, worker verdicts)")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"torch_elastic_test: {sum(ok)}/{len(ok)} cases passed")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
