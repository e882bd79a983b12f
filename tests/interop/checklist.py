"""What the interop scripts share: one line per check ("ok" / "FAIL" / "skip"), a watchdog that
kills every process a script started and exits 1 past its bound, and the closing
"N passed, M failed" with the exit code. The shared waits (tests/waiting.py) are re-exported
from here: `from checklist import wait_until`."""

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
from waiting import WaitTimeout, pause, poll_until, wait_until  # noqa: E402,F401

results = []   # one bool per check
children = []  # processes the watchdog (and the end) must not leave behind


def check(name, ok, detail=""):
    results.append(bool(ok))
    line = ("ok    " if ok else "FAIL  ") + name
    if detail and not ok:
        line += ": " + str(detail)
    print(line, flush=True)
    return ok


def skip(name, why):
    print("skip  %s: %s" % (name, why), flush=True)


def step(name, fn):
    """Runs fn(); a falsy result (or (False, detail)) or an exception is a failure."""
    try:
        out = fn()
        if isinstance(out, tuple):
            return check(name, out[0], out[1])
        return check(name, out)
    except Exception as e:  # noqa: BLE001 - any failure is reported, then the script goes on
        return check(name, False, "%s: %s" % (type(e).__name__, e))


def kill_children():
    for p in children:
        try:
            if p.poll() is None:
                p.kill()
        except Exception:  # noqa: BLE001 - already gone
            pass


def start_watchdog(seconds):
    """Past `seconds`, kill every child and exit 1: no interop script can hang CI."""
    def fire():
        print("FAIL  watchdog: the test ran past %d s; killing everything" % seconds, flush=True)
        kill_children()
        os._exit(1)

    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()


def summary(rc=0):
    """Prints "N passed, M failed"; returns the exit code: 1 on a failed check, a non-zero `rc`,
    or no check at all; else 0."""
    passed, failed = results.count(True), results.count(False)
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed or rc or not results else 0
