"""What every namespace test suite shares: verdict loading with schema validation, the test-case
base that times each test and removes (or keeps) its directory, and a result class that counts
passes so each suite can end with "N passed, M failed"."""

import json
import os
import shutil
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
