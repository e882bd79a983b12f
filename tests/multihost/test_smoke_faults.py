#!/usr/bin/python3
"""Multi-host fault scenarios for `ncclsmoke run`: 4 hosts on network namespaces, one rank each.

For every scenario: the verdict codes, the ranks/hosts they name, and the time it took; every
verdict file is validated against results/verdict/verdict.schema.json. The namespace scenarios are skipped
(with the reason) only when we are not root or `ip netns add` fails.

    /usr/bin/python3 tests/multihost/test_smoke_faults.py --binary build/ncclsmoke [-k NAME] [--keep]

Exit status: 0 all passed, 1 something failed, 77 nothing failed but something was skipped.
The last line of the output is "N passed, M failed".
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import netns  # noqa: E402
import suite  # noqa: E402
from suite import codes, file_has, load_verdict, poll_until, wait_until  # noqa: E402

BINARY = None
EXTRA_RUN_ARGS = []  # ["--transports", "none"] when the binary has transports: these scenarios
                     # are about rendezvous + mesh
GOALS = []  # (scenario, what, measured s, goal s): the bound "phase deadline + 2 s", printed


def goal(scenario, what, measured, bound):
    GOALS.append((scenario, what, measured, bound))

MASTER_PORT = 29500  # inside private namespaces: nothing else can hold it
# Short deadlines so every fault ends in seconds (torch's defaults wait 5-30 minutes).
CONNECT_S, JOIN_S, MESH_S, PAIR_S, RUN_S = 3, 4, 4, 2, 20
SLACK_S = 2.0  # the bound: a fault is classified within its phase deadline + 2 s





def findings(doc, code):
    return [f for f in doc["findings"] if f["code"] == code]


class Outcome:
    """What one scenario produced: per-rank exit code, seconds from its start to its exit, the
    local verdicts, and rank 0's global one."""

    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.rc = {}
        self.elapsed = {}
        self.local = {}
        self.global_ = None

    def collect(self):
        for path in sorted(glob.glob(os.path.join(self.out_dir, "*", "verdict.rank*.json"))):
            rank = int(os.path.basename(path)[len("verdict.rank"):-len(".json")])
            self.local[rank] = load_verdict(path)
        g = glob.glob(os.path.join(self.out_dir, "*", "verdict.json"))
        if len(g) > 1:
            raise AssertionError(f"more than one global verdict: {g}")
        if g:
            self.global_ = load_verdict(g[0])

    def describe(self):
        lines = [f"  rank {r}: rc={self.rc.get(r)} {self.elapsed.get(r, 0):.2f}s "
                 f"{self.local.get(r, {}).get('verdict')} {codes(self.local[r]) if r in self.local else '-'}"
                 for r in sorted(self.rc)]
        if self.global_:
            lines.append(f"  global: {self.global_['verdict']} {codes(self.global_)}")
        return "\n".join(lines)


