"""The store attacks, shared by tests/rendezvous/store_attack_test.py (CI: RSS within
budget, attacker closed, bystander served) and bench/store_attack_bench.py (torch client latency,
before/after). Plain sockets, loopback only; every wait is bounded.

Each attack is a function (port, server) -> list of problems (empty: the server held). The
server is `ncclsmoke store serve` in its own process; its stderr (one line per closed
connection) is in server.log().
"""
import json
import os
import re
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
from waiting import pause, poll_until  # noqa: E402

MAGIC = 0x3C85F7CE
# modern opcodes (FACTS.md)
SET, GET, ADD, NUM_KEYS, DELETE, APPEND, MULTI_SET, PING = 1, 3, 4, 7, 8, 9, 11, 13
WAIT = 6
LEGACY_WATCH_KEY = 7


def b64(n):
    return struct.pack("<Q", n)


def field(data):
    return b64(len(data)) + data


class Client:
    """A modern-dialect client (VALIDATE, then ops) on a blocking socket with a timeout."""

    def __init__(self, port, timeout=10.0, rcvbuf=0, legacy=False):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.buf = b""
        if not legacy:
            self.sock.sendall(b"\x00" + struct.pack("<I", MAGIC))
            self.ping()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def recv_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def ping(self, nonce=0x5EED):
        self.sock.sendall(bytes([PING]) + struct.pack("<I", nonce))
        got = struct.unpack("<I", self.recv_exact(4))[0]
        if got != nonce:
            raise ConnectionError("ping echo %x != %x" % (got, nonce))

    def set(self, key, value):
        self.sock.sendall(bytes([SET]) + field(key) + field(value))

    def get(self, key):
        self.sock.sendall(bytes([GET]) + field(key))
        n = struct.unpack("<Q", self.recv_exact(8))[0]
        return self.recv_exact(n)

    def num_keys(self):
        self.sock.sendall(bytes([NUM_KEYS]))
        return struct.unpack("<q", self.recv_exact(8))[0]

    def closed_within(self, seconds):
        """True when the server closes this connection within `seconds` (drains what comes)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if not self.sock.recv(1 << 20):
                    return True
            except socket.timeout:
                return False
            except OSError:
                return True
        return False


def send_quietly(sock, data):
    """sendall that reports (instead of raising) that the server closed the connection."""
    try:
        sock.sendall(data)
        return True
    except OSError:
        return False


class Server:
    def __init__(self, binary, flags):
        self.logf = tempfile.NamedTemporaryFile(prefix="store-attack-", suffix=".log",
                                                delete=False)
        self.flags = list(flags)
        self.proc = subprocess.Popen([binary, "store", "serve", "--host", "127.0.0.1",
                                      "--port", "0"] + flags, stdout=subprocess.PIPE,
                                     stderr=self.logf, start_new_session=True)
        line = b""
        deadline = time.monotonic() + 15
        while b"\n" not in line and time.monotonic() < deadline:
            ch = self.proc.stdout.read(1)
            if not ch:
                break
            line += ch
        words = line.decode(errors="replace").split()
        if "port" not in words:
            self.stop()
            raise RuntimeError("server did not start: %r %s" % (line, self.log()))
        self.port = int(words[words.index("port") + 1])
        self.peak_rss = 0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def rss(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def _sample(self):
        while not self._stop.is_set():
            self.peak_rss = max(self.peak_rss, self.rss())
            self._stop.wait(0.01)  # the sampling interval; ends as soon as it is told to stop

    def log(self):
        try:
            with open(self.logf.name, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def wait_log(self, needles, count=1, timeout=5.0):
        """True when `count` log lines contain every needle, within `timeout` seconds."""
        return poll_until(lambda: sum(1 for l in self.log().splitlines()
                                      if all(x in l for x in needles)) >= count, timeout, 0.05)

    def longest_turn_ms(self):
        """The server's longest event-loop turn, from the line `store serve` logs as it exits
        (after stop()); None when it did not say."""
        m = re.findall(r"longest event-loop turn ([0-9.]+) ms", getattr(self, "final_log", ""))
        return float(m[-1]) if m else None

    def turn_cpu_ms(self):
        """(CPU ms of the longest turn, most CPU ms of any turn), from the line the server logs
        as it stops when a turn went over 10 ms wall; None when it did not say (no such turn, or
        a server that does not measure CPU time)."""
        m = re.findall(r"longest event-loop turn [0-9.]+ ms wall, ([0-9.]+) ms on CPU; "
                       r"most CPU in one turn ([0-9.]+) ms", getattr(self, "final_log", ""))
        return (float(m[-1][0]), float(m[-1][1])) if m else None

    def stop(self):
        if getattr(self, "_stop", None):
            self._stop.set()
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.final_log = self.log()
        try:
            os.unlink(self.logf.name)
        except OSError:
            pass


# ---- the well-behaved client --------------------------------------------------------------------

class RawBystander:
    """SET+GET every 50 ms over the modern dialect; latencies in ms."""

    def __init__(self, port):
        self.port = port
        self.lat, self.errors = [], []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def start(self):
        """Starts the client and returns once it has been served a few times (or failed)."""
        self._t.start()
        if not poll_until(lambda: len(self.lat) >= 3 or self.errors or not self._t.is_alive(), 15):
            self.errors.append("not served 3 times within 15 s, before the attack")

    def _run(self):
        try:
            c = Client(self.port, timeout=15)
        except OSError as e:
            self.errors.append("connect: %s" % e)
            return
        i = 0
        while not self._stop.is_set():
            t = time.perf_counter()
            try:
                value = b"v%d" % i
                c.set(b"/bystander", value)
                if c.get(b"/bystander") != value:
                    self.errors.append("GET returned another value")
            except OSError as e:
                self.errors.append(str(e))
                return
            self.lat.append((time.perf_counter() - t) * 1000)
            i += 1
            self._stop.wait(0.05)
        c.close()

    def stop(self):
        self._stop.set()
        self._t.join(timeout=20)


TORCH_BYSTANDER = r"""
import datetime, json, signal, sys, time
import torch.distributed as dist
sys.path.insert(0, sys.argv[2])  # tests/
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from waiting import pause
stop = [False]
signal.signal(signal.SIGTERM, lambda *a: stop.__setitem__(0, True))
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False,
                      timeout=datetime.timedelta(seconds=30))
