#!/usr/bin/python3
"""A full store is named, never only "lost" or "refused": a stranger fills the store rank 0 hosts
(a smaller limit through NCCLSMOKE_STORE_MAX_KEYS / NCCLSMOKE_STORE_MAX_CONNECTIONS) before the
other ranks join, and rank 0's verdict carries STORE_FULL naming the limit, its flag and the count.
The reserved room: idle strangers holding every connection slot do not keep the ranks out, and a
stranger's keys stop short of the job's reserve of keys (rendezvous/tcp_server_reserve.h), so
the ranks still join and the run passes.

  keys         the stranger stores keys until the store (NCCLSMOKE_STORE_MAX_KEYS=1000) refuses it,
               short of the keys reserved for the 4 ranks; the run does not fail, STORE_FULL still
               named, as a warning (none of the job's ranks was refused: job_refusals 0); with a
               job token, so the ranks' signed claims are what the store's reserve admits
  connections  the stranger holds connections that made a request until one is refused
               (NCCLSMOKE_STORE_MAX_CONNECTIONS=64)
  idle         64 idle strangers hold every slot; the 4 ranks shed them and the run passes

The same under `ncclsmoke store serve` (the job's ranks reach it with --store, so no rank hosts
it): the store writes what it refused to its status key (ncclsmoke/store_full) and rank 0 reads
it when the store fails it or ranks go missing.

  serve_keys         the stranger fills `store serve --max-keys 1000` before the join until it is
                     refused, short of the reserve (--reserved-ranks, 64 ranks by default: 500
                     keys, half of 1000); the run passes, the status key names --max-keys
  serve_connections  the stranger holds all 16 connections of `--max-connections 16` past their
                     first request; the ranks still read the status on read-only connections

    /usr/bin/python3 tests/harness/store_full_test.py --binary build/ncclsmoke [--only CASE]
"""

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile

from loopback import free_port, wait_until

WORLD = 4
MAGIC = 0x3C85F7CE
SET, GET, MULTI_SET, NUM_KEYS, PING = 1, 3, 11, 7, 13
STATUS_KEY = b"/ncclsmoke/store_full"


def field(b):
    return struct.pack("<Q", len(b)) + b


