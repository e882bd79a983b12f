#!/usr/bin/env python3
"""TCPStore interop with torch >= 2.x (modern dialect: VALIDATE + PING), for the GPU machine.

Usage: python3 torch2_interop.py <ncclsmoke binary>     (or NCCLSMOKE_BIN=<binary>)

Part 1, torch 2.x clients -> our server (`ncclsmoke store serve`): the constructor's VALIDATE +
PING, set/get/add/check/wait/compare_set/delete_key/num_keys, append/multi_get/multi_set, a wait
that times out (2.x cancels it with CANCEL_WAIT, so the same client must stay usable), queue ops
and list_keys where this torch has them, 16 concurrent clients on a barrier, wait_for_workers with
world_size=4; and no protocol error in the server's log.
Part 2, our client -> a torch 2.x TCPStore master: `ncclsmoke store check --dialect modern`,
once with use_libuv=True and once with use_libuv=False.

Skips (exit 77) when torch < 2 (this project's CPU machines have Debian's 1.13; run it where
torch 2.x is installed, with that interpreter). TORCH2_INTEROP_DRY_RUN=1 runs it anyway on 1.13
(legacy dialect, 2.x-only calls reported as skipped) to exercise the script itself.
Prints one line per check, then "N passed, M failed"; exits 1 on any failure. Bounded: a
watchdog kills everything after 100 s; servers are always killed.
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

from checklist import (  # noqa: E402
    check, children, kill_children, skip, start_watchdog, step, summary)

try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    print("SKIP: PyTorch is not importable by %s: %s" % (sys.executable, e))
    sys.exit(77)

DRY_RUN = os.environ.get("TORCH2_INTEROP_DRY_RUN") == "1"
MAJOR = int(torch.__version__.split(".")[0])
if MAJOR < 2 and not DRY_RUN:
    print("SKIP: torch %s is older than 2.x; this test needs the modern (VALIDATE/PING) dialect. "
          "Run it with the interpreter that has torch >= 2.1 (e.g. on the GPU machine)."
          % torch.__version__)
    sys.exit(77)

WATCHDOG_S = 100
HOST = "127.0.0.1"


def td(s):
    return datetime.timedelta(seconds=s)


def client(port, timeout_s=5, world_size=None, wait_for_workers=True):
    return dist.TCPStore(HOST, port, world_size, False, td(timeout_s),
                         wait_for_workers=wait_for_workers)


def has(store, name):
    return callable(getattr(store, name, None))


def counter_worker(port, n_workers, out):
    try:
        st = client(port, 10)
        n = st.add("counter", 1)
        if n == n_workers:
            st.set("barrier", "open")
        st.wait(["barrier"], td(10))
        out.put(("ok", n))
    except Exception as e:  # noqa: BLE001
        out.put(("error", repr(e)))


def init_worker(port, world, out):
    try:
        client(port, 10, world_size=world, wait_for_workers=True)
        out.put(("ok", None))
    except Exception as e:  # noqa: BLE001
        out.put(("error", repr(e)))


def run_workers(target, args, n, budget_s=20):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, q)) for _ in range(n)]
    for p in procs:
        p.start()
    got, deadline = [], time.monotonic() + budget_s
    while len(got) < n and time.monotonic() < deadline:
        try:
            got.append(q.get(timeout=max(0.1, deadline - time.monotonic())))
        except Exception:  # noqa: BLE001 - queue.Empty
            break
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
    return got


def start_our_server(binary):
    proc = subprocess.Popen([binary, "store", "serve", "--port", "0", "--host", HOST],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    children.append(proc)
    log = []

    def drain():
        for line in proc.stderr:
            log.append(line.rstrip())
            print("  server log: " + line.rstrip(), flush=True)
    threading.Thread(target=drain, daemon=True).start()
    ready, _, _ = select.select([proc.stdout], [], [], 10)
    first = proc.stdout.readline() if ready else ""
    m = re.search(r"listening on port (\d+)", first)
    return proc, (int(m.group(1)) if m else None), log, first


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def part1_torch_clients_vs_our_server(binary):
    proc, port, log, first = start_our_server(binary)
    try:
        if not check("our server starts and prints its port", port, "got %r" % first):
            return
        st = client(port)  # 2.x: VALIDATE + PING inside the constructor
        check("torch %s client connects (VALIDATE + PING)" % torch.__version__, True)

        def basic():
            st.set("k", "v1")
            st.set("bin", b"\x00\xff")
            a, b = st.add("n", 2), st.add("n", 3)
            got = (st.get("k"), st.get("bin"), a, b, st.get("n"))
            return got == (b"v1", b"\x00\xff", 2, 5, b"5"), got
        step("set/get/add", basic)

        def compare_set():
            got = (st.compare_set("cs", "x", "y"), st.compare_set("cs", "", "first"),
                   st.compare_set("cs", "nope", "z"), st.compare_set("cs", "first", "second"))
            return got == (b"x", b"first", b"first", b"second"), got
        step("compare_set", compare_set)

        def num_delete():
            before = st.num_keys()
            st.set("tmp", "1")
            got = (st.num_keys() - before, st.delete_key("tmp"), st.delete_key("tmp"),
                   st.num_keys() - before)
            return got == (1, True, False, 0), got
        step("num_keys/delete_key", num_delete)

        if has(st, "check"):
            step("check", lambda: st.check(["k"]) and not st.check(["k", "missing"]))
        else:
            skip("check", "not in this torch")

        if has(st, "append") and has(st, "multi_get") and has(st, "multi_set"):
            def multi():
                st.append("ap", "ab")
                st.append("ap", "cd")
                st.multi_set(["m1", "m2"], ["1", "2"])
                got = (st.get("ap"), st.multi_get(["m2", "m1"]))
                return got == (b"abcd", [b"2", b"1"]), got
            step("append/multi_get/multi_set", multi)
        else:
            skip("append/multi_get/multi_set", "not in this torch")

        def wait_timeout_then_usable():
            t0 = time.monotonic()
            try:
                st.wait(["never"], td(1))
                return False, "wait returned"
            except Exception as e:  # noqa: BLE001 - DistStoreError / RuntimeError by version
                waited = time.monotonic() - t0
                if not 0.8 < waited < 4:
                    return False, "waited %.2fs: %s" % (waited, e)
            if MAJOR < 2:
                return True  # 1.13 has no CANCEL_WAIT: a later set would desync it (torch's bug)
            # CANCEL_WAIT withdrew the wait: a later set must not desync this client.
            client(port).set("never", "now")
            return st.add("n", 1) == 6 and st.get("k") == b"v1"
        step("wait timeout (CANCEL_WAIT), then the same client is usable", wait_timeout_then_usable)

        if has(st, "queue_push") and has(st, "queue_pop") and has(st, "queue_len"):
            def queues():
                st.queue_push("q", "a")
                st.queue_push("q", b"b")
                n = st.queue_len("q")
                got = (n, st.queue_pop("q"), st.queue_pop("q"), st.queue_len("q"))
                return got == (2, b"a", b"b", 0), got
            step("queue_push/queue_pop/queue_len", queues)
        else:
            skip("queue ops", "not in this torch")

        if has(st, "list_keys"):
            def list_keys():
                keys = set(st.list_keys())
                return {"k", "n", "cs"} <= keys, sorted(keys)
            step("list_keys", list_keys)
        else:
            skip("list_keys", "not in this torch")

        def sixteen():
            got = run_workers(counter_worker, (port, 16), 16)
            ns = sorted(g[1] for g in got if g[0] == "ok")
            errors = [g[1] for g in got if g[0] != "ok"]
            return ns == list(range(1, 17)) and st.get("counter") == b"16", (ns, errors)
        step("16 concurrent torch clients on a barrier", sixteen)

        def workers():
            got = run_workers(init_worker, (port, 4), 4)
            if any(g[0] != "ok" for g in got) or len(got) != 4:
                return False, got
            # init/ is not "/"-prefixed, so torch's get cannot read it: use a raw modern client.
            with socket.create_connection((HOST, port), timeout=5) as s:
                s.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE))          # VALIDATE
                s.sendall(b"\x0d" + struct.pack("<I", 77))                  # PING
                assert s.recv(4, socket.MSG_WAITALL) == struct.pack("<I", 77)
                s.sendall(b"\x03" + struct.pack("<Q", 5) + b"init/")        # GET init/
                n = struct.unpack("<Q", s.recv(8, socket.MSG_WAITALL))[0]
                value = s.recv(n, socket.MSG_WAITALL)
            return value == b"4", value
        step("wait_for_workers world_size=4: init/ counts 4", workers)

        step("server logged no protocol error",
             lambda: (not any("closed connection" in l for l in log), "\n".join(log)))
    finally:
        stop(proc)


def part2_our_client_vs_torch_master(binary):
    for libuv in (True, False):
        name = "ncclsmoke store check --dialect modern vs torch master (use_libuv=%s)" % libuv
        kwargs = {} if DRY_RUN and MAJOR < 2 else {"use_libuv": libuv}
        dialect = "legacy" if MAJOR < 2 else "modern"
        try:
            master = dist.TCPStore(HOST, 0, None, True, td(30), wait_for_workers=False, **kwargs)
        except TypeError as e:
            skip(name, "this torch has no use_libuv: %s" % e)
            continue
        try:
            out = subprocess.run([binary, "store", "check", "--host", HOST, "--port",
                                  str(master.port), "--dialect", dialect, "--timeout", "20"],
                                 capture_output=True, text=True, timeout=40)
            ok = out.returncode == 0 and "self-check passed" in out.stdout
            check(name, ok, "rc %d\n%s%s" % (out.returncode, out.stdout, out.stderr))
        except subprocess.TimeoutExpired as e:
            check(name, False, "timed out: %s" % e)
        finally:
            del master


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("NCCLSMOKE_BIN", "")
    if not binary or not os.access(binary, os.X_OK):
        print("FAIL  usage: torch2_interop.py <ncclsmoke binary> (got %r)" % binary)
        return 1
    start_watchdog(WATCHDOG_S)
    print("torch %s%s against %s" % (torch.__version__, " (DRY RUN)" if DRY_RUN else "", binary),
          flush=True)
    part1_torch_clients_vs_our_server(binary)
    part2_our_client_vs_torch_master(binary)
    return 0


if __name__ == "__main__":
    rc = 1
    try:
        rc = main()
    finally:
        kill_children()
    os._exit(summary(rc))
