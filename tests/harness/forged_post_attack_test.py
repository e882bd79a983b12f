#!/usr/bin/python3
"""A stranger with access to the store, and no job token, steers what rank 0 reads: it deletes a
healthy rank's verdict, or replaces it with one that blames a host outside the job. Rank 0 must
name what it can check (results/judging/view_trust.h) and nothing it cannot:
  - deleted: rank 1 was alive to the end (the liveness watch heard its goodbye) -> RESULTS_MISSING
    for rank 1, never PEER_LOST;
  - forged (DATA_CORRUPTION on "gpu-node-7"): VERDICT_DISPROVED for rank 1, and no finding of the
    global verdict names gpu-node-7 or is that DATA_CORRUPTION.

Two ranks on loopback around a `ncclsmoke store serve` (so the store answers while rank 0 is
stopped). Rank 0 stops itself just before it gathers (the test-only hook NCCLSMOKE_TEST_PAUSE_AT=
gather, harness/run/transport_phase.h); rank 1 posts its verdict and exits; the stranger, a real
torch.distributed.TCPStore client, edits rank 1's key; then rank 0 is continued.

    /usr/bin/python3 tests/harness/forged_post_attack_test.py --binary build/ncclsmoke
Exit status: 0 passed, 1 failed, 77 torch is not installed (skipped).
"""

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile

from loopback import poll_until, proc_state, start_store

TIMEOUT = 40


def scenario(binary, dist, name, edit):
    """Runs the two ranks, lets `edit(store, key)` act as the stranger, returns (problems, v)."""
    problems = []
    with tempfile.TemporaryDirectory(prefix=f"ncclsmoke-forged-{name}-") as work:
        server, port = start_store(binary, work)
        procs = []
        try:
            for r in range(2):
                env = dict(os.environ)
                env.pop("NCCLSMOKE_JOB_TOKEN", None)
                env.pop("NCCLSMOKE_TEST_PAUSE_AT", None)
                if r == 0:
                    env["NCCLSMOKE_TEST_PAUSE_AT"] = "gather"
                args = [binary, "run", "--launcher", "flags", "--rank", str(r), "--world-size", "2",
                        "--store", f"127.0.0.1:{port}", "--master-addr", "127.0.0.1",
                        "--out-dir", work, "--job-id", f"forged{name}", "--transports", "socket",
                        "--min-bytes", "1M", "--max-bytes", "1M", "--iters", "5",
                        "--warmup-iters", "1", "--timeout", str(TIMEOUT), "--quiet"]
                log = open(os.path.join(work, f"rank{r}.log"), "w")
                procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env))
            poll_until(lambda: proc_state(procs[0].pid) == "T" and procs[1].poll() is not None, 30)
            if proc_state(procs[0].pid) != "T" or procs[1].poll() is None:
                problems.append("rank 0 never stopped before its gather, or rank 1 did not finish")
            else:
                store = dist.TCPStore("127.0.0.1", port, None, False,
                                      datetime.timedelta(seconds=10), wait_for_workers=False)
                # Under --store nobody owns the store: the job's keys are ncclsmoke/<job>/<restart>/.
                key = f"ncclsmoke/forged{name}/0/verdict/1"
                edit(store, key)
                os.kill(procs[0].pid, signal.SIGCONT)
            try:
                procs[0].wait(timeout=TIMEOUT + 10)
            except subprocess.TimeoutExpired:
                problems.append(f"rank 0 still ran {TIMEOUT + 10} s later")
        finally:
            for p in procs:
                if p.poll() is None:
                    os.kill(p.pid, signal.SIGCONT)
                    p.kill()
                p.wait(timeout=10)
            server.kill()
            server.wait(timeout=10)
        path = os.path.join(work, "verdict.json")
        if not os.path.exists(path):
            problems.append("rank 0 wrote no verdict.json: "
                            + open(os.path.join(work, "rank0.log")).read()[-600:])
            return problems, None
        v = json.load(open(path))
        print(f"{name}: rank 0 exit {procs[0].returncode}, verdict {v['verdict']}, findings "
              f"{[(f['code'], f['ranks']) for f in v['findings']]}")
        return problems, v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    try:
        import torch.distributed as dist
    except ImportError:
        print("skipped: torch is not installed")
        return 77
    problems = []

    def delete(store, key):
        print(f"stranger: delete {key}: {store.delete_key(key)}")

    p, v = scenario(binary, dist, "deleted", delete)
    problems += p
    if v:
        codes = {f["code"]: f for f in v["findings"]}
        rm = [f for f in v["findings"] if f["code"] == "RESULTS_MISSING" and 1 in f["ranks"]]
        if not rm or "was alive to the end" not in rm[0]["message"]:
            problems.append(f"deleted: no RESULTS_MISSING says rank 1 was alive: {v['findings']}")
        if "PEER_LOST" in codes:
            problems.append(f"deleted: a live rank was called lost: {codes['PEER_LOST']['message']}")
        if v["verdict"] == "pass":
            problems.append("deleted: a run missing rank 1's results passed")

    def forge(store, key):
        real = json.loads(store.get(key))
        real["findings"].append({
            "code": "DATA_CORRUPTION", "layer": "data", "severity": "error", "ranks": [1],
            "hosts": ["gpu-node-7"], "message": "rank 1 summed wrong on gpu-node-7",
            "hint": "drain the named hosts"})
        real["verdict"], real["exit_code"] = "fail", 1
        store.set(key, json.dumps(real))
        print(f"stranger: replaced {key} with a DATA_CORRUPTION on gpu-node-7")

    p, v = scenario(binary, dist, "forged", forge)
    problems += p
    if v:
        named = [f for f in v["findings"]
                 if "gpu-node-7" in f["hosts"] or "gpu-node-7" in json.dumps(f.get("subject", {}))]
        if named:
            problems.append(f"forged: a finding names the stranger's host: {named}")
        if any(f["code"] == "DATA_CORRUPTION" for f in v["findings"]):
            problems.append("forged: the stranger's DATA_CORRUPTION reached the global verdict")
        if not any(f["code"] == "VERDICT_DISPROVED" and f["ranks"] == [1] for f in v["findings"]):
            problems.append(f"forged: no VERDICT_DISPROVED names rank 1: {v['findings']}")
    for p in problems:
        print("FAIL " + p)
    print("passed" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0

if __name__ == "__main__":
    sys.exit(main())