store.set("bystander", "warm")
store.get("bystander")
print("ready", flush=True)
lat, errors, i = [], [], 0
while not stop[0]:
    t = time.perf_counter()
    try:
        store.set("bystander", "v%d" % i)
        if store.get("bystander") != b"v%d" % i:
            errors.append("GET returned another value")
    except Exception as e:
        errors.append(str(e))
        break
    lat.append((time.perf_counter() - t) * 1000)
    i += 1
    pause(0.05, "the well-behaved client's pace: a SET+GET every 50 ms")
print(json.dumps({"lat": lat, "errors": errors}), flush=True)
"""


class TorchBystander:
    """torch 1.13's TCPStore client (legacy dialect) doing set+get every 50 ms."""

    def __init__(self, port):
        self.lat, self.errors = [], []
        tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.proc = subprocess.Popen(["/usr/bin/python3", "-c", TORCH_BYSTANDER, str(port), tests],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)

    def start(self):
        line = self.proc.stdout.readline()
        if b"ready" not in line:
            self.errors.append("torch client did not start: %r" % self.proc.stderr.read()[-500:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            out, err = self.proc.communicate()
            self.errors.append("torch client hung (killed)")
        for line in out.decode(errors="replace").splitlines():
            if line.startswith("{"):
                data = json.loads(line)
                self.lat, self.errors = data["lat"], self.errors + data["errors"]


# ---- attacks -------------------------------------------------------------------------------------

MiB = 1 << 20


def attack_append_flood(port, srv):
    """48 APPENDs of 8 MiB to one key (value limit 8 MiB)."""
    c = Client(port, timeout=20)
    payload = bytes([APPEND]) + field(b"/append") + field(b"a" * (8 * MiB))
    done = threading.Event()

    def send_all():
        for _ in range(48):
            if not send_quietly(c.sock, payload):
                break
        done.set()

    t = threading.Thread(target=send_all, daemon=True)
    t.start()
    t.join(timeout=25)
    problems = []
    if not srv.wait_log(["APPEND of", "would exceed max_value_bytes"], timeout=5):
        problems.append("no log line refusing the APPEND over the value limit")
    c.close()
    try:
        r = Client(port)
        size = len(r.get(b"/append"))
        r.close()
        if size > 8 * MiB:
            problems.append("key holds %d MiB, over the 8 MiB value limit" % (size >> 20))
    except OSError as e:
        problems.append("GET after the flood failed: %s" % e)
    return problems


def attack_watchers(port, srv):
    """4 legacy watchers that never read, on an 8 MiB key, then ten 1-byte APPENDs in one
    packet (each notification carries the old and the new value)."""
    setter = Client(port, timeout=20)
    setter.set(b"/w", b"w" * (8 * MiB - 64))
    setter.ping()
    watchers = []
    for _ in range(4):
        w = Client(port, timeout=10, rcvbuf=4096, legacy=True)
        w.sock.sendall(bytes([LEGACY_WATCH_KEY]) + field(b"/w"))
        if w.recv_exact(1) != b"\x03":
            raise RuntimeError("WATCH_KEY not registered")
        watchers.append(w)
    packet = b"".join(bytes([APPEND]) + field(b"/w") + field(b"+") for _ in range(10))
    setter.sock.sendall(packet)
    problems = []
    try:
        setter.ping()
    except OSError as e:
        problems.append("the appender was not served: %s" % e)
    if not srv.wait_log(["peer reads nothing"], count=4, timeout=5) and \
            not srv.wait_log(["total memory budget"], count=4, timeout=0.1):
        problems.append("the 4 non-reading watchers were not all dropped")
    pause(1.0, "the watchers stay unread: a server that buffers for them shows it in its RSS")
    for w in watchers:
        w.close()
    setter.close()
    return problems


def attack_key_flood(port, srv):
    """300k keys through one pipelined connection."""
    c = Client(port, timeout=20)
    problems = []
    for start in range(0, 300000, 10000):
        chunk = b"".join(bytes([SET]) + field(b"/k%06d" % i) + field(b"0123456789abcdef")
                         for i in range(start, start + 10000))
        if not send_quietly(c.sock, chunk):
            break
    c.close()
    if not srv.wait_log(["key-count limit"], timeout=5):
        problems.append("no log line refusing the keys over --max-keys")
    return problems


def attack_byte_flood(port, srv):
    """64 KiB values under fresh keys until 256 MiB were sent."""
    c = Client(port, timeout=20)
    problems = []
    value = b"b" * (64 * 1024)
    for start in range(0, 4096, 64):
        chunk = b"".join(bytes([SET]) + field(b"/big%05d" % i) + field(value)
                         for i in range(start, start + 64))
        if not send_quietly(c.sock, chunk):
            break
    c.close()
    if not srv.wait_log(["would exceed the total memory budget"], timeout=5):
        problems.append("no log line refusing the values over --max-total-bytes")
    return problems


def attack_slowloris(port, srv, interval=0.3, limit_s=8.0):
    """A SET sent one byte every `interval` seconds: closed at the request deadline counted
    from its first byte."""
    c = Client(port, timeout=5)
    request = bytes([SET]) + field(b"k" * 1000)
    t0 = time.monotonic()
    closed = False
    i = 0
    while time.monotonic() - t0 < limit_s and i < len(request):
        if not send_quietly(c.sock, request[i:i + 1]):
            closed = True
            break
        i += 1
        if c.closed_within(interval):
            closed = True
            break
    took = time.monotonic() - t0
    c.close()
    problems = []
    if not closed:
        problems.append("slowloris still open after %.1f s (%d bytes)" % (took, i))
    elif not srv.wait_log(["stalled mid-request", "after its first byte"], timeout=2):
        problems.append("no log line for the slowloris request")
    return problems


def attack_half_multiset(port, srv, hold_s=8.0):
    """Eight MULTI_SETs of 64 MiB (8 keys x 8 MiB), each stopped after 32 MiB."""
    # count, then key and value per key; the 4th value is cut short
    half = bytes([MULTI_SET]) + b64(8) + \
        b"".join(field(b"/ms%d" % i) + field(b"m" * (8 * MiB)) for i in range(3)) + \
        field(b"/ms3") + b64(8 * MiB) + b"m" * (8 * MiB - 64)
    conns = [Client(port, timeout=20) for _ in range(8)]
    closed = [False] * 8

    def run(i):
        if not send_quietly(conns[i].sock, half):
            closed[i] = True
            return
        closed[i] = conns[i].closed_within(max(0.1, hold_s - (time.monotonic() - t0)))

    t0 = time.monotonic()
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=hold_s + 20)
    for c in conns:
        c.close()
    problems = []
    if not all(closed):
        problems.append("%d of 8 half-sent MULTI_SETs still open after %.0f s"
                        % (closed.count(False), hold_s))
    return problems


def attack_wait_flood(port, srv, clients=20, keys=100000, key_bytes=400):
    """20 WAITs on 100,000 absent keys of 400 bytes each (40 MB per request, 1.9 GB of
    registrations): each closed, at --max-pending-keys or the total budget."""
    payload = bytes([WAIT]) + b64(keys) + b"".join(
        field(b"/wait/%06d/" % i + b"k" * (key_bytes - 13)) for i in range(keys))
    conns = [Client(port, timeout=20) for _ in range(clients)]
    closed = [False] * clients

    def run(i):
        closed[i] = not send_quietly(conns[i].sock, payload) or conns[i].closed_within(15)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=40)
    for c in conns:
        c.close()
    problems = []
    if not all(closed):
        problems.append("%d of %d WAIT floods still open" % (closed.count(False), clients))
    if not srv.wait_log(["WAIT"], count=1, timeout=2) and \
            not srv.wait_log(["buffering"], count=1, timeout=0.1):
        problems.append("no log line closing a WAIT flood")
    return problems