class Scenario:
    """Starts ranks inside the test hosts and waits for them, bounded in time."""

    def __init__(self, case, bed, name):
        self.case, self.bed, self.name = case, bed, name
        self.dir = os.path.join(case.tmp, name)
        os.makedirs(self.dir, exist_ok=True)
        self.procs = {}

    def master(self):
        return self.bed.hosts[0].addr

    def rank_args(self, rank, world_size, master_addr=None, extra=()):
        out = os.path.join(self.dir, f"rank{rank}")
        os.makedirs(out, exist_ok=True)
        return [BINARY, "run", "--launcher", "flags", "--rank", str(rank), "--world-size",
                str(world_size), "--master-addr", master_addr or self.master(), "--master-port",
                str(MASTER_PORT), "--connect-timeout", str(CONNECT_S), "--join-timeout",
                str(JOIN_S), "--mesh-timeout", str(MESH_S), "--pair-timeout", str(PAIR_S),
                "--timeout", str(RUN_S), "--out-dir", out] + EXTRA_RUN_ARGS + list(extra)

    def start(self, ranks, world_size, master_addr=None, extra=()):
        """ranks: the ranks to start; rank r runs on host r."""
        for r in ranks:
            h = self.bed.hosts[r]
            self.procs[r] = h.start(self.rank_args(r, world_size, master_addr, extra),
                                    os.path.join(self.dir, f"rank{r}"))

    def wait(self, limit_s=RUN_S + 8):
        """Waits for every started rank (polling, bounded); returns an Outcome."""
        o = Outcome(self.dir)
        pending = dict(self.procs)

        def all_ended():
            for r, p in list(pending.items()):
                rc = p.poll()
                if rc is not None:
                    o.rc[r] = rc
                    o.elapsed[r] = time.monotonic() - p.started_at
                    del pending[r]
            return not pending
        poll_until(all_ended, limit_s)
        for r, p in pending.items():
            self.bed.kill9(p)
            p.wait(timeout=5)
            o.rc[r] = "hung"
        o.collect()
        print(f"[{self.name}]\n{o.describe()}", flush=True)
        if pending:
            self.case.fail(f"{self.name}: ranks {sorted(pending)} still running after {limit_s}s "
                           f"(logs in {self.dir})")
        return o


