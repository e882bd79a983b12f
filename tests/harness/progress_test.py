#!/usr/bin/python3
"""Progress, line by line, read from a run's stderr WHILE the run is still going (Kubernetes logs
are lines: what a buffer holds back is a hang nobody sees). On loopback:

1. join wait, rank 1 never starts: rank 0 (world size 2, --join-timeout 14) prints
   "rendezvous: 1/2 joined, waiting for rank 1 (never connected), N s of 14 s" before its join
   deadline; then a real torch 1.13 TCPStore client sets rank 1's arrival key (what rank 1's join
   does first, before its claim) and the next line says "(connected, rank not claimed yet)".
   Lines carry an ISO 8601 UTC time and the rank.
2. rank 1 starts late (after rank 0's first join-wait line), then a socket sweep: rank 0 prints the
   phase lines on stderr, and on stdout (read from its file while the run goes) the sweep's
   config line and nccl-tests' units row, then its first row, unprefixed, while rank 0 is still
   running; one row per size; then the stdout summary (host | OK, the phase table); rank 1 (not
   --verbose) prints nothing on stderr.
3. --quiet on both ranks of a passing run: nothing on stdout or stderr, exit 0.
4. --verbose (or NCCLSMOKE_LOG_LEVEL=info) on rank 1: it prints its own phase lines.
5. NCCLSMOKE_LOG_LEVEL=loud is a usage error (exit 2) naming the variable.

    /usr/bin/python3 tests/harness/progress_test.py --binary build/ncclsmoke
"""

import argparse
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from loopback import free_port, poll_until

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
FAILS = []
SKIPS = []  # checks that could not run: the test exits 77 (skipped) if nothing failed


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILS.append(what)
    return ok


