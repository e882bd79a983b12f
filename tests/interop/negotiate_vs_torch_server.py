#!/usr/bin/python3
"""Our client NEGOTIATING its dialect (TcpStoreOptions::negotiate) with a real torch TCPStore server
(Debian's 1.13 here: legacy era; on a torch 2.x machine it expects that torch's era).

Usage: /usr/bin/python3 negotiate_vs_torch_server.py <store_driver binary>

Checks: the probe finds the legacy era (torch <= 2.0) without harming the store: a torch client
connected before the probe keeps being served while and after we probe (the probe's
VALIDATE + GETNUMKEYS x4 makes 1.13 reset that one connection; a bare VALIDATE would stall it).
Then set/get/add/compare_set/wait/check/delete/num_keys work through the negotiated client and
are seen by torch; ops 1.13 lacks fail with StoreError(invalid) naming the era; a second probe of
the endpoint is answered from the cache.

Prints one line per check, then "N passed, M failed"; exits 1 on any failure, 77 without torch.
Bounded: a watchdog kills everything after 50 s.
"""
import datetime
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checklist import check, kill_children, pause, poll_until, start_watchdog, summary  # noqa: E402

try:
    import torch.distributed as dist
except ImportError as e:  # ctest reports 77 as skipped (SKIP_RETURN_CODE)
    print("SKIP: PyTorch is not importable by %s: %s" % (sys.executable, e))
    sys.exit(77)

from our_client_vs_torch_server import Driver, result  # noqa: E402

WATCHDOG_S = 50

try:
    import torch
    VERSION = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
except Exception:  # noqa: BLE001 - Debian's 1.13 is what these machines have
    VERSION = (1, 13)
# What the probe must find for this torch (LAUNCHERS.md "Store dialects by torch version").
if VERSION < (2, 1):
    EXPECT = {"era": "torch<=2.0", "dialect": "legacy", "ping": False, "text": "torch <= 2.0"}
elif VERSION < (2, 5):
    EXPECT = {"era": "torch2.1-2.4", "dialect": "modern", "ping": False, "text": "torch 2.1-2.4"}
else:
    EXPECT = {"era": "torch>=2.5", "dialect": "modern", "ping": True, "text": "torch >= 2.5"}
LEGACY = EXPECT["dialect"] == "legacy"


def timeout(s):
    return datetime.timedelta(seconds=s)


