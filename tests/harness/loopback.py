"""Shared by the harness's end-to-end tests on loopback. The shared waits (tests/waiting.py) are
re-exported from here: `from loopback import wait_until`."""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
from waiting import (WaitTimeout, file_has, pause, poll_until, port_accepts,  # noqa: E402,F401
                     wait_until)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago (for --master-port)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def proc_state(pid):
    """The one-letter state of /proc/PID/stat ('T' stopped), '' once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def start_store(binary, work):
    """A `ncclsmoke store serve` on 127.0.0.1 and a port of its choosing, its stderr in
    work/store.log: (process, port). It answers while a rank is stopped (unlike rank 0's store)."""
    import os
    import subprocess
    import time
    log = open(os.path.join(work, "store.log"), "w")
    p = subprocess.Popen([binary, "store", "serve", "--host", "127.0.0.1", "--port", "0"],
                         stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    line = b""
    stop_by = time.monotonic() + 15
    while b"\n" not in line and time.monotonic() < stop_by:
        ch = p.stdout.read(1)
        if not ch:
            break
        line += ch
    words = line.decode(errors="replace").split()
    if "port" not in words:
        p.kill()
        raise RuntimeError(f"store serve did not start: {line!r}")
    return p, int(words[words.index("port") + 1])


def run_ranks(cmd_of, env_of, out, world, limit=60, first=(), before_rest=None):
    """Starts `world` ranks, rank r as cmd_of(r) with the environment env_of(r), its output in
    out/rank<r>.out; waits for them all within `limit` seconds (killing any still running) and
    returns {rank: exit code, None for one killed}. With `first`, those ranks start alone and
    before_rest() runs (a bounded wait for something they did) before the others start."""
    import os
    import subprocess
    import time
    os.makedirs(out, exist_ok=True)

    def start(r):
        return subprocess.Popen(cmd_of(r), env=env_of(r),
                                stdout=open(os.path.join(out, f"rank{r}.out"), "w"),
                                stderr=subprocess.STDOUT)

    t0 = time.monotonic()
    procs = {r: start(r) for r in first}
    if before_rest:
        before_rest()
    procs.update({r: start(r) for r in range(world) if r not in procs})
    codes = {}
    for r in range(world):
        p = procs[r]
        try:
            codes[r] = p.wait(timeout=max(0.1, limit - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            codes[r] = None
    return codes


def wait_for_line(path, text, limit=15):
    """True once the file at `path` holds `text` (polled), False after `limit` s without it."""
    return poll_until(lambda: file_has(path, text), limit)


def load_json(path, fail):
    """The JSON document at `path`; a file that is missing or not JSON is reported through
    fail(message) and reads as a verdict with no findings."""
    import json
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
        return {"findings": []}


def finish(failures, work):
    """A test's end: 1 with the failures counted and the work directory kept, else 0 and the
    directory removed."""
    import shutil
    if failures:
        print(f"{len(failures)} failure(s); work dir kept: {work}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("OK")
    return 0
