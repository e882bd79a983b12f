#!/usr/bin/python3
"""Real PyTorch 1.13 TCPStore clients (legacy dialect) against our server (`ncclsmoke store serve`).

Usage: /usr/bin/python3 torch_client_vs_our_server.py <ncclsmoke binary>
       (or NCCLSMOKE_BIN=<binary>)

Checks, each bounded by a few seconds: set/get/add/wait/compare_set/delete_key/num_keys with
torch's semantics (1.13's Python TCPStore has no check()), binary and 1 MiB values, a wait that
times out (the exception, then the same and a fresh client still served), 16 concurrent torch
clients adding to a counter then waiting on a barrier, and wait_for_workers with world_size=4:
four non-master torch clients each ADD "init/" (unprefixed) and open their idle second (WATCH_KEY
callback) connection; a raw-socket "master" then polls init/ the way 1.13's master does (WAIT+GET
every 10 ms) and must see 4. Finally the server must have logged no protocol error for any of
torch's connections.

Prints one line per check, then "N passed, M failed"; exits 1 on any failure, 77 when torch is
missing. A watchdog kills everything after 55 s; the server is always killed.
"""
import datetime
import multiprocessing as mp
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

from checklist import check, children, poll_until, start_watchdog, step, summary  # noqa: E402

try:
    import torch
    import torch.distributed as dist
except ImportError as e:  # ctest reports 77 as skipped (SKIP_RETURN_CODE)
    print("SKIP: PyTorch is not importable by %s: %s" % (sys.executable, e))
    sys.exit(77)

WATCHDOG_S = 55
HOST = "127.0.0.1"
server = None


def kill_server():
    if server and server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)


def td(s):
    return datetime.timedelta(seconds=s)


def client(port, timeout_s=5, **kw):
    return dist.TCPStore(HOST, port, kw.pop("world_size", None), False, td(timeout_s), **kw)


# ---- a minimal raw legacy-dialect client, for the unprefixed "init/" key ---------------------

def raw_call(sock, payload, reply_len=None):
    sock.sendall(payload)
    if reply_len is not None:
        return recv_exact(sock, reply_len)
    (n,) = struct.unpack("<Q", recv_exact(sock, 8))
    return recv_exact(sock, n)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("server closed the raw connection")
        buf += chunk
    return buf


def s(b):
    return struct.pack("<Q", len(b)) + b


def raw_wait_get(sock, key):  # what 1.13's doGet sends: WAIT [key], then GET key
    assert raw_call(sock, b"\x05" + struct.pack("<Q", 1) + s(key), 1) == b"\x00"
    return raw_call(sock, b"\x02" + s(key))


# ---- worker processes ---------------------------------------------------------------------------

def counter_worker(port, n_workers, out):
    try:
        st = client(port, 10)
        n = st.add("counter", 1)
        if n == n_workers:
            st.set("barrier", "open")
        st.wait(["barrier"], td(10))
        out.put(("ok", n, st.get("barrier")))
    except Exception as e:  # noqa: BLE001
        out.put(("error", repr(e), None))


def init_worker(port, world, out, hold):
    try:
        st = client(port, 10, world_size=world, wait_for_workers=True)
        out.put(("ok", None, None))
        hold.wait(20)  # keep both connections (store + idle callback) open while checked
        del st
    except Exception as e:  # noqa: BLE001
        out.put(("error", repr(e), None))


def collect(q, n, budget_s):
    got, deadline = [], time.monotonic() + budget_s
    while len(got) < n and time.monotonic() < deadline:
        try:
            got.append(q.get(timeout=max(0.1, deadline - time.monotonic())))
        except Exception:  # noqa: BLE001 - queue.Empty
            break
    return got


