#!/usr/bin/python3
"""Our C++ TcpStore client (legacy dialect) against a real PyTorch 1.13 TCPStore server.

Usage: /usr/bin/python3 our_client_vs_torch_server.py <store_driver binary>

The store_driver (tests/interop/store_driver.cpp) runs our client and takes one JSON command per
line, so this script can interleave our client's operations with a torch client's on the same
server: every value our client writes is read back through torch and vice versa (torch prefixes
user keys with "/", and so do we). Also checked: a WAIT that times out leaves the connection
usable, GET/WAIT woken by a torch SET, ops a 1.13 server lacks (APPEND) fail cleanly, join_workers
unblocks a torch master created with world_size=2 and wait_for_workers=True, and a client told the
wrong (modern) dialect fails with a hint instead of hanging.

Prints one line per check, then "N passed, M failed"; exits 1 on any failure. Bounded: a watchdog
kills everything after 55 s.
"""
import datetime
import json
import os
import queue
import socket
import subprocess
import sys
import threading

from checklist import check, children, kill_children, pause, start_watchdog, summary  # noqa: E402

try:
    import torch.distributed as dist
except ImportError as e:  # ctest reports 77 as skipped (SKIP_RETURN_CODE)
    print("SKIP: PyTorch is not importable by %s: %s" % (sys.executable, e))
    sys.exit(77)

WATCHDOG_S = 55


def timeout(s):
    return datetime.timedelta(seconds=s)