class MultiHostFaults(suite.NamespaceCase):
    """4 hosts on network namespaces, one rank each."""
    dir_prefix = "ncclsmoke-mh"

    def bed(self, tag, hosts=4, extra_hosts=None):
        return netns.Testbed(hosts, self.tmp, tag=tag, extra_hosts=extra_hosts)

    def assert_rank_failed_with(self, o, rank, code, bound_s):
        self.assertEqual(o.rc[rank], 1, f"rank {rank}\n{o.describe()}")
        doc = o.local[rank]
        self.assertEqual(doc["scope"], "local")
        self.assertEqual(doc["verdict"], "fail")
        got = findings(doc, code)
        self.assertTrue(got, f"rank {rank}: no {code} in {codes(doc)}")
        self.assertIn(rank, got[0]["ranks"])
        self.assertEqual(got[0]["hosts"][0], f"host{rank}", got[0])
        goal(self._testMethodName, f"rank {rank} {code}", o.elapsed[rank], bound_s)
        self.assertLessEqual(o.elapsed[rank], bound_s,
                             f"rank {rank} took {o.elapsed[rank]:.2f}s (bound {bound_s}s)")
        return got[0]

    def assert_rank0_missing(self, o, missing):
        self.assertEqual(o.rc[0], 1, o.describe())
        self.assertIsNotNone(o.global_, "rank 0 wrote no global verdict")
        g = o.global_
        self.assertEqual(g["scope"], "global")
        self.assertEqual(g["verdict"], "fail")
        got = findings(g, "RANKS_MISSING")
        self.assertTrue(got, f"no RANKS_MISSING in {codes(g)}")
        self.assertEqual(sorted(got[0]["ranks"]), missing)
        status = {r["rank"]: r["status"] for r in g["ranks"]}
        for r in missing:
            self.assertEqual(status.get(r), "missing", g["ranks"])
        # Rank 0 gives up on them at its join deadline, then reports.
        goal(self._testMethodName, "rank 0 RANKS_MISSING", o.elapsed[0], JOIN_S + SLACK_S)
        self.assertLessEqual(o.elapsed[0], JOIN_S + SLACK_S, o.describe())

    # -- scenarios ---------------------------------------------------------------------------

    def test_01_healthy(self):
        with self.bed("ok") as bed:
            s = Scenario(self, bed, "healthy")
            s.start(range(4), 4)
            o = s.wait()
        for r in range(4):
            self.assertEqual(o.rc[r], 0, f"rank {r}\n{o.describe()}")
            self.assertEqual(o.local[r]["verdict"], "pass")
            self.assertEqual(o.local[r]["scope"], "local")
        g = o.global_
        self.assertIsNotNone(g)
        self.assertEqual((g["verdict"], g["exit_code"], g["scope"]), ("pass", 0, "global"))
        self.assertEqual(g["findings"], [])
        self.assertEqual(g["world"]["size"], 4)
        self.assertEqual(sorted((r["rank"], r["status"]) for r in g["ranks"]),
                         [(r, "joined") for r in range(4)])
        self.assertEqual({r["rank"]: r.get("host") for r in g["ranks"]},
                         {r: f"host{r}" for r in range(4)})
        # Every rank advertised its namespace address (rank 0: the source of its route to itself).
        self.assertEqual({r["rank"]: r.get("local_address") for r in g["ranks"]},
                         {h.index: h.addr for h in bed.hosts})
        phases = {p["name"]: p["status"] for p in g["phases"]}
        for name in ("world", "rendezvous", "mesh"):
            self.assertEqual(phases.get(name), "pass", g["phases"])

    def test_02_master_port_dropped(self):
        with self.bed("drop") as bed:
            bed.hosts[0].drop_port(MASTER_PORT)
            s = Scenario(self, bed, "master_dropped")
            s.start(range(4), 4)
            o = s.wait()
        for r in (1, 2, 3):
            f = self.assert_rank_failed_with(o, r, "RENDEZVOUS_TIMEOUT", CONNECT_S + SLACK_S)
            self.assertEqual(f["evidence"]["error_class"], "timed_out", f)
            self.assertIn(bed.hosts[0].addr, f["hosts"])
        self.assert_rank0_missing(o, [1, 2, 3])

    def test_03_master_port_rejected(self):
        with self.bed("rej") as bed:
            bed.hosts[0].reject_port(MASTER_PORT)
            s = Scenario(self, bed, "master_rejected")
            s.start(range(4), 4)
            o = s.wait()
        for r in (1, 2, 3):
            self.assert_rank_failed_with(o, r, "RENDEZVOUS_REFUSED", CONNECT_S + SLACK_S)
        self.assert_rank0_missing(o, [1, 2, 3])

    def test_04_master_name_unresolvable(self):
        # The hosts files name host0..host3 but not the master name; resolv.conf points at
        # 127.0.0.1 inside each namespace, where nothing answers: no query leaves.
        name = "master.smoke.invalid"
        with self.bed("dns") as bed:
            s = Scenario(self, bed, "master_dns")
            s.start(range(4), 4, master_addr=name)
            o = s.wait()
        for r in (1, 2, 3):
            f = self.assert_rank_failed_with(o, r, "RENDEZVOUS_DNS", CONNECT_S + SLACK_S)
            self.assertIn(name, f["message"])
        self.assert_rank0_missing(o, [1, 2, 3])

    def test_05_rank_never_started(self):
        with self.bed("miss") as bed:
            s = Scenario(self, bed, "rank3_missing")
            s.start([0, 1, 2], 4)
            o = s.wait()
        self.assert_rank0_missing(o, [3])
        for r in (1, 2):
            self.assertEqual(o.rc[r], 1, o.describe())
            got = findings(o.local[r], "RANKS_MISSING")
            self.assertTrue(got, f"rank {r}: {codes(o.local[r])}")
            self.assertEqual(got[0]["ranks"], [3])
        # The three that came still probed each other.
        g = o.global_
        self.assertEqual(sorted(r["rank"] for r in g["ranks"] if r["status"] == "joined"), [0, 1, 2])
        self.assertNotIn("MESH_BLOCKED", codes(g))

    def _assert_mesh_blocked_on_host3(self, o):
        g = o.global_
        self.assertIsNotNone(g, o.describe())
        self.assertEqual(o.rc[0], 1, o.describe())
        self.assertEqual(g["verdict"], "fail")
        got = findings(g, "MESH_BLOCKED")
        self.assertEqual(len(got), 1, codes(g))
        f = got[0]
        # Every rank's local view (after rank 0's mesh summary) names host3 first ...
        for r in range(4):
            lf = findings(o.local[r], "MESH_BLOCKED")
            self.assertTrue(lf, f"rank {r}: {codes(o.local[r])}")
            self.assertEqual(lf[0]["hosts"][0], "host3", f"rank {r}'s local view: {lf[0]}")
        # ... and so must the merged one: hosts[0] is the suspect host.
        self.assertEqual(f["evidence"]["suspect_rank"], 3, f)
        self.assertEqual(f["hosts"][0], "host3", f"global view (merge kept hosts[0]?): {f}")
        pairs = f["evidence"]["pairs"]
        self.assertEqual(sorted((p["from"], p["to"]) for p in pairs), [(0, 3), (1, 3), (2, 3)], f)
        for p in pairs:
            self.assertEqual(p["error_class"], "timed_out", p)
            self.assertEqual(p["to_host"], "host3")
        # The master port stayed open: every rank joined; no rendezvous finding.
        self.assertEqual(sorted(r["rank"] for r in g["ranks"] if r["status"] == "joined"),
                         [0, 1, 2, 3])
        self.assertFalse([c for c in codes(g) if c.startswith("RENDEZVOUS") or c == "RANKS_MISSING"],
                         codes(g))
        # Classified within the mesh deadline (+ slack), after a sub-second rendezvous.
        goal(self._testMethodName, "rank 0 MESH_BLOCKED", o.elapsed[0], MESH_S + SLACK_S + 1)
        self.assertLessEqual(o.elapsed[0], MESH_S + SLACK_S + 1, o.describe())

    def test_06_mesh_port_range_dropped(self):
        lo, hi = 31000, 31009
        with self.bed("mrng") as bed:
            bed.hosts[3].drop_port_range(lo, hi)
            s = Scenario(self, bed, "mesh_range_dropped")
            s.start(range(4), 4, extra=["--mesh-port-range", f"{lo}-{hi}"])
            o = s.wait()
        self._assert_mesh_blocked_on_host3(o)

    def test_07_mesh_all_but_master_dropped(self):
        with self.bed("mall") as bed:
            bed.hosts[3].drop_all_new_tcp_except(MASTER_PORT)
            s = Scenario(self, bed, "mesh_all_dropped")
            s.start(range(4), 4)
            o = s.wait()
        self._assert_mesh_blocked_on_host3(o)

    def test_08_rank_killed_after_join(self):
        hold = 3.0
        with self.bed("kill") as bed:
            s = Scenario(self, bed, "rank2_killed")
            s.start(range(4), 4, extra=["--hold-after-join", str(hold)])
            # Joined = rank 0 logged the end of its rendezvous ("rendezvous: pass ...: 4/4 ranks
            # joined"): the barrier is complete, and the hold keeps every rank there for `hold`
            # s more. Bounded: 10 s.
            wait_until(lambda: file_has(os.path.join(s.dir, "rank0.err"), "rendezvous: pass"), 10,
                       "rank 0's rendezvous to pass (every rank joined)", 0.05)
            print(f"  killing rank 2 {time.monotonic() - s.procs[2].started_at:.2f}s after its start")
            victim = s.procs[2]
            self.assertIsNone(victim.poll(), "rank 2 ended before it could be killed")
            bed.kill9(victim)
            killed_at = time.monotonic()
            o = s.wait()
        self.assertEqual(o.rc[2], -9)
        self.assertNotIn(2, o.local, "rank 2 was killed: it cannot have written a verdict")
        g = o.global_
        self.assertIsNotNone(g, o.describe())
        self.assertEqual(o.rc[0], 1)
        self.assertEqual(g["verdict"], "fail")
        lost = findings(g, "PEER_LOST")
        self.assertTrue(lost, codes(g))
        self.assertEqual(lost[0]["ranks"], [2], lost[0])
        self.assertEqual(lost[0]["hosts"], ["host2"], lost[0])
        status = {r["rank"]: r["status"] for r in g["ranks"]}
        self.assertEqual(status[2], "lost", g["ranks"])
        # Rank 2 is the only rank named by any finding.
        for f in g["findings"]:
            self.assertEqual(f["ranks"], [2], f)
        # The survivors' verdicts come within the mesh phase's deadline + 2 s (the phase starts
        # when the hold ends): neither the mesh summary nor rank 0's verdict gather may wait out
        # extra grace periods for a rank already known to be dead.
        for r in (0, 1, 3):
            after_kill = o.elapsed[r] - (killed_at - s.procs[r].started_at)
            print(f"  rank {r} finished {after_kill:.2f}s after the kill, {o.elapsed[r]:.2f}s "
                  f"after its start")
            goal(self._testMethodName, f"rank {r} PEER_LOST", o.elapsed[r], hold + MESH_S + SLACK_S)
            self.assertLessEqual(o.elapsed[r], hold + MESH_S + SLACK_S, o.describe())