class Rank:
    """One `ncclsmoke run` process whose stderr lines are read as they come (a reader thread puts
    (time, line) on a queue); stdout goes to a file."""

    def __init__(self, binary, rank, world, port, work, extra, env=None):
        self.out_path = os.path.join(work, f"rank{rank}.stdout")
        self.out = open(self.out_path, "w")
        args = [binary, "run", "--launcher", "flags", "--rank", str(rank), "--world-size",
                str(world), "--master-addr", "127.0.0.1", "--master-port", str(port),
                "--store-bind", "127.0.0.1", "--job-id", "progress", "--out-dir", work] + extra
        e = dict(os.environ)
        e.pop("NCCLSMOKE_LOG_LEVEL", None)
        e.update(env or {})
        self.proc = subprocess.Popen(args, stdout=self.out, stderr=subprocess.PIPE, text=True,
                                     bufsize=1, env=e, stdin=subprocess.DEVNULL)
        self.lines = []
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def next_line(self, deadline):
        """The next stderr line, or None at EOF / past `deadline` (time.monotonic())."""
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            line = self.q.get(timeout=left)
        except queue.Empty:
            return None
        if line is not None:
            self.lines.append(line)
        return line

    def wait_for(self, pattern, seconds):
        """Reads lines until one matches; returns (match, still_running_when_read)."""
        deadline = time.monotonic() + seconds
        while True:
            line = self.next_line(deadline)
            if line is None:
                return None, False
            m = re.search(pattern, line)
            if m:
                return m, self.proc.poll() is None

    def finish(self, seconds):
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        deadline = time.monotonic() + 5
        while self.next_line(deadline) is not None:
            pass
        self.out.close()
        return self.proc.returncode

    def stdout(self):
        return open(self.out_path).read()

    def wait_for_stdout(self, pattern, seconds):
        """Polls the stdout file until `pattern` matches (multiline); (match, still_running)."""
        seen = {}

        def matched():
            seen["running"] = self.proc.poll() is None
            return re.search(pattern, self.stdout(), re.M)
        m = poll_until(matched, seconds, 0.05)
        return m, seen["running"]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class TorchClient:
    """A real torch 1.13 TCPStore client (legacy dialect, '/'-prefixed keys like ours), imported
    before the run starts so that setting a key later takes only the connect."""

    CODE = ("import sys, datetime\n"
            "from torch.distributed import TCPStore\n"
            "print('ready', flush=True)\n"
            "port, key, value = sys.stdin.readline().split()\n"
            "s = TCPStore('127.0.0.1', int(port), is_master=False,\n"
            "             timeout=datetime.timedelta(seconds=10), wait_for_workers=False)\n"
            "s.set(key, value)\n"
            "print('done', flush=True)\n")

    def __init__(self):
        self.proc = subprocess.Popen(["/usr/bin/python3", "-c", self.CODE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.ready = self.proc.stdout.readline().strip() == "ready"

    def set(self, port, key, value):
        self.proc.stdin.write(f"{port} {key} {value}\n")
        self.proc.stdin.flush()
        ok = self.proc.stdout.readline().strip() == "done"
        self.close()
        return ok

    def why(self):
        return (self.proc.stderr.read() or "")[-300:]

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def case_never_joins(binary, work):
    torch = TorchClient()
    if not torch.ready:
        SKIPS.append("torch 1.13 TCPStore client not importable: " + torch.why())
    port = free_port()
    # 14 s: lines every 5 s, so one comes before and one after the arrival key, both in time.
    r0 = Rank(binary, 0, 2, port, work, ["--join-timeout", "14", "--timeout", "40",
                                         "--transports", "none"])
    try:
        m, running = r0.wait_for(r"rendezvous: (\d+)/(\d+) joined, waiting for rank (\d+) "
                                 r"\(never connected\), ([\d.]+) s of ([\d.]+) s", 12)
        check(m is not None and running,
              "rank 1 absent: a join-wait line ('never connected') while rank 0 still waits")
        if m:
            check(m.group(1, 2, 3) == ("1", "2", "1") and float(m.group(5)) == 14
                  and float(m.group(4)) < 14,
                  f"join-wait line says 1/2 joined, rank 1, under 14 s of 14 s: {m.group(0)!r}")
            line = r0.lines[-1]
            check(re.match(STAMP + r" rank 0 info  rendezvous: ", line) is not None,
                  f"the line has an ISO 8601 UTC time, the rank and the level: {line!r}")
        if torch.ready:
            check(torch.set(port, "ncclsmoke/progress/0/join/arrived/1", "someone"),
                  "a torch 1.13 client sets rank 1's arrival key in rank 0's store " + torch.why())
            m, running = r0.wait_for(r"waiting for rank 1 \(connected, rank not claimed yet\)", 10)
            check(m is not None and running,
                  "after rank 1's arrival key: the line says connected, rank not claimed "
                  f"(rank 0's lines: {r0.lines[-3:]})")
        rc = r0.finish(40)
        check(rc == 1, f"rank 0 exits 1 (RANKS_MISSING), got {rc}")
        check(any("rendezvous: fail in" in l for l in r0.lines),
              "rank 0 prints the rendezvous phase's end (fail) with its duration")
        check("RANKS_MISSING" in r0.stdout() or "missing" in r0.stdout().lower(),
              "stdout summary names the missing rank as before")
    finally:
        r0.kill()
        torch.close()


def case_late_rank_and_sweep(binary, work):
    port = free_port()
    sweep = ["--min-bytes", "1M", "--max-bytes", "32M", "--iters", "20", "--join-timeout", "30",
             "--timeout", "90", "--transports", "socket"]
    r0 = Rank(binary, 0, 2, port, work, sweep)
    r1 = None
    try:
        m, running = r0.wait_for(r"rendezvous: 1/2 joined, waiting for rank 1 \(never connected\)", 12)
        check(m is not None and running, "rank 1 late: rank 0 says whom it waits for, while waiting")
        r1 = Rank(binary, 1, 2, port, work, sweep)
        m, running = r0.wait_for(r"rendezvous: pass in [\d.]+ s", 20)
        check(m is not None, "rank 0 prints the rendezvous phase's end (pass) once rank 1 joined")
        m, running = r0.wait_for(r"transport:socket: start", 30)
        check(m is not None, "the transport's start line (stderr)")
        m, running = r0.wait_for_stdout(r"^# transport socket: all_reduce sweep: nranks 2 minBytes "
                                        r"1048576 maxBytes 33554432", 30)
        check(m is not None, "the sweep's config line (nccl-tests style, stdout)")
        m, _ = r0.wait_for_stdout(r"^#\s+\(B\)\s+\(elements\)\s+\(us\)\s+\(GB/s\)", 5)
        check(m is not None, "the sweep's units row (stdout)")
        m, running = r0.wait_for_stdout(r"^\s+1048576\s+262144\s+float32\s+sum\s+-1\s+[\d.]+"
                                        r"\s+[\d.]+\s+[\d.]+\s+0\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+0$",
                                        30)
        check(m is not None and running, "the first sweep row (1 MiB, #wrong 0 in both modes), "
                                         "unprefixed on stdout, arrives while the run still goes")
        rc0 = r0.finish(90)
        rc1 = r1.finish(30)
        check(rc0 == 0 and rc1 == 0, f"both ranks pass (exit {rc0}, {rc1})")
        live = r0.stdout().split("ncclsmoke pass (exit 0)")[0]
        rows = re.findall(r"(?m)^\s+\d+\s+\d+\s+float32\s+sum\s+-1\s", live)
        check(len(rows) == 6, f"one live row per size, 1M..32M: 6 rows (got {len(rows)})")
        check(not any("socket:" in l and "float32" in l for l in r0.lines),
              "no table row among the log lines on stderr")
        for phase in ("world: start", "rendezvous: start", "mesh: start", "mesh: pass in",
                      "transports: start", "transport:socket: start", "transport:socket: pass in",
                      "write: start",
                      "write: done in"):
            check(any(phase in l for l in r0.lines), f"rank 0 prints '{phase}'")
        bad = [l for l in r0.lines if not re.match(STAMP + r" rank 0 (info |warn |error|debug) ", l)]
        check(not bad, f"every rank 0 stderr line has time, rank and level (bad: {bad[:3]})")
        out = r0.stdout()
        check(" | OK" in out and "transport:socket" in out,
              "rank 0's stdout summary is as before (host | OK, the phase table)")
        check(r1.lines == [], f"rank 1 prints nothing on stderr by default (got {r1.lines[:3]})")
    finally:
        r0.kill()
        if r1:
            r1.kill()


def case_quiet(binary, work):
    port = free_port()
    args = ["--min-bytes", "1M", "--max-bytes", "1M", "--transports", "socket", "--timeout", "60",
            "--quiet"]
    ranks = [Rank(binary, r, 2, port, work, args) for r in range(2)]
    try:
        codes = [r.finish(60) for r in ranks]
        check(codes == [0, 0], f"--quiet run passes (exit {codes})")
        for i, r in enumerate(ranks):
            check(r.lines == [] and r.stdout() == "",
                  f"--quiet rank {i}: nothing on stderr or stdout (got {r.lines[:3]}, "
                  f"{r.stdout()[:100]!r})")
    finally:
        for r in ranks:
            r.kill()


def case_verbose(binary, work):
    port = free_port()
    args = ["--transports", "none", "--timeout", "60"]
    r0 = Rank(binary, 0, 2, port, work, args)
    r1 = Rank(binary, 1, 2, port, work, args + ["--verbose"])
    r2 = None
    try:
        codes = [r0.finish(60), r1.finish(60)]
        check(codes == [0, 0], f"2 ranks pass (exit {codes})")
        check(any(re.match(STAMP + r" rank 1 info  mesh: pass in", l) for l in r1.lines),
              f"--verbose: rank 1 prints its own phases (got {r1.lines[:3]})")
        port = free_port()
        env = {"NCCLSMOKE_LOG_LEVEL": "info"}
        r2 = [Rank(binary, r, 2, port, work, args, env) for r in range(2)]
        codes = [r.finish(60) for r in r2]
        check(codes == [0, 0] and any(" rank 1 info  rendezvous: pass in" in l for l in r2[1].lines),
              f"NCCLSMOKE_LOG_LEVEL=info: rank 1 prints its phases (exit {codes})")
    finally:
        for r in [r0, r1] + (r2 or []):
            r.kill()


def case_bad_level(binary, work):
    p = subprocess.run([binary, "run", "--launcher", "flags", "--rank", "0", "--world-size", "1",
                        "--transports", "none"], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, NCCLSMOKE_LOG_LEVEL="loud"), cwd=work)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(p.returncode == 2 and len(lines) == 1 and "NCCLSMOKE_LOG_LEVEL='loud'" in lines[0],
          f"NCCLSMOKE_LOG_LEVEL=loud: exit 2, one line naming it (exit {p.returncode}: {lines})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    cases = [case_never_joins, case_late_rank_and_sweep, case_quiet, case_verbose, case_bad_level]
    for case in cases:
        if a.only and a.only not in case.__name__:
            continue
        work = tempfile.mkdtemp(prefix="ncclsmoke-progress-")
        try:
            print(f"-- {case.__name__}", flush=True)
            case(a.binary, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    for why in SKIPS:
        print("SKIP " + why, flush=True)
    if FAILS:
        print(f"{len(FAILS)} failed", flush=True)
        return 1
    print("some checks skipped" if SKIPS else "all passed", flush=True)
    return 77 if SKIPS else 0


if __name__ == "__main__":
    sys.exit(main())