class Driver:
    """Our client in a subprocess: send a command, read its JSON result."""

    def __init__(self, binary, port, dialect="legacy", connect_timeout=10, op_timeout=5):
        self.proc = subprocess.Popen(
            [binary, "--host", "127.0.0.1", "--port", str(port), "--dialect", dialect,
             "--timeout", str(connect_timeout), "--op-timeout", str(op_timeout)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        children.append(self.proc)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.hello = self._next(connect_timeout + 5)

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _next(self, wait_s):
        try:
            line = self.lines.get(timeout=wait_s)
        except queue.Empty:
            return {"ok": False, "class": "harness", "error": "no reply within %.1fs" % wait_s}
        if line is None:
            return {"ok": False, "class": "harness", "error": "store_driver exited"}
        return json.loads(line)

    def send(self, *cmd):
        self.proc.stdin.write(json.dumps(list(cmd)) + "\n")
        self.proc.stdin.flush()

    def reply(self, wait_s=10):
        return self._next(wait_s)

    def run(self, *cmd, wait_s=10):
        self.send(*cmd)
        return self.reply(wait_s)

    def close(self):
        try:
            self.send("quit")
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_has(port, key):
    """Whether a torch client sees `key` (1.13's Python TCPStore has no check(); a GET on a fresh,
    short-timeout client that is then thrown away stands in for it)."""
    probe = dist.TCPStore("127.0.0.1", port, 1, False, timeout(5), wait_for_workers=False)
    probe.set_timeout(timeout(0.3))
    try:
        probe.get(key)
        return True
    except RuntimeError:
        return False


def result(r):
    return r.get("result") if r.get("ok") else None


def main():
    if len(sys.argv) != 2:
        print("usage: our_client_vs_torch_server.py <store_driver>")
        return 2
    binary = sys.argv[1]
    start_watchdog(WATCHDOG_S)

    # ---- one torch 1.13 master (world_size 1, not waiting), a torch client, and ours ----
    master = dist.TCPStore("127.0.0.1", 0, 1, True, timeout(10), wait_for_workers=False)
    port = master.port
    torch_client = dist.TCPStore("127.0.0.1", port, 1, False, timeout(10), wait_for_workers=False)
    ours = Driver(binary, port)
    hello = ours.hello
    check("connect (legacy dialect) to torch %s master on port %d" % (
        getattr(dist, "__version__", "1.13"), port),
        hello.get("ok") and hello.get("peer") == "127.0.0.1:%d" % port, hello)
    check("connect report names the loopback interface", hello.get("interface") == "lo", hello)
    if not hello.get("ok"):
        return finish()

    r = ours.run("set", "ours/a", b"hello".hex())
    check("our SET is read by a torch client", r.get("ok") and torch_client.get("ours/a") == b"hello", r)

    binary_value = b"\x00\x01binary\xff\n"
    torch_client.set("torch/b", binary_value)
    r = ours.run("get", "torch/b", 2)
    check("a torch SET (binary value) is read by our GET",
          result(r) == binary_value.hex(), r)
    ours.run("set", "ours/bin", binary_value.hex())
    check("our SET (binary value) is read by torch", master.get("ours/bin") == binary_value)

    a, b = result(ours.run("add", "cnt", 2)), result(ours.run("add", "cnt", 3))
    check("our ADD counts", (a, b) == (2, 5), (a, b))
    check("torch reads our counter as ASCII decimal", torch_client.get("cnt") == b"5")
    torch_client.add("cnt", 10)
    check("our ADD 0 sees torch's ADD", result(ours.run("add", "cnt", 0)) == 15)

    check("CHECK of a present key", result(ours.run("check", ["ours/a"])) is True)
    check("CHECK of a present and a missing key",
          result(ours.run("check", ["ours/a", "nope"])) is False)
    check("torch CHECK sees our key", torch_has(port, "ours/a"))

    r = ours.run("wait", ["ours/a", "torch/b"], 2)
    check("WAIT on present keys returns", r.get("ok"), r)

    r = ours.run("wait", ["ours/a", "never"], 0.5)
    check("WAIT on a missing key times out (timed_out)",
          not r.get("ok") and r.get("class") == "timed_out", r)
    check("the timeout is near its deadline", 0.4 <= r.get("elapsed_s", 0) < 3, r)
    check("the timeout message names the missing key", "'/never'" in r.get("error", ""), r)
    r = ours.run("set", "after", b"1".hex())
    check("the connection works after a WAIT timeout (reconnected)",
          r.get("ok") and torch_client.get("after") == b"1"
          and result(ours.run("get", "after", 2)) == b"1".hex(), r)

    ours.send("wait", ["late"], 10)
    pause(0.3, "a late SET: our WAIT must block until torch sets the key")
    torch_client.set("late", b"x")
    r = ours.reply()
    check("our WAIT is woken by a torch SET", r.get("ok") and r.get("elapsed_s", 0) >= 0.2, r)

    ours.send("get", "late2", 10)
    pause(0.3, "a late SET: our GET must block until torch sets the key")
    master.set("late2", b"value")
    r = ours.reply()
    check("our GET blocks until torch sets the key", result(r) == b"value".hex(), r)

    check("COMPARE_SET creates a missing key (empty expected)",
          result(ours.run("compare_set", "cs", "", b"first".hex())) == b"first".hex())
    check("torch COMPARE_SET swaps our value",
          torch_client.compare_set("cs", "first", "second") == b"second")
    check("our COMPARE_SET with a wrong expected value leaves it",
          result(ours.run("compare_set", "cs", b"wrong".hex(), b"x".hex())) == b"second".hex())
    check("COMPARE_SET on a missing key with non-empty expected returns expected",
          result(ours.run("compare_set", "absent", b"exp".hex(), b"d".hex())) == b"exp".hex()
          and not torch_has(port, "absent"))

    check("our DELETE_KEY of a present key", result(ours.run("delete", "ours/a")) is True)
    check("torch no longer sees the deleted key", not torch_has(port, "ours/a"))
    check("our DELETE_KEY of a missing key", result(ours.run("delete", "ours/a")) is False)
    torch_client.delete_key("torch/b")
    check("our CHECK sees torch's DELETE_KEY", result(ours.run("check", ["torch/b"])) is False)

    n = result(ours.run("num_keys"))
    check("GETNUMKEYS agrees with torch", n == torch_client.num_keys(), (n, torch_client.num_keys()))

    r = ours.run("multi_get", ["cnt", "cs"], 2)
    check("MULTI_GET (GET per key in legacy)",
          result(r) == [b"15".hex(), b"second".hex()], r)

    r = ours.run("append", "cs", b"!".hex())
    check("APPEND on a 1.13 server fails cleanly (invalid, names the dialect)",
          not r.get("ok") and r.get("class") == "invalid" and "modern dialect" in r.get("error", ""),
          r)
    check("the store works after the failed APPEND", result(ours.run("get", "cs", 2)) == b"second".hex())
    check("the 1.13 server survived", master.get("cs") == b"second")

    r = ours.run("join", 3, 0.5)
    check("join_workers short of world_size times out naming the count",
          not r.get("ok") and r.get("class") == "timed_out" and "/3 workers joined" in r.get("error", ""),
          r)
    ours.close()

    # ---- join_workers unblocks a torch master with world_size=2, wait_for_workers=True ----
    master_script = (
        "import sys, datetime, torch.distributed as d\n"
        "s = d.TCPStore('127.0.0.1', int(sys.argv[1]), 2, True, datetime.timedelta(seconds=20),"
        " wait_for_workers=True)\n"
        "print('joined', flush=True)\n"
        "print('value', s.get('from_ours').decode(), flush=True)\n")
    for attempt in range(3):
        jport = free_port()
        proc = subprocess.Popen([sys.executable, "-c", master_script, str(jport)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        children.append(proc)
        # Our client starts right away: its connect retries (refused) until the master listens.
        joiner = Driver(binary, jport, connect_timeout=15)
        if joiner.hello.get("ok"):
            break
        joiner.close()
        proc.kill()
        out, err = proc.communicate()
        if "in use" not in err:
            break
    check("our client connects to the waiting torch master", joiner.hello.get("ok"), joiner.hello)
    r = joiner.run("join", 2, 15, wait_s=20)
    check("join_workers(2) returns once both have joined", result(r) == 2, r)
    joiner.run("set", "from_ours", b"hi".hex())
    try:
        out, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    check("the torch master was unblocked by our join", "joined" in out, (out, err[-500:]))
    check("and read the key we set afterwards", "value hi" in out, (out, err[-500:]))
    joiner.close()

    # ---- told the wrong dialect: no hang, a timed-out handshake with a hint ----
    wrong = dist.TCPStore("127.0.0.1", 0, 1, True, timeout(5), wait_for_workers=False)
    d = Driver(binary, wrong.port, dialect="modern", connect_timeout=3, op_timeout=1)
    h = d.hello
    check("modern handshake against a 1.13 server fails within its op timeout",
          not h.get("ok") and h.get("class") in ("timed_out", "stalled", "reset"), h)
    check("and the error hints at the legacy dialect", "legacy dialect" in h.get("error", ""), h)
    d.close()
    print("wrong-dialect error:", h.get("error"), flush=True)
    return finish()


def finish():
    kill_children()
    return summary()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # torch's TCPStore daemons may outlive main(); don't wait for them.
    os._exit(code)