def attack_watch_flood(port, srv, watches=100000, key_bytes=8000):
    """100,000 WATCH_KEY registrations with 8,000-byte keys on one legacy connection (1.6 GB
    of registrations): closed at --max-pending-keys or the total budget."""
    c = Client(port, timeout=20, legacy=True)
    closed = False
    for start in range(0, watches, 1000):
        chunk = b"".join(bytes([LEGACY_WATCH_KEY]) + field(b"/watch/%06d/" % i +
                                                          b"k" * (key_bytes - 14))
                         for i in range(start, start + 1000))
        if not send_quietly(c.sock, chunk):
            closed = True
            break
    closed = closed or c.closed_within(10)
    c.close()
    problems = []
    if not closed:
        problems.append("the watch flood's connection is still open")
    if not srv.wait_log(["WATCH_KEY"], timeout=2):
        problems.append("no log line closing the watch flood naming WATCH_KEY")
    return problems


def attack_big_wait(port, srv, keys=128 * 1024):
    """One WAIT on 128 Ki keys (3 MB, torch's most per request) registered in full
    (--max-pending-keys 131072), then a MULTI_SET of them all: the wait is answered, and no turn
    of the loop is long (the server logs its longest as it exits)."""
    names = [b"/big/%07d/xxxxxx" % i for i in range(keys)]
    w = Client(port, timeout=20)
    w.sock.sendall(bytes([WAIT]) + b64(keys) + b"".join(field(k) for k in names))
    s = Client(port, timeout=20)
    s.sock.sendall(bytes([MULTI_SET]) + b64(keys) +
                   b"".join(field(k) + field(b"v") for k in names))
    problems = []
    try:
        if w.recv_exact(1) != b"\x00":
            problems.append("the big WAIT got another answer than STOP_WAITING")
        s.ping()
    except OSError as e:
        problems.append("the big WAIT was not answered: %s" % e)
    w.close()
    s.close()
    return problems


