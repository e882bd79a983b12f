#!/usr/bin/python3
"""The job token (NCCLSMOKE_JOB_TOKEN) against a stranger who can reach the store, end to end on
loopback with real ranks and a real stranger client (torch's TCPStore, which is what anyone on
the cluster network has at hand):

  control   no token: the stranger's forged verdict for rank 1, set while rank 0 waits
            stopped before its gather (NCCLSMOKE_TEST_PAUSE_AT=gather, around a `store
            serve`), lands: the global verdict names its made-up host (the attack is real, and
            this test's forgery is one the reader takes);
  forged    with a token: the stranger forges rank 1's verdict the same way and keeps
            overwriting rank 2's sweep figures all through the run; both are refused and named
            (STORE_TAMPERED with the key), and neither the stranger's host nor its
            DATA_CORRUPTION reaches the global verdict;
  redirect  with a token: the stranger points rank 1's socket address at its own listener; no
            rank dials it, and the key is named;
  launch    `ncclsmoke launch -n 2` makes its own token: the ranks agree, the run passes and says
            world.store.authenticated: true;
  bad file  --job-token-file naming a missing or an empty file: CONFIG_INVALID naming the file,
            exit 1, before the network is touched.
The token's value must never appear in a verdict or a log.

    /usr/bin/python3 tests/harness/job_token_test.py --binary build/ncclsmoke
"""

import argparse
import datetime
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from loopback import free_port, poll_until, port_accepts, proc_state, start_store

try:
    import torch.distributed as dist  # the stranger's client: what anyone on the network has
except ImportError:
    print("SKIP: torch is not installed (Debian's python3-torch)")
    sys.exit(77)

STRANGER_HOST = "gpu-node-7"
TOKEN = "e2e-job-token-3f9a1c"  # what the ranks share; the stranger does not know it
JOB = "tokjob"
NS = f"ncclsmoke/{JOB}/0/"


def start_ranks(binary, work, port, world, extra_env, extra_args=(), store=None):
    """The ranks, around rank 0's own store on `port`, or around `store` (host:port of a
    `store serve`), where rank 0 stops itself just before it gathers (see forge_at_gather)."""
    procs = []
    for r in range(world):
        where = (["--store", store, "--master-addr", "127.0.0.1"] if store else
                 ["--master-addr", "127.0.0.1", "--master-port", str(port), "--store-bind",
                  "127.0.0.1"])
        args = [binary, "run", "--launcher", "flags", "--rank", str(r), "--world-size", str(world),
                *where, "--job-id", JOB, "--out-dir", work, "--transports", "socket",
                "--min-bytes", "64K", "--max-bytes", "64K", "--iters", "2",
                "--transport-timeout", "8", "--timeout", "40", "--quiet",
                # a second after the join, so the stranger is writing before the ranks read
                "--hold-after-join", "1", *extra_args]
        env = dict(os.environ)
        env.pop("NCCLSMOKE_JOB_TOKEN", None)
        env.pop("NCCLSMOKE_JOB_TOKEN_FILE", None)
        env.pop("NCCLSMOKE_TEST_PAUSE_AT", None)
        env.update(extra_env)
        if store and r == 0:
            env["NCCLSMOKE_TEST_PAUSE_AT"] = "gather"
        log = open(os.path.join(work, f"rank{r}.log"), "w")
        procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env))
    return procs


def wait_all(procs, problems, what):
    for r, p in enumerate(procs):
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            problems.append(f"{what}: rank {r} still ran after 60 s")


def forge_at_gather(binary, work, world, extra_env, forged, during, problems, what):
    """A run around a `store serve` whose verdict keys the stranger forges where no race can
    undo it: rank 0 stops itself just before it gathers (NCCLSMOKE_TEST_PAUSE_AT=gather), the
    other ranks post and leave, the stranger sets `forged` (key -> bytes) once, rank 0 goes on
    and reads them. `during` (key -> bytes) is written all through the run, racing the ranks'
    own writes. Returns the Stranger of `during` (its writes and error)."""
    server, port = start_store(binary, work)
    try:
        with Stranger(port, during) as s:
            procs = start_ranks(binary, work, port, world, extra_env,
                                store=f"127.0.0.1:{port}")
            poll_until(lambda: proc_state(procs[0].pid) == "T"
                       and all(p.poll() is not None for p in procs[1:]), 40)
            if proc_state(procs[0].pid) != "T" or any(p.poll() is None for p in procs[1:]):
                problems.append(f"{what}: rank 0 never stopped before its gather, or another "
                                f"rank did not finish")
            else:
                store = dist.TCPStore("127.0.0.1", port, None, False,
                                      datetime.timedelta(seconds=10), False)
                for k, v in forged.items():
                    store.set(k, v)
            if procs[0].poll() is None:
                os.kill(procs[0].pid, signal.SIGCONT)
            wait_all(procs, problems, what)
    finally:
        server.kill()
        server.wait(timeout=10)
    return s