def main():
    global server
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("NCCLSMOKE_BIN", "")
    if not binary or not os.access(binary, os.X_OK):
        print("FAIL  usage: torch_client_vs_our_server.py <ncclsmoke binary> (got %r)" % binary)
        return 1
    start_watchdog(WATCHDOG_S)
    print("torch %s (%s) against %s" % (torch.__version__, dist.__file__, binary), flush=True)

    server = subprocess.Popen([binary, "store", "serve", "--port", "0", "--host", HOST],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    children.append(server)  # the watchdog kills it
    # Server log lines (one per closed-for-errors connection) are collected for the last check.
    server_log = []

    def drain_stderr():
        for line in server.stderr:
            server_log.append(line.rstrip())
            print("  server log: " + line.rstrip(), flush=True)
    threading.Thread(target=drain_stderr, daemon=True).start()

    ready, _, _ = select.select([server.stdout], [], [], 10)
    first = server.stdout.readline() if ready else ""
    m = re.search(r"listening on port (\d+)", first)
    if not check("server starts and prints its port", m, "got %r" % first):
        return 1
    port = int(m.group(1))
    print("  " + first.strip(), flush=True)

    st = client(port)

    def basic():
        st.set("k", "v1")
        if st.get("k") != b"v1":
            return False, "get returned %r" % st.get("k")
        st.set("bin", b"\x00\xff\x00")
        return st.get("bin") == b"\x00\xff\x00", "binary value"
    step("set/get (text and binary)", basic)

    def big():
        value = os.urandom(1 << 20)
        st.set("big", value)
        return st.get("big") == value
    step("1 MiB value round trip", big)

    def add():
        a, b, c = st.add("n", 2), st.add("n", 3), st.add("n", -1)
        return (a, b, c) == (2, 5, 4) and st.get("n") == b"4", (a, b, c, st.get("n"))
    step("add (ASCII decimal counter)", add)

    def compare_set():
        r1 = st.compare_set("cs", "x", "y")      # missing, non-empty expected: returns expected
        r2 = st.compare_set("cs", "", "first")   # missing, empty expected: creates
        r3 = st.compare_set("cs", "nope", "z")   # mismatch: current value
        r4 = st.compare_set("cs", "first", "second")
        got = (r1, r2, r3, r4, st.get("cs"))
        return got == (b"x", b"first", b"first", b"second", b"second"), got
    step("compare_set (torch semantics)", compare_set)

    def num_and_delete():
        before = st.num_keys()
        st.set("temp", "1")
        after_set = st.num_keys()
        d1, d2 = st.delete_key("temp"), st.delete_key("temp")
        after_del = st.num_keys()
        got = (after_set - before, d1, d2, after_del - before)
        return got == (1, True, False, 0), got
    step("num_keys and delete_key", num_and_delete)

    def wait_present_and_woken():
        st.set("w1", "1")
        st.wait(["w1"], td(5))
        other = client(port)
        threading.Timer(0.3, lambda: other.set("w2", "later")).start()
        t0 = time.monotonic()
        st.wait(["w1", "w2"], td(5))
        return time.monotonic() - t0 < 4.5
    step("wait: present keys, and woken by another client's set", wait_present_and_woken)

    def wait_times_out():
        t0 = time.monotonic()
        try:
            st.wait(["never"], td(1))
            return False, "wait returned without the key"
        except RuntimeError as e:
            waited = time.monotonic() - t0
            return 0.8 < waited < 4.0, "waited %.2fs: %s" % (waited, e)
    step("wait on a missing key times out with an exception", wait_times_out)
    step("the same client is still served after its timeout", lambda: st.add("n", 10) == 14)
    step("a fresh client is served after the timeout", lambda: client(port).get("k") == b"v1")

    def sixteen():
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        procs = [ctx.Process(target=counter_worker, args=(port, 16, q)) for _ in range(16)]
        for p in procs:
            p.start()
        got = collect(q, 16, 20)
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
        ns = sorted(g[1] for g in got if g[0] == "ok")
        errors = [g[1] for g in got if g[0] != "ok"]
        ok = ns == list(range(1, 17)) and not errors and st.get("counter") == b"16"
        return ok, "counts %s errors %s" % (ns, errors)
    step("16 concurrent torch clients: add then wait on a barrier", sixteen)

    def wait_for_workers():
        ctx = mp.get_context("fork")
        q, hold = ctx.Queue(), ctx.Event()
        procs = [ctx.Process(target=init_worker, args=(port, 4, q, hold)) for _ in range(4)]
        for p in procs:
            p.start()
        try:
            got = collect(q, 4, 20)
            if len(got) != 4 or any(g[0] != "ok" for g in got):
                return False, "workers: %s" % got
            # 1.13's master loop: doGet("init/") every 10 ms until >= world_size.
            with socket.create_connection((HOST, port), timeout=5) as raw:
                got_init = [b""]

                def all_joined():
                    got_init[0] = raw_wait_get(raw, b"init/")
                    return int(got_init[0]) >= 4
                poll_until(all_joined, 5, 0.01)
                seen = got_init[0]
            # The workers' idle callback connections are open now; the store still answers.
            alive = client(port).get("k") == b"v1"
            return (seen == b"4" and alive,
                    "init/ = %r, served with idle sockets: %s" % (seen, alive))
        finally:
            hold.set()
            for p in procs:
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
    step("wait_for_workers world_size=4: init/ reaches 4 (1.13 master's poll)", wait_for_workers)

    step("server logged no protocol error for torch's connections",
         lambda: (not any("closed connection" in l for l in server_log), "\n".join(server_log)))
    step("server still running", lambda: server.poll() is None)
    return 0


if __name__ == "__main__":
    rc = 1
    try:
        rc = main()
    finally:
        kill_server()
    os._exit(summary(rc))
