#!/usr/bin/python3
"""The node's network devices, end to end on loopback (NIC_DOWN, NIC_ERRORS:
results/judging/nic_rules.h): 4 real ranks, each its own node n0..n3 with its own copy of a sysfs
fixture layout (NCCLSMOKE_SYSFS_ROOT; tests/node/fixtures/README.md), socket transport.

  - down: rank 2's copy has mlx5_1 port 1 DOWN (Polling), the others have it ACTIVE: NIC_DOWN
    names rank 2's node alone, an error, and suspects.txt lists n2 alone;
  - counters: ranks 1 and 3 start first; once each has read its devices (its debug line), rank 1's
    symbol_error rises by 12 and rank 3's link_downed by 1, then the others start: NIC_ERRORS is a
    warning on n1 naming symbol_error +12 and an error on n3 naming link_downed, suspects.txt lists
    n3 alone (a link that went down during the run), and no port is called down;
  - clean: every copy healthy: no NIC_* finding, a pass, and each rank's own verdict carries its
    devices ("node": lo, which holds the ranks' address, and both ports).

    /usr/bin/python3 tests/harness/nic_fault_test.py --binary build/ncclsmoke
"""

import argparse
import os
import shutil
import sys
import tempfile

from loopback import finish, free_port, load_json, run_ranks, wait_for_line

WORLD = 4
HERE = os.path.dirname(os.path.abspath(__file__))
LAYOUTS = os.path.join(HERE, "..", "node", "fixtures", "sysfs")
PORT = "class/infiniband/{}/ports/1/counters/{}"
FLAGS = ["--connect-timeout", "8", "--join-timeout", "10", "--mesh-timeout", "4",
         "--op-timeout", "4", "--timeout", "40", "--transports", "socket", "--pairwise=never",
         "--min-bytes", "1M", "--max-bytes", "1M", "--iters", "2", "--warmup-iters", "0"]
READ_LINE = "RDMA ports read under"
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def roots(work, name, layout_of):
    """Each rank's own copy of its layout: {rank: root}."""
    out = {}
    for r in range(WORLD):
        root = os.path.join(work, f"{name}-sys{r}")
        shutil.copytree(os.path.join(LAYOUTS, layout_of(r)), root)
        out[r] = root
    return out


def run_world(binary, out, root_of, first=(), before_rest=None):
    port = free_port()

    def env_of(r):
        env = {k: v for k, v in os.environ.items() if not k.startswith("NCCLSMOKE_")}
        env["NCCLSMOKE_SYSFS_ROOT"] = root_of[r]
        if r in first:
            env["NCCLSMOKE_LOG_LEVEL"] = "debug"
        return env

    def cmd_of(r):
        return [binary, "run", "--launcher", "flags", "--rank", str(r), "--world-size",
                str(WORLD), "--master-addr", "127.0.0.1", "--master-port", str(port),
                "--node-name", f"n{r}", "--job-id", "nic", "--out-dir", out] + \
            ([] if r in first else ["--quiet"]) + FLAGS

    return run_ranks(cmd_of, env_of, out, WORLD, 60, first, before_rest)


def load(path):
    return load_json(path, fail)


def suspects(out):
    path = os.path.join(out, "suspects.txt")
    return open(path).read().splitlines() if os.path.exists(path) else []


def nic_findings(g):
    return [f for f in g["findings"] if f["code"] in ("NIC_DOWN", "NIC_ERRORS")]


