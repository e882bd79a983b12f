#!/usr/bin/python3
"""A path-MTU black hole across 8 namespace hosts, one `ncclsmoke run` rank each.

  healthy          no fault: global verdict pass, no MTU_MISMATCH, the mesh phase's detail shows
                   the MTU (1500) checked on every path, the socket transport ran and passed
  black hole       host5's bridge-side veth set to MTU 1280 (`ip -n <bridge> link set v5 mtu 1280`;
                   host5's own eth0 keeps 1500, so it neither fragments nor hears an ICMP): the
                   verdict fails with MTU_MISMATCH naming host5 and no other host, both MTUs (1500
                   and 1280) in its message, hint and evidence, every path in the evidence has
                   host5 at one end, and the transports were not run (no TRANSPORT_TIMEOUT), the
                   phase's detail naming MTU_MISMATCH: the mesh named the black hole first, well
                   inside the mesh deadline
  repaired         the same testbed with the veth back at 1500: pass again, no MTU_MISMATCH

Every verdict is validated against results/verdict/verdict.schema.json. Hosts come from netns.py (see
../../shared/TESTHOSTS.md for the safety rules): every process runs inside a namespace, nothing
can leave, everything is removed at the end (the MTU change lives in the bridge namespace, which
is deleted with the testbed).

    /usr/bin/python3 tests/multihost/test_mtu_netns.py --binary build/ncclsmoke [-k NAME] [--keep]

Exit status: 0 all passed, 1 something failed, 77 nothing failed but something was skipped.
The last line of the output is "N passed, M failed".
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netns  # noqa: E402
import suite  # noqa: E402
from suite import codes  # noqa: E402

BINARY = None
FIGURES = []  # lines printed again at the end

N = 8
BAD = 5  # host5's bridge port gets the small MTU
HOST_MTU, PATH_MTU = 1500, 1280
MASTER_PORT = 29500  # inside private namespaces: nothing else can hold it
MESH_TIMEOUT_S = 10
CONTROL = ["--connect-timeout", "10", "--join-timeout", "20", "--mesh-timeout",
           str(MESH_TIMEOUT_S), "--pair-timeout", "3"]
# One small size: the socket transport runs in a second when the path is healthy.
TRANSPORT_ARGS = ["--transports", "socket", "--min-bytes", "1M", "--max-bytes", "1M",
                  "--gate-bytes", "1M", "--iters", "2", "--warmup-iters", "1",
                  "--op-timeout", "10", "--transport-timeout", "20"]
RUN_TIMEOUT_S = 40


class Run(suite.RunOnHosts):
    def __init__(self, case, bed, name, port):
        super().__init__(case, bed, name, BINARY, port, CONTROL + TRANSPORT_ARGS, RUN_TIMEOUT_S)

    def mesh_phase(self):
        return next(p for p in self.global_["phases"] if p["name"] == "mesh")


class MtuBlackHole(suite.NamespaceCase):
    dir_prefix = "ncclsmoke-mtu"

    def set_bridge_port_mtu(self, bed, host, mtu):
        veth = f"v{host}"
        netns._run(["ip", "-n", bed.bridge_ns, "link", "set", veth, "mtu", str(mtu)])
        out = netns._run(["ip", "-n", bed.bridge_ns, "link", "show", veth]).stdout
        self.assertIn(f"mtu {mtu}", out)
        # The host itself still believes 1500: that is what makes it a black hole.
        self.assertIn(f"mtu {HOST_MTU}", bed.hosts[host].run(["ip", "link", "show", "eth0"]).stdout)

    def assert_healthy(self, run):
        g = run.global_
        self.assertIsNotNone(g, f"{run.name}: no global verdict\n{run.describe()}\n{run.logs(0)}")
        self.assertEqual(g["verdict"], "pass", f"{run.name}: {codes(g)}\n"
                         f"{json.dumps(g['findings'])[:3000]}")
        self.assertNotIn("MTU_MISMATCH", codes(g))
        for r in range(N):
            self.assertEqual(run.rc[r], 0, f"rank {r}\n{run.describe()}\n{run.logs(r)}")
        mesh = run.mesh_phase()
        self.assertEqual(mesh["status"], "pass", mesh)
        # Every directed pair between the 4 hosts was MTU-checked at 1500.
        self.assertIn(f"MTU {HOST_MTU} on {N * (N - 1)} paths", mesh["detail"], mesh)
        phases = {p["name"]: p["status"] for p in g["phases"]}
        self.assertEqual(phases.get("transport:socket"), "pass", g["phases"])
        FIGURES.append(f"{run.name}: {run.wall_s:.1f} s, mesh {mesh['duration_s']:.3f} s "
                       f"({mesh['detail']})")

    def test_mtu_black_hole_named(self):
        with netns.Testbed(N, self.tmp, tag="mtu") as bed:
            healthy = Run(self, bed, "healthy", MASTER_PORT)
            self.assert_healthy(healthy)

            self.set_bridge_port_mtu(bed, BAD, PATH_MTU)
            bad = Run(self, bed, "black_hole", MASTER_PORT + 1)
            g = bad.global_
            self.assertIsNotNone(g, f"no global verdict\n{bad.describe()}\n{bad.logs(0)}")
            self.assertEqual(g["verdict"], "fail", codes(g))
            mtu = [f for f in g["findings"] if f["code"] == "MTU_MISMATCH"]
            self.assertEqual(len(mtu), 1, json.dumps(g["findings"])[:3000])
            f = mtu[0]
            self.assertEqual(f["severity"], "error", f)
            self.assertEqual(f["layer"], "mesh", f)
            self.assertEqual(f["hosts"], [f"host{BAD}"], f)  # that host, and no other
            self.assertEqual(f["ranks"], [BAD], f)
            for text in (f["message"], f["hint"]):
                self.assertIn(f"host{BAD}", text)
                self.assertIn(str(HOST_MTU), text)
                self.assertIn(str(PATH_MTU), text)
            ev = f["evidence"]
            self.assertEqual(ev["local_mtu"], HOST_MTU, ev)
            self.assertEqual(ev["path_mtu"], PATH_MTU, ev)
            self.assertEqual(ev["suspect_host"], f"host{BAD}", ev)
            # Both directions between the bad host and each of the others.
            self.assertEqual(ev["paths_total"], 2 * (N - 1), ev)
            for p in ev["paths"]:
                self.assertIn(f"host{BAD}", (p["from_host"], p["to_host"]), p)
                self.assertEqual(p["probed_mtu"], HOST_MTU, p)
                # Into host5 exactly 1280; out of it up to 1284: the veth lets a frame through
                # with a VLAN tag's 4 bytes to spare (is_skb_forwardable).
                self.assertTrue(PATH_MTU <= p["path_mtu"] <= PATH_MTU + 4, p)
                self.assertEqual(p["interface"], "eth0", p)
            # No other finding names another host as the culprit, nothing is blamed on a
            # transport: the transports did not run on the black hole.
            for other in g["findings"]:
                self.assertNotIn(other["code"], ("TRANSPORT_TIMEOUT", "MESH_BLOCKED", "PEER_LOST",
                                                 "TRANSPORT_INIT_FAILED"), other)
            phases = {p["name"]: p["status"] for p in g["phases"]}
            self.assertEqual(phases.get("mesh"), "fail", g["phases"])
            self.assertEqual(phases.get("transport:socket"), "not_run", g["phases"])
            # The reason names the cause the run saw (results/judging/next_step.h), not a
            # missing rank: no rank was missing.
            ts = next(p for p in g["phases"] if p["name"] == "transport:socket")
            self.assertIn("MTU_MISMATCH", ts["detail"], ts)
            self.assertNotIn("joined", ts["detail"], ts)
            mesh = bad.mesh_phase()
            self.assertIn(f"{2 * (N - 1)} black-holed ({PATH_MTU}", mesh["detail"], mesh)
            self.assertLess(mesh["duration_s"], MESH_TIMEOUT_S, mesh)
            FIGURES.append(f"black_hole: {bad.wall_s:.1f} s, mesh {mesh['duration_s']:.3f} s "
                           f"({mesh['detail']}); {f['message']}; transport:socket not run: "
                           f"{ts['detail']}")

            self.set_bridge_port_mtu(bed, BAD, HOST_MTU)
            repaired = Run(self, bed, "repaired", MASTER_PORT + 2)
            self.assert_healthy(repaired)


def main():
    def on_binary(path):
        global BINARY
        BINARY = path

    return suite.main([MtuBlackHole], __doc__, on_binary, FIGURES)


if __name__ == "__main__":
    sys.exit(main())
