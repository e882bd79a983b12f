#!/usr/bin/python3
"""The fault matrix (tests/harness/fault_matrix_test.py) across 4 network-namespace hosts, one rank
per host: SIGSTOP and SIGKILL of rank 0 (the store's host) and of rank 2, in rendezvous, mesh and
sweep. The same cases, checks and bounds as on loopback; here the ranks' sockets cross a bridge
between hosts, and each verdict names hosts by their own hostname.

Safety (../../shared/TESTHOSTS.md): every rank runs inside its host's namespace (netns.Testbed:
no default route, own hostname); the root namespace only starts, signals and reads files; the
testbed removes every namespace and process it made, also on failure.

    /usr/bin/python3 tests/multihost/test_fault_matrix_netns.py --binary build/ncclsmoke [-k mesh]

Exit status: 0 every case passed, 1 some case failed, 77 skipped (not root / no `ip netns`).
"""

import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
import fault_matrix_test as fm  # noqa: E402
import netns  # noqa: E402


class Namespaces:
    """Rank r on host r of a 4-host testbed; a fresh master port per case (no TIME_WAIT clash)."""
    name = "netns (4 hosts)"

    def __init__(self, bed):
        self.bed = bed
        self.next_port = 29500

    def master_addr(self):
        return self.bed.hosts[0].addr

    def port(self):
        self.next_port += 1
        return self.next_port

    def extra_args(self, rank):
        return []

    def log_text(self, work, rank):
        return fm.Loopback.log_text(self, work, rank)

    def spawn(self, rank, argv, env, log_prefix):
        # The testbed's start() execs down to the rank itself, so the PID is the rank's.
        return self.bed.start(self.bed.hosts[rank], argv, log_prefix, env)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("-k", default="")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    ok, why = netns.netns_usable()
    if not ok:
        print(f"fault_matrix (netns): skipped: {why}")
        return 77
    netns.exit_on_sigterm()
    netns.sweep_stale()
    cases = fm.select(fm.CASES, a.k)
    work = tempfile.mkdtemp(prefix="ncclsmoke-fmns-")
    try:
        with netns.Testbed(fm.WORLD, work, tag="fm") as bed:
            failed = fm.run_matrix(Namespaces(bed), binary, cases, keep=a.keep)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
