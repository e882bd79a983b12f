"""What every namespace test suite shares: verdict loading with schema validation, the test-case
base that times each test and removes (or keeps) its directory, and a result class that counts
passes so each suite can end with "N passed, M failed". The shared waits (tests/waiting.py) are
re-exported from here: `from suite import wait_until`."""

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time
import unittest

import jsonschema  # python3-jsonschema

import netns

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from waiting import (WaitTimeout, file_has, pause, poll_until, port_accepts,  # noqa: E402,F401
                     wait_until)
KEEP = False  # --keep: leave each test's directory behind
TIMES = []    # (test, seconds)

with open(os.path.join(ROOT, "results", "verdict", "verdict.schema.json")) as f:
    VALIDATOR = jsonschema.Draft7Validator(json.load(f))


def load_verdict(path):
    with open(path) as f:
        doc = json.load(f)
    errors = sorted(VALIDATOR.iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        raise AssertionError(f"{path} does not validate against verdict.schema.json: " +
                             "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5]))
    return doc


def codes(doc):
    return [f["code"] for f in doc["findings"]]


class NamespaceCase(unittest.TestCase):
    """Skips the class when namespaces can't be made here; gives each test its own directory."""

    dir_prefix = "ncclsmoke-ns"

    @classmethod
    def setUpClass(cls):
        ok, why = netns.netns_usable()
        if not ok:
            raise unittest.SkipTest(f"namespace tests skipped: {why}")
        netns.sweep_stale()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix=f"{self.dir_prefix}-{self._testMethodName}-")
        self.t0 = time.monotonic()

    def tearDown(self):
        TIMES.append((self._testMethodName, time.monotonic() - self.t0))
        if KEEP:
            print(f"  (kept {self.tmp})")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


class CountingResult(unittest.TextTestResult):
    passed = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1


class Scratch:
    """What RunOnHosts needs of a test case, for a script outside unittest (the benches): a
    directory, and fail() that raises."""

    def __init__(self, tmp):
        self.tmp = tmp

    def fail(self, msg):
        raise RuntimeError(msg)


class RunOnHosts:
    """One `ncclsmoke run` per host of `bed` (rank r on host r, rank 0's host the master), waited
    for with a bound; then every verdict, validated: `local[rank]` and `global_` (rank 0's).
    `args` follow the world flags (deadlines, transports ...). A rank still running after
    timeout_s + 15 s is killed and fails the test."""

    def __init__(self, case, bed, name, binary, port, args, timeout_s):
        self.case, self.bed, self.name = case, bed, name
        self.n = len(bed.hosts)
        self.dir = os.path.join(case.tmp, name)
        self.rc, self.elapsed, self.local = {}, {}, {}
        self.global_ = None
        procs = {}
        t0 = time.monotonic()
        for h in bed.hosts:
            out = os.path.join(self.dir, f"rank{h.index}")
            os.makedirs(out, exist_ok=True)
            argv = [binary, "run", "--launcher", "flags", "--rank", str(h.index), "--world-size",
                    str(self.n), "--master-addr", bed.hosts[0].addr, "--master-port", str(port),
                    "--timeout", str(timeout_s), "--out-dir", out] + list(args)
            procs[h.index] = h.start(argv, out)
        pending = dict(procs)

        def all_ended():
            for r, p in list(pending.items()):
                rc = p.poll()
                if rc is not None:
                    self.rc[r] = rc
                    self.elapsed[r] = time.monotonic() - p.started_at
                    del pending[r]
            return not pending
        poll_until(all_ended, t0 + timeout_s + 15 - time.monotonic(), 0.05)
        for r, p in pending.items():
            bed.kill9(p)
            p.wait(timeout=5)
            self.rc[r] = "hung"
        self.wall_s = time.monotonic() - t0
        for path in sorted(glob.glob(os.path.join(self.dir, "rank*", "verdict.rank*.json"))):
            rank = int(os.path.basename(path)[len("verdict.rank"):-len(".json")])
            self.local[rank] = load_verdict(path)
        self.path = os.path.join(self.dir, "rank0", "verdict.json")  # the global verdict
        if os.path.exists(self.path):
            self.global_ = load_verdict(self.path)
        print(f"[{name}] {self.wall_s:.1f}s\n{self.describe()}", flush=True)
        if pending:
            case.fail(f"{name}: ranks {sorted(pending)} still running after {timeout_s + 15}s "
                      f"(logs in {self.dir})")

    def describe(self):
        lines = [f"  rank {r}: rc={self.rc.get(r)} {self.elapsed.get(r, 0):.2f}s "
                 f"{self.local.get(r, {}).get('verdict')} "
                 f"{codes(self.local[r]) if r in self.local else '-'}" for r in sorted(self.rc)]
        if self.global_:
            lines.append(f"  global: {self.global_['verdict']} {codes(self.global_)}")
        return "\n".join(lines)

    def logs(self, rank):
        """The tail of rank `rank`'s stdout and stderr."""
        text = ""
        for ext in (".out", ".err"):
            try:
                with open(os.path.join(self.dir, f"rank{rank}{ext}"), errors="replace") as f:
                    text += f.read()[-2000:]
            except OSError:
                pass
        return text


def main(cases, doc, on_binary, figures=(), report=None):
    """The command line every ncclsmoke namespace suite shares: --binary PATH, -k PATTERN, --keep.
    `on_binary(path)` stores the binary for the suite (and may probe it); `report()` prints
    suite-specific lines after the times. Returns the exit code: 1 on a failure, 77 when
    something was skipped (ctest's SKIP_RETURN_CODE), else 0."""
    global KEEP
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--binary", required=True, help="path of the ncclsmoke executable")
    ap.add_argument("-k", dest="pattern", action="append", help="only tests matching this")
    ap.add_argument("--keep", action="store_true", help="keep each test's directory")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    KEEP = args.keep
    netns.exit_on_sigterm()
    if not os.access(binary, os.X_OK):
        print(f"not executable: {binary}\n0 passed, 1 failed")
        return 1
    on_binary(binary)

    loader = unittest.TestLoader()
    if args.pattern:
        loader.testNamePatterns = [f"*{p}*" for p in args.pattern]
    tests = unittest.TestSuite()
    for case in cases:
        tests.addTests(loader.loadTestsFromTestCase(case))
    t0 = time.monotonic()
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2,
                                     resultclass=CountingResult).run(tests)
    total = time.monotonic() - t0

    if figures:
        print("\nfigures:")
        for line in figures:
            print(f"  {line}")
    width = max([len(name) for name, _ in TIMES] + [5])
    print("\ntest times:")
    for name, secs in TIMES:
        print(f"  {name:{width}s} {secs:6.2f}s")
    print(f"  {'total':{width}s} {total:6.2f}s")
    if report:
        report()
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    if skipped:
        print(f"{skipped} skipped: " + "; ".join(sorted({why for _, why in result.skipped})))
    print(f"{result.passed} passed, {failed} failed")
    if failed:
        return 1
    return 77 if skipped else 0