def attack_idle_flood(port, srv, conns=None):
    """As many idle connections (connect, send nothing) as --max-connections allows: a new
    client is still served (the oldest idle one is shed), and the rest are closed at
    --idle-timeout."""
    flags = srv.flags
    n = int(flags[flags.index("--max-connections") + 1]) if "--max-connections" in flags \
        else 16384
    timeout = float(flags[flags.index("--idle-timeout") + 1]) if "--idle-timeout" in flags else 30
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 256), hard))
    idle = []
    problems = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(("127.0.0.1", port))
            idle.append(s)
        try:
            late = Client(port, timeout=10)
            late.set(b"/late", b"v")
            if late.get(b"/late") != b"v":
                problems.append("a client after the idle flood got another value")
            late.close()
        except OSError as e:
            problems.append("a client after the idle flood was not served: %s" % e)
        if not srv.wait_log(["shed to make room"], timeout=5):
            problems.append("no log line shedding an idle connection")
        # Every idle one is closed by its deadline (bounded: the deadline + 10 s).
        open_ = list(idle)

        def all_closed():
            still = []
            for s in open_:
                s.settimeout(0)
                try:
                    if s.recv(1) == b"":
                        continue
                except BlockingIOError:
                    still.append(s)
                    continue
                except OSError:
                    continue
                still.append(s)
            open_[:] = still
            return not open_
        poll_until(all_closed, timeout + 10, 0.2)
        # The bystander (a connection past its first request, accepted just before the flood)
        # vouches for one idle socket from its host, as torch 1.13's main socket does for its
        # WATCH_KEY socket; no more may stay.
        if len(open_) > 1:
            problems.append("%d of %d idle connections still open %.0f s after --idle-timeout"
                            % (len(open_), n, 10))
    finally:
        for s in idle:
            s.close()
    return problems


