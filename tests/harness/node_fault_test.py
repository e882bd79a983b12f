#!/usr/bin/python3
"""A GPU fault in one rank's kernel log, end to end on loopback (GPU_XID,
results/judging/node_rules.h): 4 real ranks, each its own node n0..n3, socket transport. Rank 2
reads tests/node/fixtures/kmsg_xid79.txt as its kernel log (NCCLSMOKE_KMSG; the others an empty
one) and, as a rank behind a GPU that fell off the bus would, does not finish its collectives: its
transport deadline is 1 s where the sweep takes longer.

  - GPU_XID names rank 2 with Xid 79's meaning ("fallen off the bus"), an error, and Xid 13 on the
    other GPU as a warning;
  - suspects.txt lists node n2 for GPU_XID, and no other node;
  - rank 2's transport timeout is a consequence of the fault (info, evidence.consequence_of_host),
    in its own verdict and in the world's;
  - with no fault in any log, the same run names no GPU_XID;
  - NVML (the stand-in library tests/node/fake_nvml.cpp, NCCLSMOKE_NVML): rank 2's node has a GPU
    with uncorrected ECC errors, a remap pending, a x8 link and a hardware slowdown, rank 3's node
    lists 1 GPU where the others list 2: GPU_HEALTH names both, errors, and suspects.txt lists n2
    and n3 alone; with every node healthy, no GPU_HEALTH;
  - two ranks of one node (`launch -n 2`) both given the faulty log: only the node's local rank 0
    reads it, so GPU_XID names rank 0 alone.

    /usr/bin/python3 tests/harness/node_fault_test.py --binary build/ncclsmoke
"""

import argparse
import os
import subprocess
import sys
import tempfile

from loopback import finish, free_port, load_json, run_ranks

WORLD = 4
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "node", "fixtures", "kmsg_xid79.txt")
FLAGS = ["--connect-timeout", "8", "--join-timeout", "8", "--mesh-timeout", "4",
         "--op-timeout", "4", "--timeout", "40", "--transports", "socket", "--pairwise=never",
         "--min-bytes", "32M", "--max-bytes", "32M", "--iters", "40", "--warmup-iters", "0"]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def run_world(binary, out, kmsg_of, timeout_of, limit=60, extra_env_of=lambda r: {}):
    port = free_port()

    def env_of(r):
        env = {k: v for k, v in os.environ.items() if not k.startswith("NCCLSMOKE_TEST")}
        env["NCCLSMOKE_KMSG"] = kmsg_of(r)
        env.update(extra_env_of(r))
        return env

    def cmd_of(r):
        return [binary, "run", "--launcher", "flags", "--rank", str(r), "--world-size",
                str(WORLD), "--master-addr", "127.0.0.1", "--master-port", str(port),
                "--node-name", f"n{r}", "--job-id", "xid", "--out-dir", out, "--quiet",
                "--transport-timeout", timeout_of(r)] + FLAGS

    return run_ranks(cmd_of, env_of, out, WORLD, limit)


