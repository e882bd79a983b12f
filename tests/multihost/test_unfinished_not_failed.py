#!/usr/bin/python3
"""On loopback, with real ranks: an unfinished probe is not a failed one, and a master
that accepts but does not answer is not a firewall.

1. A mesh deadline too short for the world: `ncclsmoke launch -n 256 --mesh-timeout 0.3` on this
   machine. No MESH_BLOCKED, no PEER_LOST (healthy loopback: nothing is blocked, nobody is lost);
   a mesh phase that did not pass must be inconclusive and say how many pairs were not tested.
2. Rank 0 frozen (SIGSTOP) before a late rank joins: the kernel still completes the late rank's
   connection through the listen backlog, so the late rank must report RENDEZVOUS_STALLED
   ("accepts the connection but does not answer"), not RENDEZVOUS_TIMEOUT with a security-group
   hint.

Loopback only; every process started here is ended here by its PID, every wait is bounded.
Usage: /usr/bin/python3 tests/multihost/test_unfinished_not_failed.py --binary build/ncclsmoke
"""
import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
from waiting import poll_until, port_accepts  # noqa: E402

FAILURES = []


def check(what, ok, detail=""):
    print(f"  {'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        FAILURES.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def codes(v):
    return [f["code"] for f in v.get("findings", [])]


def short_mesh_deadline(binary, work):
    print("short mesh deadline: launch -n 256 --mesh-timeout 0.3", flush=True)
    out = os.path.join(work, "short")
    try:
        p = subprocess.run([binary, "launch", "-n", "256", "--transports", "none",
                            "--mesh-timeout", "0.3", "--out-dir", out], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=150)
        text = p.stdout
    except subprocess.TimeoutExpired as e:
        check("the launch ended within 150 s", False, str(e)[-300:])
        return
    try:
        with open(os.path.join(out, "verdict.json")) as f:
            v = json.load(f)
    except (OSError, ValueError) as e:
        check("a global verdict was written", False, f"{e}; {text[-400:]}")
        return
    c = codes(v)
    check("no MESH_BLOCKED on a healthy loopback", "MESH_BLOCKED" not in c, c)
    check("no PEER_LOST: a rank still probing is not lost", "PEER_LOST" not in c, c)
    check("no RENDEZVOUS_LOST", "RENDEZVOUS_LOST" not in c, c)
    mesh = [ph for ph in v.get("phases", []) if ph.get("name") == "mesh"]
    check("the mesh phase is in the verdict", bool(mesh), v.get("phases"))
    if mesh:
        m = mesh[0]
        print(f"    mesh phase: {m.get('status')} in {m.get('duration_s', 0):.2f} s: "
              f"{m.get('detail')}", flush=True)
        if m.get("status") != "pass":
            check("a mesh phase cut short is inconclusive, not failed",
                  m.get("status") == "inconclusive", m)
            check("and says how many pairs were not tested", "not tested" in m.get("detail", ""), m)
    print(f"    verdict {v.get('verdict')}, findings {c}", flush=True)


def stalled_master(binary, work):
    print("rank 0 SIGSTOPped before rank 1 joins", flush=True)
    out = os.path.join(work, "stall")
    port = free_port()
    common = ["--world-size", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
              "--launcher", "flags", "--transports", "none", "--connect-timeout", "4",
              "--join-timeout", "20", "--timeout", "30", "--out-dir", out]
    r0 = subprocess.Popen([binary, "run", "--rank", "0"] + common, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        # Rank 0 listens once its store is up: wait (bounded) for the port to accept.
        poll_until(lambda: port_accepts(port), 10, 0.05)
        os.kill(r0.pid, signal.SIGSTOP)
        t1 = time.monotonic()
        p = subprocess.run([binary, "run", "--rank", "1"] + common, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=30)
        took = time.monotonic() - t1
    finally:
        try:
            os.kill(r0.pid, signal.SIGCONT)
            os.kill(r0.pid, signal.SIGTERM)
            r0.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            r0.kill()
            r0.wait(timeout=5)
    check("rank 1 failed (exit 1)", p.returncode == 1, (p.returncode, p.stdout[-300:]))
    print(f"    rank 1 ended {took:.2f} s after the SIGSTOP", flush=True)
    try:
        with open(os.path.join(out, "verdict.rank1.json")) as f:
            v = json.load(f)
    except (OSError, ValueError) as e:
        check("rank 1 wrote its verdict", False, e)
        return
    c = codes(v)
    check("RENDEZVOUS_STALLED, not RENDEZVOUS_TIMEOUT", "RENDEZVOUS_STALLED" in c
          and "RENDEZVOUS_TIMEOUT" not in c, c)
    for f in v.get("findings", []):
        if f["code"] == "RENDEZVOUS_STALLED":
            check("the message says rank 0 accepts but does not answer",
                  "accepts the connection but does not answer" in f["message"]
                  and "rank 0" in f["message"], f["message"])
            check("no firewall / security-group hint",
                  "security group" not in f["hint"] and "firewall" not in f["hint"].lower(),
                  f["hint"])
            check("no SYN in the message", "SYN" not in f["message"], f["message"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory(prefix="unfinished-") as work:
        stalled_master(a.binary, work)
        short_mesh_deadline(a.binary, work)
    print(f"{'all checks passed' if not FAILURES else str(len(FAILURES)) + ' checks failed'}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