ATTACKS = [
    ("append_flood", attack_append_flood),
    ("watchers", attack_watchers),
    ("key_flood", attack_key_flood),
    ("byte_flood", attack_byte_flood),
    ("slowloris", attack_slowloris),
    ("half_multiset", attack_half_multiset),
    ("wait_flood", attack_wait_flood),
    ("watch_flood", attack_watch_flood),
    ("big_wait", attack_big_wait),
    ("idle_flood", attack_idle_flood),
]

# Flags an attack needs besides the suite's budget: the big WAIT registered in full; the idle
# flood at a connection limit a test can reach quickly.
ATTACK_FLAGS = {
    "big_wait": ["--max-pending-keys", "131072", "--max-keys", "262144"],
    "idle_flood": ["--max-connections", "1024", "--idle-timeout", "2"],
}


class Result:
    pass


def percentile(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def run_attack(binary, flags, name, attack, bystander="raw", observe_s=0.0):
    """Runs one attack against a fresh server; returns a Result (problems, RSS, latencies).
    The bystander keeps going until at least `observe_s` after the attack began."""
    res = Result()
    extra = ATTACK_FLAGS.get(name, [])
    base = list(flags)
    for flag in extra[::2]:  # the attack's value replaces the suite's
        if flag in base:
            i = base.index(flag)
            del base[i:i + 2]
    flags = base + extra
    srv = Server(binary, flags)
    try:
        by = RawBystander(srv.port) if bystander == "raw" else TorchBystander(srv.port)
        by.start()  # returns once the bystander is served
        t0 = time.monotonic()
        try:
            res.problems = attack(srv.port, srv)
        except Exception as e:  # an attack that could not run is a failure, not a pass
            res.problems = ["attack raised %s: %s" % (type(e).__name__, e)]
        res.wall_s = time.monotonic() - t0
        pause(max(0.3, observe_s - res.wall_s),
              "the bystander's window after the attack: its latencies and errors then count too")
        by.stop()
        res.served_after = False
        try:
            c = Client(srv.port, timeout=10)
            # the bystander's key: an attack may have filled the key-count limit on purpose
            c.set(b"/bystander", b"after")
            res.served_after = c.get(b"/bystander") == b"after"
            c.close()
        except OSError:
            pass
        res.peak_rss = max(srv.peak_rss, srv.rss())
        res.bystander_ops = len(by.lat)
        res.bystander_errors = by.errors
        res.p50_ms = percentile(by.lat, 0.50)
        res.p99_ms = percentile(by.lat, 0.99)
        res.max_ms = max(by.lat) if by.lat else float("nan")
        res.log = srv.log()
    finally:
        srv.stop()
    res.longest_turn_ms = srv.longest_turn_ms()
    res.turn_cpu_ms = srv.turn_cpu_ms()
    return res