def load(path):
    return load_json(path, fail)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--fake-nvml", required=True, help="the stand-in libnvidia-ml (fake_nvml)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ncclsmoke-xid-")
    empty = os.path.join(work, "empty.kmsg")
    open(empty, "w").close()

    out = os.path.join(work, "fault")
    codes = run_world(args.binary, out, lambda r: FIXTURE if r == 2 else empty,
                      lambda r: "1" if r == 2 else "20")
    g = load(os.path.join(out, "verdict.json"))
    xids = [f for f in g["findings"] if f["code"] == "GPU_XID"]
    print(f"  fault: exit {codes}, verdict {g.get('verdict')}: "
          f"{[(f['severity'], f['message'][:120]) for f in xids]}")
    by_xid = {(f.get("evidence") or {}).get("xid"): f for f in xids}
    if sorted(by_xid) != [13, 79]:
        fail(f"fault: GPU_XID for Xids {sorted(by_xid)}, expected 13 and 79")
    else:
        f79 = by_xid[79]
        if f79["severity"] != "error" or f79["ranks"] != [2] or "fallen off the bus" not in f79["message"] \
                or "PCI:0000:3b:00" not in f79["message"]:
            fail(f"fault: Xid 79: {f79['severity']} {f79['ranks']} {f79['message']!r}")
        if by_xid[13]["severity"] != "warning":
            fail(f"fault: Xid 13 is {by_xid[13]['severity']}, expected a warning")
    sus = open(os.path.join(out, "suspects.txt")).read().splitlines() \
        if os.path.exists(os.path.join(out, "suspects.txt")) else []
    print(f"  fault: suspects.txt {sus}")
    if len(sus) != 1 or not sus[0].startswith("n2 # ") or "GPU_XID" not in sus[0]:
        fail(f"fault: suspects.txt {sus}, expected one line for n2 with GPU_XID")
    for label, v in (("rank 2's verdict", load(os.path.join(out, "verdict.rank2.json"))), ("the world's", g)):
        own = [f for f in v["findings"] if f["code"] in ("TRANSPORT_TIMEOUT", "TRANSPORT_INIT_FAILED")
               and 2 in f["ranks"]]
        if not own:
            fail(f"fault: {label}: no transport failure on rank 2: "
                 f"{[(f['code'], f['ranks']) for f in v['findings']]}")
        for f in own:
            if f["severity"] != "info" or (f.get("evidence") or {}).get("consequence_of_host") is None:
                fail(f"fault: {label}: rank 2's {f['code']} is {f['severity']}, not a consequence: "
                     f"{f['message'][:160]!r}")

    out = os.path.join(work, "clean")
    codes = run_world(args.binary, out, lambda r: empty, lambda r: "20")
    g = load(os.path.join(out, "verdict.json"))
    xids = [f for f in g["findings"] if f["code"] == "GPU_XID"]
    print(f"  clean: exit {codes}, verdict {g.get('verdict')}, GPU_XID {len(xids)}")
    if xids or g.get("verdict") != "pass":
        fail(f"clean: verdict {g.get('verdict')}, GPU_XID {[f['message'] for f in xids]}")

    def nvml_env(scenario_of, gpus_of):
        return lambda r: {"NCCLSMOKE_NVML": args.fake_nvml, "FAKE_NVML": scenario_of(r),
                          "FAKE_NVML_GPUS": gpus_of(r)}

    out = os.path.join(work, "gpu")
    codes = run_world(args.binary, out, lambda r: empty, lambda r: "20",
                      extra_env_of=nvml_env(lambda r: "faulty" if r == 2 else "healthy",
                                            lambda r: "1" if r == 3 else "2"))
    g = load(os.path.join(out, "verdict.json"))
    health = [f for f in g["findings"] if f["code"] == "GPU_HEALTH"]
    sus = open(os.path.join(out, "suspects.txt")).read().splitlines() \
        if os.path.exists(os.path.join(out, "suspects.txt")) else []
    print(f"  gpu: exit {codes}, verdict {g.get('verdict')}: "
          f"{[(f['severity'], f['ranks'], f['message']) for f in health]}; suspects {sus}")
    got = sorted((f["ranks"][0], f["severity"]) for f in health)
    if got != [(2, "error"), (3, "error")]:
        fail(f"gpu: GPU_HEALTH {got}, expected an error on rank 2 and on rank 3")
    for f in health:
        if f["ranks"] == [2] and not all(t in f["message"] for t in (
                "2 uncorrected ECC errors", "a row remap waits", "x8 of x16", "a hardware slowdown")):
            fail(f"gpu: rank 2's GPU_HEALTH leaves something out: {f['message']!r}")
        if f["ranks"] == [3] and "lists 1 GPU; 3 of the 4 nodes list 2" not in f["message"]:
            fail(f"gpu: rank 3's GPU_HEALTH: {f['message']!r}")
    if sorted(line.split(" #")[0] for line in sus) != ["n2", "n3"]:
        fail(f"gpu: suspects.txt {sus}, expected n2 and n3")

    out = os.path.join(work, "gpu_clean")
    codes = run_world(args.binary, out, lambda r: empty, lambda r: "20",
                      extra_env_of=nvml_env(lambda r: "healthy", lambda r: "2"))
    g = load(os.path.join(out, "verdict.json"))
    health = [f for f in g["findings"] if f["code"] == "GPU_HEALTH"]
    own = load(os.path.join(out, "verdict.rank1.json"))
    gpus = ((own.get("node") or {}).get("gpus") or {})
    print(f"  gpu_clean: exit {codes}, verdict {g.get('verdict')}, GPU_HEALTH {len(health)}, "
          f"rank 1 read {len(gpus.get('gpus', []))} GPUs with driver {gpus.get('driver_version')}")
    if health or g.get("verdict") != "pass" or len(gpus.get("gpus", [])) != 2:
        fail(f"gpu_clean: verdict {g.get('verdict')}, {[f['message'] for f in health]}, {gpus}")

    # Two ranks of one node (launch gives local ranks 0 and 1), both pointed at the faulty log:
    # the node's kernel log is read once, by its local rank 0, so the Xids name rank 0 alone and
    # rank 1's own verdict has none.
    out = os.path.join(work, "shared_node")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCLSMOKE_TEST")}
    env["NCCLSMOKE_KMSG"] = FIXTURE
    p = subprocess.run([args.binary, "launch", "-n", "2", "--transports", "none", "--out-dir", out,
                        "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    g = load(os.path.join(out, "verdict.json"))
    xid_ranks = sorted({r for f in g.get("findings", []) if f["code"] == "GPU_XID"
                        for r in f["ranks"]})
    own = load(os.path.join(out, "verdict.rank1.json"))
    own_xids = [f for f in own.get("findings", []) if f["code"] == "GPU_XID"]
    print(f"  shared_node: exit {p.returncode}, GPU_XID ranks {xid_ranks}, "
          f"in rank 1's own verdict {len(own_xids)}")
    if xid_ranks != [0] or own_xids:
        fail(f"shared_node: GPU_XID names ranks {xid_ranks} (expected [0], the node's local rank "
             f"0) and rank 1's own verdict has {len(own_xids)}: {p.stdout[-1500:]}")

    return finish(failures, work)

if __name__ == "__main__":
    sys.exit(main())
