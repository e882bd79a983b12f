"""What every namespace test suite shares: verdict loading with schema validation, the test-case
base that times each test and removes (or keeps) its directory, and a result class that counts
passes so each suite can end with "N passed, M failed"."""

import argparse
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
KEEP = False  # --keep: leave each test's directory behind
TIMES = []    # (test, seconds)

with open(os.path.join(ROOT, "results", "verdict.schema.json")) as f:
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