class ConfigFaults(unittest.TestCase):
    """No namespaces needed: the run stops at world discovery, before any network use."""

    def test_09_master_port_service_link(self):
        for launcher in ("auto", "torchrun"):
            with self.subTest(launcher=launcher):
                t0 = time.monotonic()
                tmp = tempfile.mkdtemp(prefix="ncclsmoke-mh-cfg-")
                try:
                    env = {k: v for k, v in os.environ.items()
                           if not k.startswith(("MASTER_", "RANK", "WORLD_", "LOCAL_RANK",
                                                "OMPI_", "SLURM_", "JOB_COMPLETION", "NODE_NAME"))}
                    # MASTER_ADDR is loopback: if discovery wrongly went on, nothing would leave.
                    env.update(RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                               MASTER_PORT="tcp://10.0.0.7:29500")
                    argv = [BINARY, "run", "--launcher", launcher, "--connect-timeout", "2",
                            "--timeout", "10", "--out-dir", tmp] + EXTRA_RUN_ARGS
                    if os.geteuid() == 0 and shutil.which("unshare"):
                        argv = ["unshare", "--net"] + argv  # no network at all
                    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, timeout=30)
                    elapsed = time.monotonic() - t0
                    print(f"[service_link/{launcher}] rc={p.returncode} {elapsed:.2f}s")
                    self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
                    files = glob.glob(os.path.join(tmp, "verdict*.json"))
                    self.assertEqual(len(files), 1, files)
                    doc = load_verdict(files[0])
                    self.assertEqual((doc["verdict"], doc["exit_code"]), ("fail", 1))
                    got = findings(doc, "CONFIG_INVALID")
                    self.assertTrue(got, codes(doc))
                    f = got[0]
                    self.assertIn("enableServiceLinks", f["hint"])
                    self.assertEqual(f["evidence"]["variable"], "MASTER_PORT")
                    self.assertIn("tcp://10.0.0.7:29500", f["message"])
                    self.assertLess(elapsed, 5)
                    suite.TIMES.append((f"test_09_master_port_service_link[{launcher}]", elapsed))
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)


def transports_off(binary):
    """["--transports", "none"] if `ncclsmoke run` has a transport phase, else []."""
    p = subprocess.run([binary, "run", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=30)
    return ["--transports", "none"] if "--transports" in p.stdout else []


def main():
    def on_binary(path):
        global BINARY, EXTRA_RUN_ARGS
        BINARY = path
        EXTRA_RUN_ARGS = transports_off(BINARY)

    def report():
        if GOALS:
            print("goal check (issue: each fault classified within its phase deadline + 2 s):")
            for name, what, got, bound in GOALS:
                print(f"  {name:36s} {what:28s} {got:6.2f}s <= {bound:5.1f}s  "
                      f"{'ok' if got <= bound else 'MISSED'}")

    return suite.main([MultiHostFaults, ConfigFaults], __doc__, on_binary, report=report)

if __name__ == "__main__":
    sys.exit(main())