class Stranger:
    """A torch TCPStore client that keeps writing `values` (key -> bytes) until stopped."""

    def __init__(self, port, values):
        self.port, self.values = port, values
        self.stop = threading.Event()
        self.writes = 0
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            # Rank 0's store is not up yet: wait until its port accepts (bounded), then connect.
            seen = {"listening": False}

            def listening_or_stopped():
                seen["listening"] = port_accepts(self.port)
                return seen["listening"] or self.stop.is_set()
            poll_until(listening_or_stopped, 20)
            if not seen["listening"]:
                self.error = "the store never listened"
                return
            store = dist.TCPStore("127.0.0.1", self.port, None, False,
                                  datetime.timedelta(seconds=10), False)
            until = time.monotonic() + 45  # bounded: the run's --timeout is 40 s
            while not self.stop.is_set() and time.monotonic() < until:
                for k, v in self.values.items():
                    store.set(k, v)
                    self.writes += 1
                self.stop.wait(0.001)  # the stranger's pace; ends as soon as it is told to stop
        except Exception as e:  # the store went away at the end of the run
            if self.writes == 0:
                self.error = repr(e)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=10)


def forged_verdict(binary, work):
    """A well-formed verdict for rank 1 on the stranger's host, with a DATA_CORRUPTION: made from
    a real one-rank verdict, so the reader accepts its shape."""
    d = os.path.join(work, "template")
    os.makedirs(d)
    port = free_port()
    subprocess.run([binary, "run", "--launcher", "flags", "--rank", "0", "--world-size", "1",
                    "--master-addr", "127.0.0.1", "--master-port", str(port), "--store-bind",
                    "127.0.0.1", "--out-dir", d, "--transports", "none", "--quiet"],
                   timeout=60, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    v = json.load(open(os.path.join(d, "verdict.rank0.json")))
    v["reporting_rank"] = 1
    for r in v["ranks"]:
        r["rank"], r["host"] = 1, STRANGER_HOST
    v["findings"].append({
        "code": "DATA_CORRUPTION", "layer": "data", "severity": "error",
        "ranks": [1], "hosts": [STRANGER_HOST],
        "message": f"rank 1 (host {STRANGER_HOST}) got 4096 wrong elements",
        "hint": "drain the named hosts", "evidence": {}})
    v["verdict"], v["exit_code"] = "fail", 1
    return json.dumps(v).encode()


def load(path, problems, what):
    if not os.path.exists(path):
        problems.append(f"{what}: {os.path.basename(path)} was not written")
        return None
    return json.load(open(path))


def tampered_keys(v):
    return {f.get("evidence", {}).get("key") for f in v["findings"] if f["code"] == "STORE_TAMPERED"}


def names_stranger(v):
    return STRANGER_HOST in json.dumps(v)


def leaks_token(work):
    bad = []
    for path in glob.glob(os.path.join(work, "**", "*"), recursive=True):
        if os.path.isfile(path) and TOKEN.encode() in open(path, "rb").read():
            bad.append(os.path.basename(path))
    return bad


def case_control(binary, work, forged, problems, unnamed):
    s = forge_at_gather(binary, work, 2, {}, {NS + "verdict/1": forged}, {}, problems, "control")
    v = load(os.path.join(work, "verdict.json"), problems, "control")
    if s.error:
        problems.append(f"control: the stranger failed: {s.error}")
    if v is None:
        return
    print(f"control: verdict {v['verdict']}, authenticated "
          f"{v['world']['store'].get('authenticated')}, names {STRANGER_HOST}: {names_stranger(v)}")
    if v["world"]["store"].get("authenticated") is not False:
        problems.append("control: a run without a token is not marked authenticated: false")
    if not names_stranger(v):
        unnamed.append(f"control: without a token the forged verdict did not land (the test's "
                        f"forgery is not one the reader takes): {[f['code'] for f in v['findings']]}")


def case_forged(binary, work, forged, problems, unnamed):
    sweep = json.dumps([{"time_us": 1.0, "wrong": 4096}]).encode()
    s = forge_at_gather(binary, work, 3, {"NCCLSMOKE_JOB_TOKEN": TOKEN},
                        {NS + "verdict/1": forged}, {NS + "transport/socket/sweep/2": sweep},
                        problems, "forged")
    if s.error:
        problems.append(f"forged: the stranger failed: {s.error}")
    v = load(os.path.join(work, "verdict.json"), problems, "forged")
    if v is None:
        return
    codes = [f["code"] for f in v["findings"]]
    locals_ = [load(os.path.join(work, f"verdict.rank{r}.json"), problems, "forged")
               for r in range(3)]
    refused = set().union(*[tampered_keys(x) for x in [v, *locals_] if x])
    print(f"forged: {s.writes} forged writes; verdict {v['verdict']}, findings {codes}, tampered "
          f"keys {sorted(k for k in refused if k)}")
    if v["world"]["store"].get("authenticated") is not True:
        problems.append("forged: a run with a token is not marked authenticated: true")
    # The verdict key is forged while rank 0 is stopped before its gather: always refused. The
    # sweep key is written by rank 2 once, while ranks 0 and 1 read it right after the same
    # collective: a reader may get rank 2's own value in the moment before the stranger's next
    # write. Either way no forged figure may be taken.
    if NS + "verdict/1" not in tampered_keys(v):
        unnamed.append(f"forged: STORE_TAMPERED does not name {NS}verdict/1: {codes}")
    if NS + "transport/socket/sweep/2" not in refused:
        print("forged: the sweep key's forgery was overwritten before anyone read it (a race "
              "this run lost; the figures read were rank 2's own)")
    for x in [v, *locals_]:
        if not x:
            continue
        if names_stranger(x):
            problems.append(f"forged: a verdict names the stranger's host {STRANGER_HOST}")
        if any(f["code"] == "DATA_CORRUPTION" for f in x["findings"]):
            problems.append("forged: the stranger's figures became a DATA_CORRUPTION")
        if any(row.get("wrong") not in (0, None) for row in x["transports"]):
            problems.append(f"forged: a sweep row took the stranger's wrong count: {x['transports']}")
    if v["verdict"] == "pass":
        problems.append("forged: a run whose store was tampered with passed")
    if leaks_token(work):
        problems.append(f"forged: the token's value is in {leaks_token(work)}")


def case_redirect(binary, work, problems, unnamed):
    trap = socket.socket()
    trap.bind(("127.0.0.1", 0))
    trap.listen(8)
    trap.settimeout(0.2)
    dialed = []
    done = threading.Event()

    def accept():
        while not done.is_set():
            try:
                c, _ = trap.accept()
                dialed.append(1)
                c.close()
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    port = free_port()
    addr = f"127.0.0.1:{trap.getsockname()[1]}".encode()
    with Stranger(port, {NS + "transport/socket/addr/1": addr}) as s:
        procs = start_ranks(binary, work, port, 2, {"NCCLSMOKE_JOB_TOKEN": TOKEN})
        wait_all(procs, problems, "redirect")
    done.set()
    t.join(timeout=5)
    trap.close()
    v = load(os.path.join(work, "verdict.json"), problems, "redirect")
    if s.error:
        problems.append(f"redirect: the stranger failed: {s.error}")
    if v is None:
        return
    print(f"redirect: {s.writes} forged writes; the stranger's listener was dialed "
          f"{len(dialed)} times; findings {[f['code'] for f in v['findings']]}")
    if dialed:
        problems.append(f"redirect: a rank dialed the stranger's address {addr.decode()}")
    if NS + "transport/socket/addr/1" not in tampered_keys(v):
        unnamed.append("redirect: STORE_TAMPERED does not name rank 1's socket address key")


def case_launch(binary, work, problems):
    env = dict(os.environ)
    env.pop("NCCLSMOKE_JOB_TOKEN", None)
    env.pop("NCCLSMOKE_JOB_TOKEN_FILE", None)
    p = subprocess.run([binary, "launch", "-n", "2", "--out-dir", work, "--transports", "socket",
                        "--min-bytes", "64K", "--max-bytes", "64K", "--iters", "2",
                        "--timeout", "60"],
                       env=env, capture_output=True, text=True, timeout=90)
    first = p.stdout.splitlines()[0] if p.stdout else ""
    print(f"launch: exit {p.returncode}; {first}")
    if p.returncode != 0:
        problems.append(f"launch: exit {p.returncode}:\n{p.stdout}\n{p.stderr}")
    if "signed with a job token made for this launch" not in first:
        problems.append(f"launch: the first line does not say the store is signed: {first}")
    for name in ["verdict.json", "verdict.rank0.json", "verdict.rank1.json"]:
        v = load(os.path.join(work, name), problems, "launch")
        if v and v["world"]["store"].get("authenticated") is not True:
            problems.append(f"launch: {name} is not authenticated")
        if v and tampered_keys(v):
            problems.append(f"launch: the ranks refused each other's values: {tampered_keys(v)}")


def case_bad_file(binary, work, problems):
    empty = os.path.join(work, "empty-token")
    open(empty, "w").write("\n")
    missing = os.path.join(work, "no-such-token")
    for path in [missing, empty]:
        out = os.path.join(work, os.path.basename(path) + ".out")
        p = subprocess.run([binary, "run", "--launcher", "flags", "--rank", "0", "--world-size",
                            "1", "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
                            "--job-token-file", path, "--out-dir", out, "--quiet"],
                           capture_output=True, text=True, timeout=60)
        found = [v for f in glob.glob(os.path.join(out, "verdict.rank0.json"))
                 for v in [json.load(open(f))]]
        invalid = [f for v in found for f in v["findings"] if f["code"] == "CONFIG_INVALID"]
        print(f"bad file {os.path.basename(path)}: exit {p.returncode}; "
              f"{[f['message'] for f in invalid]}")
        if p.returncode != 1:
            problems.append(f"bad file {path}: exit {p.returncode}, not 1")
        if not any(path in f["message"] and "--job-token-file" in f["message"] for f in invalid):
            problems.append(f"bad file {path}: no CONFIG_INVALID naming the file: {found}")
        if found and any(ph["name"] == "rendezvous" and ph["status"] != "not_run"
                         for ph in found[0]["phases"]):
            problems.append(f"bad file {path}: the run went on to the rendezvous")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    a = ap.parse_args()
    problems = []
    with tempfile.TemporaryDirectory(prefix="ncclsmoke-token-") as root:
        dirs = {n: os.path.join(root, n) for n in ["control", "forged", "redirect", "launch", "bad"]}
        for d in dirs.values():
            os.makedirs(d)
        forged = forged_verdict(a.binary, root)
        # control and forged forge the verdict while rank 0 waits stopped: one try each. In
        # redirect a reader that waits on the address key reads it the moment rank 1 sets it, so
        # the stranger's next overwrite may come too late for that read (more often on a loaded
        # machine): then nothing forged was read and nothing can be named. Up to 3 tries there: a
        # forged value taken is a failure in any try; never naming the key is a failure of all 3.
        for name, case, tries in [
                ("control", lambda w, u: case_control(a.binary, w, forged, problems, u), 1),
                ("forged", lambda w, u: case_forged(a.binary, w, forged, problems, u), 1),
                ("redirect", lambda w, u: case_redirect(a.binary, w, problems, u), 3)]:
            for attempt in range(tries):
                unnamed = []
                work = dirs[name] if attempt == 0 else dirs[name] + f".{attempt}"
                os.makedirs(work, exist_ok=True)
                case(work, unnamed)
                if not unnamed:
                    break
                print(f"{name}: try {attempt + 1}: {unnamed[0]}")
            problems.extend(unnamed)
        case_launch(a.binary, dirs["launch"], problems)
        case_bad_file(a.binary, dirs["bad"], problems)
        if problems:
            for d in ["forged", "redirect"]:
                for log in sorted(glob.glob(os.path.join(dirs[d], "rank*.log"))):
                    print(f"--- {d}/{os.path.basename(log)}")
                    print(open(log).read()[-3000:])
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print("ok: forged values refused and named; launch authenticated; bad token files named")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
