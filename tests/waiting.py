"""Waiting in the Python tests: on a condition, never on a guessed time.

A fixed sleep guesses how long the other side needs: too short is flaky under load, too long is
slow. Every wait in the tests goes through here instead:

  wait_until(predicate, timeout, what)  polls until predicate() holds; raises WaitTimeout naming
                                        `what` when `timeout` s passed without it
  poll_until(predicate, timeout)        the same poll for a caller that reports a miss its own
                                        way (a problem list, a check line): returns the last value
  pause(seconds, why)                   lets time pass on purpose, where time passing is the point
                                        of the test (a peer that stays silent, a late writer, an
                                        observation window); never to wait for something to happen

The C++ tests have the same in tests/wait_until.h. Each test folder reaches this module through
its own helper (harness/loopback.py, multihost/suite.py, interop/checklist.py), or puts tests/ on
sys.path itself.
"""
import socket
import time

POLL_S = 0.02  # the poll interval: how late a wait may notice its condition, not a guess at it


class WaitTimeout(AssertionError):
    """wait_until's condition did not hold within its timeout; the message says what was awaited."""


def poll_until(predicate, timeout, interval=POLL_S):
    """predicate()'s first truthy value, checked at once and then every `interval` s; once
    `timeout` s have passed, the value of one last check (falsy: it never held)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def wait_until(predicate, timeout, what, interval=POLL_S):
    """predicate()'s first truthy value within `timeout` s (polled every `interval` s); raises
    WaitTimeout("... <what> ...") when it never held. `what` may be a function, called then, so
    that the message can say what was last seen."""
    value = poll_until(predicate, timeout, interval)
    if not value:
        raise WaitTimeout(f"waited {timeout:g} s for {what() if callable(what) else what}; "
                          f"it did not happen")
    return value


def pause(seconds, why):
    """Lets `seconds` pass where time passing is what the test is about; `why` says which fault
    or window it is (it is the reader's, and must be given)."""
    if not why:
        raise ValueError("pause() needs a reason: a wait for something to happen is wait_until's")
    time.sleep(seconds)


# ---- predicates that several tests poll ---------------------------------------------------------

def file_has(path, text):
    """True when the file at `path` exists and holds `text`."""
    try:
        with open(path, errors="replace") as f:
            return text in f.read()
    except OSError:
        return False


def port_accepts(port, host="127.0.0.1"):
    """True when a TCP connection to host:port is accepted (then closed at once)."""
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0