class NegotiatingDriver(Driver):
    """store_driver with --negotiate 1 (its --dialect is ignored then)."""

    def __init__(self, binary, port, connect_timeout=10, op_timeout=5):
        import queue
        import subprocess
        from checklist import children
        self.proc = subprocess.Popen(
            [binary, "--host", "127.0.0.1", "--port", str(port), "--dialect", "modern",
             "--negotiate", "1", "--timeout", str(connect_timeout),
             "--op-timeout", str(op_timeout)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        children.append(self.proc)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.hello = self._next(connect_timeout + 5)


def main():
    if len(sys.argv) != 2:
        print("usage: negotiate_vs_torch_server.py <store_driver>")
        return 2
    binary = sys.argv[1]
    start_watchdog(WATCHDOG_S)

    master = dist.TCPStore("127.0.0.1", 0, 1, True, timeout(10), wait_for_workers=False)
    port = master.port
    torch_client = dist.TCPStore("127.0.0.1", port, 1, False, timeout(10), wait_for_workers=False)
    torch_client.set("before", b"1")

    # A torch client keeps using the store while our client probes and connects.
    stop = threading.Event()
    torch_ops = {"ok": 0, "errors": []}

    def torch_traffic():
        c = dist.TCPStore("127.0.0.1", port, 1, False, timeout(3), wait_for_workers=False)
        while not stop.is_set():
            try:
                c.add("torch_counter", 1)
                torch_ops["ok"] += 1
            except Exception as e:  # noqa: BLE001 - reported below
                torch_ops["errors"].append(repr(e)[:200])
            stop.wait(0.01)  # the torch client's pace; ends as soon as it is told to stop

    traffic = threading.Thread(target=torch_traffic, daemon=True)
    traffic.start()
    # The probe starts while the torch client is busy: once it has been served a few times.
    poll_until(lambda: torch_ops["ok"] >= 5 or torch_ops["errors"], 10)

    ours = NegotiatingDriver(binary, port)
    hello = ours.hello
    neg = hello.get("negotiation") or {}
    check("negotiated connect to torch %d.%d on port %d" % (VERSION + (port,)), hello.get("ok"), hello)
    check("the probe found the era %s" % EXPECT["era"],
          neg.get("era") == EXPECT["era"] and neg.get("dialect") == EXPECT["dialect"]
          and neg.get("ping") is EXPECT["ping"] and neg.get("cached") is False, neg)
    check("era text names %s" % EXPECT["text"], EXPECT["text"] in neg.get("era_text", ""), neg)
    print("probe took %.3fs: %s" % (neg.get("probe_s", -1), neg.get("era_text")), flush=True)
    if not hello.get("ok"):
        stop.set()
        return finish()

    # And it goes on being served after the probe: a few more ADDs (a stalled connection ends in
    # an error within its 3 s timeout instead).
    served = torch_ops["ok"]
    poll_until(lambda: torch_ops["ok"] >= served + 10 or torch_ops["errors"], 5)
    stop.set()
    traffic.join(5)
    check("a torch client was served throughout the probe (no stall, no errors)",
          torch_ops["ok"] > 0 and not torch_ops["errors"], torch_ops)
    check("the torch master still answers after the probe",
          master.get("before") == b"1" and torch_client.num_keys() >= 1)

    r = ours.run("set", "neg/a", b"hello".hex())
    check("negotiated SET is read by torch", r.get("ok") and torch_client.get("neg/a") == b"hello", r)
    torch_client.set("torch/b", b"\x00bin\xff")
    check("torch SET is read by the negotiated GET",
          result(ours.run("get", "torch/b", 2)) == b"\x00bin\xff".hex())
    a, b = result(ours.run("add", "cnt", 2)), result(ours.run("add", "cnt", 5))
    check("ADD counts (and torch reads it as decimal)",
          (a, b) == (2, 7) and torch_client.get("cnt") == b"7", (a, b))
    check("COMPARE_SET creates, then swaps",
          result(ours.run("compare_set", "cs", "", b"one".hex())) == b"one".hex()
          and result(ours.run("compare_set", "cs", b"one".hex(), b"two".hex())) == b"two".hex()
          and torch_client.get("cs") == b"two")
    check("CHECK of present / missing keys",
          result(ours.run("check", ["neg/a"])) is True
          and result(ours.run("check", ["neg/a", "nope"])) is False)
    r = ours.run("wait", ["neg/a", "torch/b"], 2)
    check("WAIT on present keys returns", r.get("ok"), r)
    ours.send("wait", ["late"], 10)
    pause(0.3, "a late SET: the WAIT must block until torch sets the key")
    torch_client.set("late", b"x")
    r = ours.reply()
    check("WAIT is woken by a torch SET", r.get("ok"), r)
    r = ours.run("wait", ["never"], 0.5)
    check("WAIT on a missing key times out (timed_out)",
          not r.get("ok") and r.get("class") == "timed_out", r)
    check("DELETE_KEY then torch no longer has it",
          result(ours.run("delete", "neg/a")) is True
          and result(ours.run("check", ["neg/a"])) is False)
    n = result(ours.run("num_keys"))
    check("GETNUMKEYS agrees with torch", n == torch_client.num_keys(), (n, torch_client.num_keys()))

    r = ours.run("append", "cs", b"!".hex())
    if LEGACY:
        check("APPEND fails cleanly on torch <= 2.0 (invalid, names the era)",
              not r.get("ok") and r.get("class") == "invalid"
              and "torch <= 2.0" in r.get("error", ""), r)
    else:
        check("APPEND works on torch >= 2.1", r.get("ok") and torch_client.get("cs") == b"two!", r)
        ours.run("set", "cs", b"two".hex())
    r = ours.run("queue_push", "q", b"x".hex())
    if LEGACY or VERSION < (2, 8):
        check("QUEUE_PUSH is refused (invalid, names the era and the torch it needs)",
              not r.get("ok") and r.get("class") == "invalid"
              and EXPECT["text"] in r.get("error", "") and "torch >= 2.8" in r.get("error", ""), r)
    else:
        check("QUEUE_PUSH works on a torch >= 2.8 libuv server", r.get("ok"), r)
    check("the store works after the refused ops", result(ours.run("get", "cs", 2)) == b"two".hex())

    p = result(ours.run("probe"))
    check("a second probe of the endpoint is answered from the cache",
          p is not None and p.get("cached") is True and p.get("era") == EXPECT["era"], p)

    # A fresh negotiating process probes again (the cache is per process) and also gets legacy.
    second = NegotiatingDriver(binary, port)
    neg2 = second.hello.get("negotiation") or {}
    check("another negotiating process also finds %s" % EXPECT["era"],
          second.hello.get("ok") and neg2.get("era") == EXPECT["era"], second.hello)
    check("and reads what the first one wrote", result(second.run("get", "cnt", 2)) == b"7".hex())
    second.close()
    ours.close()
    check("the torch master survived everything", master.get("cs") == b"two")
    return finish()


def finish():
    kill_children()
    return summary()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # torch's TCPStore daemons may outlive main()
