#!/usr/bin/python3
"""The socket and fabric(tcp) transports across 4 hosts on network namespaces, one rank each.

  healthy socket   global verdict pass, no wrong element, busbw > 0, every rank's identity names
                   eth0 and its host's address (never lo), link stats consistent between ranks
  fabric tcp       pass, no wrong element, every identity's provider contains "tcp"
  shaped host2     host2's egress limited by `tc tbf` (200 Mbit/s): the gate busbw falls below
                   half the healthy run's, and the socket transport's link stats point at host2:
                   its send_blocked_s (ready bytes its link to host3 would not take) is the largest
                   by far, and host3 (its next neighbour) waits long on receive. Every rank's
                   collective time is alike in a ring, so only where each rank waited can name
                   the slow host.

Every verdict is validated against results/verdict/verdict.schema.json. Hosts come from netns.py (see
../../shared/TESTHOSTS.md for the safety rules): every process runs inside a namespace, nothing
can leave, everything is removed at the end.

    /usr/bin/python3 tests/multihost/test_transport_netns.py --binary build/ncclsmoke [-k NAME] [--keep]

Exit status: 0 all passed, 1 something failed, 77 nothing failed but something was skipped.
The last line of the output is "N passed, M failed".
"""

import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import netns  # noqa: E402
import suite  # noqa: E402
from suite import codes  # noqa: E402

BINARY = None
FIGURES = []  # lines printed again at the end

N = 4
MASTER_PORT = 29500  # inside private namespaces: nothing else can hold it
CONTROL = ["--connect-timeout", "10", "--join-timeout", "20", "--mesh-timeout", "10",
           "--pair-timeout", "3"]
SHAPE = dict(rate="200mbit", burst="32kbit", latency="400ms")





class Run(suite.RunOnHosts):
    """suite.RunOnHosts with this suite's deadlines, and what the global verdict says."""

    def __init__(self, case, bed, name, port, transport_args, timeout_s):
        super().__init__(case, bed, name, BINARY, port, CONTROL + list(transport_args), timeout_s)

    # -- what the global verdict says -----------------------------------------------------------
    def world_rows(self, transport):
        return [r for r in self.global_["transports"]
                if r["transport"] == transport and "rank" not in r]

    def rank_rows(self, transport):
        return [r for r in self.global_["transports"]
                if r["transport"] == transport and "rank" in r]

    def gate_busbw(self, transport):
        rows = [r for r in self.world_rows(transport) if r.get("gate")]
        self.case.assertTrue(rows, f"{self.name}: no gate row for {transport}")
        return statistics.median(r["busbw_gbps"] for r in rows), rows[0]["bytes"]

    def identities(self, transport):
        ids = {i["rank"]: i["observed"] for i in self.global_.get("identities", [])
               if i["transport"] == transport}
        self.case.assertEqual(sorted(ids), list(range(N)),
                              f"{self.name}: identities of {transport} by rank")
        return ids