def bump(root, device, counter, by):
    path = os.path.join(root, PORT.format(device, counter))
    with open(path) as f:
        value = int(f.read())
    with open(path, "w") as f:
        f.write(f"{value + by}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ncclsmoke-nic-")

    out = os.path.join(work, "down")
    codes = run_world(args.binary, out,
                      roots(work, "down", lambda r: "port_down" if r == 2 else "healthy"))
    g = load(os.path.join(out, "verdict.json"))
    found = nic_findings(g)
    sus = suspects(out)
    print(f"  down: exit {codes}, verdict {g.get('verdict')}: "
          f"{[(f['code'], f['severity'], f['message']) for f in found]}; suspects {sus}")
    if [(f["code"], f["severity"], f["ranks"], f["hosts"]) for f in found] != \
            [("NIC_DOWN", "error", [2], [g_host(g, 2)])] or "mlx5_1/1 is DOWN" not in found[0]["message"]:
        fail(f"down: expected one NIC_DOWN error on rank 2's host, got "
             f"{[(f['code'], f['severity'], f['ranks'], f['hosts']) for f in found]}")
    if len(sus) != 1 or not sus[0].startswith("n2 # ") or "NIC_DOWN" not in sus[0]:
        fail(f"down: suspects.txt {sus}, expected one line for n2 with NIC_DOWN")

    out = os.path.join(work, "counters")
    root_of = roots(work, "counters", lambda r: "healthy")
    first = (1, 3)

    def move_counters():
        for r in first:
            if not wait_for_line(os.path.join(out, f"rank{r}.out"), READ_LINE):
                fail(f"counters: rank {r} never said it read its devices")
        bump(root_of[1], "mlx5_0", "symbol_error", 12)
        bump(root_of[3], "mlx5_1", "link_downed", 1)

    codes = run_world(args.binary, out, root_of, first, move_counters)
    g = load(os.path.join(out, "verdict.json"))
    found = nic_findings(g)
    sus = suspects(out)
    print(f"  counters: exit {codes}, verdict {g.get('verdict')}: "
          f"{[(f['code'], f['severity'], f['message']) for f in found]}; suspects {sus}")
    got = sorted((f["code"], f["severity"], f["ranks"][0]) for f in found)
    if got != sorted([("NIC_ERRORS", "warning", 1), ("NIC_ERRORS", "error", 3)]):
        fail(f"counters: expected NIC_ERRORS warning on rank 1 and error on rank 3, got {got}")
    by_rank = {f["ranks"][0]: f for f in found}
    if 1 in by_rank and "symbol_error +12" not in by_rank[1]["message"]:
        fail(f"counters: rank 1's finding does not name symbol_error +12: {by_rank[1]['message']!r}")
    if 3 in by_rank and "link_downed +1" not in by_rank[3]["message"]:
        fail(f"counters: rank 3's finding does not name link_downed +1: {by_rank[3]['message']!r}")
    if len(sus) != 1 or not sus[0].startswith("n3 # ") or "NIC_ERRORS" not in sus[0]:
        fail(f"counters: suspects.txt {sus}, expected one line for n3 with NIC_ERRORS")

    out = os.path.join(work, "clean")
    codes = run_world(args.binary, out, roots(work, "clean", lambda r: "healthy"))
    g = load(os.path.join(out, "verdict.json"))
    found = nic_findings(g)
    print(f"  clean: exit {codes}, verdict {g.get('verdict')}, NIC findings {len(found)}")
    if found or g.get("verdict") != "pass":
        fail(f"clean: verdict {g.get('verdict')}, {[f['message'] for f in found]}")
    for r in range(WORLD):
        nics = (load(os.path.join(out, f"verdict.rank{r}.json")).get("node") or {}).get("nics") or {}
        names = [i.get("name") for i in nics.get("interfaces", [])]
        ports = sorted(f"{p.get('device')}/{p.get('port')}" for p in nics.get("rdma_ports", []))
        if names != ["lo"] or ports != ["mlx5_0/1", "mlx5_1/1"]:
            fail(f"clean: rank {r}'s node: interfaces {names}, ports {ports}")

    return finish(failures, work)


def g_host(g, rank):
    for r in g.get("ranks", []):
        if r.get("rank") == rank:
            return r.get("host")
    return None


if __name__ == "__main__":
    sys.exit(main())