class Stranger:
    """A modern-dialect client of the store that is not one of the job's ranks."""

    def __init__(self, port, timeout=5.0, handshake=True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        if handshake:
            self.sock.sendall(b"\x00" + struct.pack("<I", MAGIC))
            self.ping()

    def recv_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("store closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def ping(self):
        self.sock.sendall(bytes([PING]) + struct.pack("<I", 7))
        if struct.unpack("<I", self.recv_exact(4))[0] != 7:
            raise ConnectionError("bad ping echo")

    def num_keys(self):
        self.sock.sendall(bytes([NUM_KEYS]))
        return struct.unpack("<q", self.recv_exact(8))[0]

    def get(self, key):
        self.sock.sendall(bytes([GET]) + field(key))
        n = struct.unpack("<Q", self.recv_exact(8))[0]
        return self.recv_exact(n)

    def multi_set(self, keys):
        self.sock.sendall(bytes([MULTI_SET]) + struct.pack("<Q", len(keys)) +
                          b"".join(field(k) + field(b"x") for k in keys))

    def close(self):
        self.sock.close()


def fill_keys(port, most=5000):
    """A stranger's pipelined SETs of fresh keys until the store refuses it (closes the
    connection); returns how many keys the store then holds, or None when it never refused."""
    s = Stranger(port)
    refused = False
    try:
        for start in range(0, most, 100):
            s.sock.sendall(b"".join(bytes([SET]) + field(b"/stranger/%d" % i) + field(b"x")
                                    for i in range(start, start + 100)))
    except OSError:
        refused = True
    s.sock.settimeout(5)
    try:
        while s.sock.recv(65536):
            pass
        refused = True  # EOF: the store closed it
    except socket.timeout:
        pass  # still open: never refused
    except OSError:
        refused = True  # reset: closed with our SETs unread
    s.close()
    look = Stranger(port)
    n = look.num_keys()
    look.close()
    return n if refused else None


def wait_for_store(port, limit_s=15.0):
    """A stranger connected once rank 0's store listens and rank 0 has claimed it."""
    def claimed():
        try:
            s = Stranger(port)
            if s.num_keys() > 0:
                return s
            s.close()
        except OSError:
            pass
        return None
    return wait_until(claimed, limit_s, "rank 0's store to come up on port %d" % port, 0.05)


def start_rank(binary, rank, port, work, env, store=None):
    where = ["--store", "127.0.0.1:%d" % store] if store else \
        ["--master-port", str(port), "--store-bind", "127.0.0.1"]
    args = [binary, "run", "--launcher", "flags", "--rank", str(rank), "--world-size", str(WORLD),
            "--master-addr", "127.0.0.1"] + where + ["--out-dir", work, "--transports", "socket", "--min-bytes", "4K", "--max-bytes", "64K",
            "--iters", "3", "--connect-timeout", "8", "--join-timeout", "8", "--timeout", "40",
            "--quiet"]
    if store:
        args += ["--job-id", "store-full-serve"]
    log = open(os.path.join(work, "rank%d.log" % rank), "w")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)


def wait_ranks(procs, problems, limit_s=60):
    """Waits for every rank, killing one that runs past limit_s (and saying so in problems)."""
    for p in procs:
        try:
            p.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            problems.append(f"a rank ran more than {limit_s} s")


def release(held, procs):
    """Closes the strangers' connections and kills any rank still running."""
    for s in held:
        s.close()
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


class Serve:
    """`ncclsmoke store serve` on a free loopback port, with `flags`."""

    def __init__(self, binary, work, flags):
        self.log = open(os.path.join(work, "serve.log"), "w")
        self.proc = subprocess.Popen([binary, "store", "serve", "--host", "127.0.0.1", "--port",
                                      "0", "--duration", "120"] + flags,
                                     stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline().decode(errors="replace").split()
        if "port" not in line:
            self.stop()
            raise RuntimeError("store serve did not start: %s" % line)
        self.port = int(line[line.index("port") + 1])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def run_case(binary, name):
    problems = []
    if name.startswith("serve_"):
        return run_serve_case(binary, name)
    with tempfile.TemporaryDirectory(prefix="ncclsmoke-store-full-") as work:
        port = free_port()
        env = dict(os.environ)
        env["NCCLSMOKE_STORE_MAX_KEYS" if name == "keys" else "NCCLSMOKE_STORE_MAX_CONNECTIONS"] = \
            "1000" if name == "keys" else "64"
        if name == "keys":
            # With a job token rank 0's store counts only signed claims as the job's: the ranks'
            # real claims must verify there, or they would be refused short of the reserve too.
            env["NCCLSMOKE_JOB_TOKEN"] = os.urandom(32).hex()
        procs = [start_rank(binary, 0, port, work, env)]
        held = []
        try:
            first = wait_for_store(port)
            held.append(first)
            if name == "keys":
                # As full as a stranger can make it: short of the job's reserve.
                n = fill_keys(port)
                if n is None or not 500 <= n < 1000:
                    problems.append("the stranger was not stopped short of the reserve "
                                    "(%s keys stored)" % n)
            elif name == "connections":
                for _ in range(200):  # bounded; 64 is the limit
                    try:
                        held.append(Stranger(port))
                    except OSError:
                        break  # refused: the store is full of connections
            else:
                for _ in range(64):
                    held.append(Stranger(port, handshake=False))
            procs += [start_rank(binary, r, port, work, env) for r in range(1, WORLD)]
            wait_ranks(procs, problems)
        finally:
            release(held, procs)
        path = os.path.join(work, "verdict.rank0.json")
        if not os.path.exists(path):
            path = os.path.join(work, "verdict.json")
        try:
            with open(path) as f:
                v = json.load(f)
        except (OSError, ValueError) as e:
            return ["rank 0 wrote no verdict: %s" % e]
        full = [f for f in v["findings"] if f["code"] == "STORE_FULL"]
        codes = sorted({f["code"] for f in v["findings"]})
        if name == "idle":
            if full:
                problems.append("idle strangers reported as STORE_FULL: %s" % full[0]["message"])
            if procs[0].returncode != 0:
                problems.append("the run did not pass beside 64 idle strangers (exit %s, codes %s)"
                                % (procs[0].returncode, codes))
        elif name == "keys" and any(c in codes for c in ("RANKS_MISSING", "RENDEZVOUS_LOST",
                                                          "RESULTS_MISSING")):
            problems.append("the job's ranks did not have room beside the stranger's keys "
                            "(codes %s)" % codes)
        if name != "idle":
            # keys: the stranger was refused short of the limit (the reserve), so the finding
            # names the limit's value, not a count of 1,000 keys held.
            flag, count = ("--max-keys", "max_stored_keys 1000") if name == "keys" else \
                ("--max-connections", "64 connections")
            msgs = [f["message"] for f in full]
            if not any(flag in m and count in m for m in msgs):
                problems.append("rank 0's verdict has no STORE_FULL naming %s and %s (codes %s; "
                                "STORE_FULL: %s)" % (flag, count, codes, msgs))
            for f in full:
                if f.get("evidence", {}).get("flag") == flag and f["evidence"]["value"] != (
                        1000 if name == "keys" else 64):
                    problems.append("STORE_FULL evidence value %s" % f["evidence"]["value"])
        if name == "keys":
            # Only the stranger was refused (job_refusals 0) and every rank joined: a warning
            # that names the filler, not the run's failure.
            for f in full:
                ev = f.get("evidence", {})
                if ev.get("flag") == "--max-keys" and (f["severity"] != "warning" or
                                                      ev.get("job_refusals") != 0):
                    problems.append("STORE_FULL of a stranger's refusals only is %s with "
                                    "job_refusals %s, not a warning with 0" %
                                    (f["severity"], ev.get("job_refusals")))
            if v.get("verdict") == "fail":
                problems.append("the run failed beside a stranger the reserve held off (codes %s)"
                                % codes)
        print("%s %-12s rank 0 exit %s, codes %s" % ("ok  " if not problems else "FAIL", name,
                                                     procs[0].returncode, ", ".join(codes)))
        for f in full:
            print("       " + f["message"])
        if problems:
            with open(os.path.join(work, "rank0.log"), errors="replace") as f:
                print("       rank 0 log:\n         " +
                      "\n         ".join(f.read().splitlines()[-12:]))
    return problems


def check_store_full(v, flag, count, value):
    """Problems with rank 0's verdict `v`: it must carry STORE_FULL naming `flag` and `count`."""
    problems = []
    full = [f for f in v["findings"] if f["code"] == "STORE_FULL"]
    codes = sorted({f["code"] for f in v["findings"]})
    msgs = [f["message"] for f in full]
    if not any(flag in m and count in m for m in msgs):
        problems.append("rank 0's verdict has no STORE_FULL naming %s and %s (codes %s; "
                        "STORE_FULL: %s)" % (flag, count, codes, msgs))
    for f in full:
        ev = f.get("evidence", {})
        if ev.get("flag") == flag and ev.get("value") != value:
            problems.append("STORE_FULL evidence value %s, not %s" % (ev.get("value"), value))
    return problems, codes, msgs


def run_serve_case(binary, name):
    problems = []
    keys = name == "serve_keys"
    flags = ["--max-keys", "1000"] if keys else ["--max-connections", "16"]
    with tempfile.TemporaryDirectory(prefix="ncclsmoke-store-full-serve-") as work:
        serve = Serve(binary, work, flags)
        held, procs = [], []
        try:
            if keys:
                n = fill_keys(serve.port)
                if n is None or not 500 <= n < 1000:
                    problems.append("the stranger was not stopped short of the reserve "
                                    "(%s keys stored)" % n)
            else:
                for _ in range(16):  # past their first request (the VALIDATE and a PING)
                    held.append(Stranger(serve.port))
            procs = [start_rank(binary, r, 0, work, dict(os.environ), store=serve.port)
                     for r in range(WORLD)]
            wait_ranks(procs, problems)
            if keys:
                # The refusal stays named where a job served apart reads it.
                look = Stranger(serve.port)
                status = json.loads(look.get(STATUS_KEY) or b"{}")
                look.close()
                hits = [h for h in status.get("store_full", []) if h.get("flag") == "--max-keys"]
                if not hits or hits[0].get("value") != 1000:
                    problems.append("the status key does not name --max-keys 1000: %s" % status)
        finally:
            release(held, procs)
            serve.stop()
        path = os.path.join(work, "verdict.json")
        try:
            with open(path) as f:
                v = json.load(f)
        except (OSError, ValueError) as e:
            return ["rank 0 wrote no verdict: %s" % e]
        flag, count, value = ("--max-keys", "1,000 keys", 1000) if keys else \
            ("--max-connections", "16 connections", 16)
        more, codes, msgs = check_store_full(v, flag, count, value)
        if keys:
            # The ranks had room: the run passes, and rank 0 had no reason to read the status.
            if procs and procs[0].returncode != 0:
                problems.append("the run did not pass beside the stranger's keys (exit %s, "
                                "codes %s)" % (procs[0].returncode, codes))
        else:
            problems += more
        print("%s %-17s rank 0 exit %s, codes %s" % ("ok  " if not problems else "FAIL", name,
                                                     procs[0].returncode if procs else None,
                                                     ", ".join(codes)))
        for m in msgs:
            print("       " + m)
        if problems:
            for log in ("rank0.log", "serve.log"):
                with open(os.path.join(work, log), errors="replace") as f:
                    print("       %s:\n         " % log +
                          "\n         ".join(f.read().splitlines()[-12:]))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    failed = []
    for name in ["keys", "connections", "idle", "serve_keys", "serve_connections"]:
        if a.only and a.only != name:
            continue
        for p in run_case(a.binary, name):
            print("       " + p)
            failed.append(name)
    if failed:
        print("FAILED: " + ", ".join(sorted(set(failed))))
        return 1
    print("every full store was named")
    return 0


if __name__ == "__main__":
    sys.exit(main())
