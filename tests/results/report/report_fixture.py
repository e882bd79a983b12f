"""Shared set-up of the report's end-to-end tests: a history file made by `ncclsmoke history
import` from verdicts generated off a real launch (make_verdicts.py), a bounded runner, and the
one-line checks both scripts print."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_verdicts  # noqa: E402

failures = []  # what failed, for the script's closing line and exit code


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def run(argv, timeout=120, **kw):
    """Runs argv with a deadline; returns CompletedProcess (text). Raises on timeout."""
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, **kw)


def build_history(binary, workdir, n=80, span_days=10, hostile=True):
    """Imports a scenario of n runs ending an hour ago into workdir/history.db.
    Returns (db_path, expected) as make_verdicts.scenario() describes."""
    template = make_verdicts.real_template(binary, workdir)
    prepared = make_verdicts.prepare(template)
    docs, expected = make_verdicts.scenario(prepared, n, time.time() - 3600, span_days * 86400,
                                            hostile=hostile)
    validated = make_verdicts.validate(docs)
    if validated is not None:
        print(f"{validated} generated verdicts validate against verdict.schema.json")
    vdir = os.path.join(workdir, "verdicts")
    make_verdicts.write_all(docs, vdir)
    db = os.path.join(workdir, "history.db")
    p = run([binary, "history", "import", "--history", db, vdir], timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"history import exited {p.returncode}: {p.stdout}{p.stderr}")
    expected["n"] = n
    return db, expected