class TransportsAcrossHosts(suite.NamespaceCase):
    dir_prefix = "ncclsmoke-tn"

    def bed(self, tag):
        return netns.Testbed(N, self.tmp, tag=tag)

    def assert_passed(self, run, transport, allow_degraded=False):
        """Every rank exited cleanly, the global verdict is pass (or degraded, where a slow link
        may be judged) with no error finding, the transport phase passed, and every world and
        per-rank row has wrong == 0."""
        ok = ("pass", "degraded") if allow_degraded else ("pass",)
        g = run.global_
        self.assertIsNotNone(g, f"{run.name}: rank 0 wrote no global verdict\n{run.describe()}\n"
                             f"{run.logs(0)}")
        self.assertEqual(g["scope"], "global")
        self.assertIn(g["verdict"], ok, f"{run.name}: {codes(g)}\n{json.dumps(g['findings'])[:3000]}")
        self.assertFalse([f for f in g["findings"] if f["severity"] == "error"], g["findings"])
        for r in range(N):
            self.assertIn(run.rc[r], (0, 3) if allow_degraded else (0,),
                          f"rank {r}\n{run.describe()}\n{run.logs(r)}")
        phases = {p["name"]: p["status"] for p in g["phases"]}
        self.assertEqual(phases.get(f"transport:{transport}"), "pass", g["phases"])
        world = run.world_rows(transport)
        self.assertTrue(world, f"{run.name}: no world rows for {transport}")
        for row in world + run.rank_rows(transport):
            self.assertEqual(row["wrong"], 0, row)
        for row in world:
            self.assertGreater(row["busbw_gbps"], 0, row)
        self.assertEqual(sorted({r["rank"] for r in run.rank_rows(transport)}), list(range(N)))
        return g

    def link_stats(self, run):
        """{rank: link_stats} from the socket identities, checked for shape and consistency."""
        stats = {}
        for r, obs in run.identities("socket").items():
            ls = obs.get("link_stats")
            self.assertIsInstance(ls, dict, f"rank {r}: no link_stats in {obs}")
            tx, rx = ls["to_next"], ls["from_prev"]
            self.assertEqual((tx["rank"], tx["host"]), ((r + 1) % N, f"host{(r + 1) % N}"), ls)
            self.assertEqual((rx["rank"], rx["host"]), ((r - 1) % N, f"host{(r - 1) % N}"), ls)
            self.assertGreaterEqual(tx["send_blocked_s"], 0, ls)
            self.assertGreaterEqual(rx["recv_wait_s"], 0, ls)
            self.assertGreater(tx["bytes"], 0, ls)
            self.assertGreater(ls["collectives"], 0, ls)
            stats[r] = ls
        for r in range(N):
            # What rank r sent to its next neighbour is exactly what that one received from it.
            self.assertEqual(stats[r]["to_next"]["bytes"],
                             stats[(r + 1) % N]["from_prev"]["bytes"], stats)
            self.assertEqual(stats[r]["collectives"], stats[0]["collectives"], stats)
        return stats

    def print_stats(self, title, run, stats):
        gate_rows = {row["rank"]: row["time_us"] for row in run.rank_rows("socket")
                     if row["bytes"] == run.gate_busbw("socket")[1] and not row["in_place"]}
        lines = [f"{title}:",
                 f"  {'rank':>4} {'host':6} {'->next':>6} {'send_blocked_s':>14} {'sent_MiB':>9} "
                 f"{'<-prev':>6} {'recv_wait_s':>11} {'recv_MiB':>9} {'colls':>5} {'gate_time_us':>12}"]
        for r in range(N):
            ls = stats[r]
            tx, rx = ls["to_next"], ls["from_prev"]
            lines.append(f"  {r:>4} host{r:<2} {tx['rank']:>6} {tx['send_blocked_s']:>14.3f} "
                         f"{tx['bytes'] / 2**20:>9.1f} {rx['rank']:>6} {rx['recv_wait_s']:>11.3f} "
                         f"{rx['bytes'] / 2**20:>9.1f} {ls['collectives']:>5} "
                         f"{gate_rows.get(r, float('nan')):>12.0f}")
        print("\n".join(lines), flush=True)
        FIGURES.extend(lines)

    # -- tests -----------------------------------------------------------------------------------

    def test_01_socket_healthy(self):
        with self.bed("sok") as bed:
            run = Run(self, bed, "socket_healthy", MASTER_PORT,
                      ["--transports", "socket", "--min-bytes", "1M", "--max-bytes", "8M",
                       "--gate-bytes", "8M", "--iters", "3", "--op-timeout", "30",
                       "--transport-timeout", "90"], timeout_s=120)
            addrs = {h.index: h.addr for h in bed.hosts}
        self.assert_passed(run, "socket")
        busbw, gate = run.gate_busbw("socket")
        sizes = sorted({r["bytes"] for r in run.world_rows("socket")})
        self.assertEqual(sizes, [1 << 20, 2 << 20, 4 << 20, 8 << 20])
        for r, obs in run.identities("socket").items():
            self.assertEqual(obs["interface"], "eth0", obs)
            self.assertEqual(obs["address"], addrs[r], obs)
            self.assertFalse(obs["address"].startswith("127."), obs)
            self.assertTrue(obs["listen"].startswith(addrs[r] + ":"), obs)
            nxt, prv = obs["peers"]["send_to"], obs["peers"]["recv_from"]
            self.assertEqual(nxt["rank"], (r + 1) % N)
            self.assertTrue(nxt["address"].startswith(addrs[(r + 1) % N] + ":"), obs)
            self.assertTrue(all(a.startswith(addrs[r] + ":") for a in nxt["local"]), obs)
            self.assertTrue(all(a.startswith(addrs[(r - 1) % N] + ":") for a in prv["remote"]), obs)
        stats = self.link_stats(run)
        line = f"socket healthy: gate {gate >> 20} MiB busbw {busbw:.3f} GB/s ({run.wall_s:.1f}s)"
        print(line)
        FIGURES.append(line)
        self.print_stats("socket healthy, link stats", run, stats)

    def test_02_fabric_tcp(self):
        with self.bed("fab") as bed:
            run = Run(self, bed, "fabric_tcp", MASTER_PORT,
                      ["--transports", "fabric", "--fabric-provider", "tcp", "--min-bytes", "1M",
                       "--max-bytes", "8M", "--gate-bytes", "8M", "--iters", "3",
                       "--op-timeout", "30", "--transport-timeout", "90"], timeout_s=120)
            addrs = {h.index: h.addr for h in bed.hosts}
        if run.global_ and any(f["code"] == "TRANSPORT_UNAVAILABLE" and "built without" in f["message"]
                               for f in run.global_["findings"]):
            self.skipTest("this ncclsmoke was built without libfabric")
        self.assert_passed(run, "fabric")
        busbw, gate = run.gate_busbw("fabric")
        for r, obs in run.identities("fabric").items():
            self.assertIn("tcp", obs.get("provider", ""), obs)
            # The endpoint address libfabric gave this rank is its host's, never loopback.
            self.assertIn(addrs[r], json.dumps(obs.get("address", "")), obs)
            self.assertNotIn("127.0.0.1", json.dumps(obs.get("address", "")), obs)
        line = (f"fabric tcp: gate {gate >> 20} MiB busbw {busbw:.3f} GB/s, provider "
                f"{run.identities('fabric')[0].get('provider')} ({run.wall_s:.1f}s)")
        print(line)
        FIGURES.append(line)

    def test_03_socket_shaped_host2(self):
        shaped = 2
        # Small sizes: shaped, every byte crosses host2's 200 Mbit/s link 1.5 times per all-reduce
        # (2(n-1)/n), ~8 collectives per size: 1..4 MiB is ~85 MiB through it, ~4 s.
        args = ["--transports", "socket", "--min-bytes", "1M", "--max-bytes", "4M",
                "--gate-bytes", "4M", "--iters", "2", "--op-timeout", "60",
                "--transport-timeout", "150"]
        with self.bed("shp") as bed:
            healthy = Run(self, bed, "socket_before_shaping", MASTER_PORT, args, timeout_s=170)
            self.assert_passed(healthy, "socket")
            bed.hosts[shaped].shape(**SHAPE)
            qdisc = bed.hosts[shaped].run(["tc", "qdisc", "show", "dev", "eth0"]).stdout
            self.assertIn("tbf", qdisc)
            print(f"  host{shaped} eth0: {qdisc.strip()}")
            slow = Run(self, bed, "socket_host2_shaped", MASTER_PORT + 1, args, timeout_s=170)
            bed.hosts[shaped].unshape()
        self.assert_passed(slow, "socket", allow_degraded=True)
        before, gate = healthy.gate_busbw("socket")
        after, _ = slow.gate_busbw("socket")
        line = (f"socket gate {gate >> 20} MiB busbw: healthy {before:.3f} GB/s, host{shaped} "
                f"shaped {after:.3f} GB/s ({after / before:.3f}x; runs {healthy.wall_s:.1f}s / "
                f"{slow.wall_s:.1f}s)")
        print(line)
        FIGURES.append(line)
        self.print_stats("before shaping, link stats", healthy, self.link_stats(healthy))
        stats = self.link_stats(slow)
        self.print_stats(f"host{shaped} shaped, link stats", slow, stats)

        self.assertLess(after, 0.5 * before, line)
        blocked = {r: stats[r]["to_next"]["send_blocked_s"] for r in range(N)}
        waited = {r: stats[r]["from_prev"]["recv_wait_s"] for r in range(N)}
        others = [blocked[r] for r in range(N) if r != shaped]
        self.assertEqual(max(blocked, key=blocked.get), shaped, blocked)
        # By far: the shaped host waited on its link at least 3x longer than any other rank did.
        self.assertGreater(blocked[shaped], 3 * max(others), blocked)
        # Its next neighbour spent a large share of the time host2 was blocked waiting for it.
        nxt = (shaped + 1) % N
        self.assertGreater(waited[nxt], 0.5 * blocked[shaped], waited)
        # In a ring every rank ends up waiting on the slow link (the delay travels round), so
        # the others' waits are not ordered by distance; but the bottleneck is the last to be
        # ready each step, so it waits on its own neighbour least of all.
        self.assertEqual(min(waited, key=waited.get), shaped, waited)


def main():
    def on_binary(path):
        global BINARY
        BINARY = path

    return suite.main([TransportsAcrossHosts], __doc__, on_binary, FIGURES)

if __name__ == "__main__":
    sys.exit(main())
