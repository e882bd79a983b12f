#!/usr/bin/python3
"""Configuration skew across live ranks (CONFIG_SKEW, results/judging/config_skew_rule.h), end
to end on loopback: 4 real ranks (`run --launcher flags`, each its own node n0..n3), socket
transport, small sizes.

  alike     every rank with the same NCCL_* / FI_* settings: no CONFIG_SKEW, the run passes.
  ib        rank 2 alone with NCCL_IB_DISABLE=0 (the others 1): one CONFIG_SKEW naming rank 2 and
            the variable, with both values, and no other finding; degraded (exit 3).
  ifname    rank 2 alone with NCCL_SOCKET_IFNAME=no-such-nic (the others unset): the socket
            transport honours it, so rank 2 cannot set up (TRANSPORT_INIT_FAILED naming the rule),
            and CONFIG_SKEW says why that rank alone; the others fail at once naming rank 2 (it
            published why in place of its address), not after the 20 s transport deadline.
  policy    --profiles with an environment policy (FI_PROVIDER "efa", NCCL_DEBUG set): rank 1
            without FI_PROVIDER is ENV_POLICY naming it alone with the wanted value, no CONFIG_SKEW
            for that variable beside it; every rank without NCCL_DEBUG is named.
  missing   rank 1 without NCCL_IB_DISABLE (the others 1), and rank 3 with FI_PROVIDER=tcp (the
            others efa): two findings, each naming its rank alone; mpirun's own bookkeeping
            (OMPI_MCA_ess_base_vpid, different on every rank) is not one.

    /usr/bin/python3 tests/harness/config_skew_test.py --binary build/ncclsmoke
"""

import argparse
import json
import os
import sys
import tempfile
import time

from loopback import finish, free_port, run_ranks

WORLD = 4
FLAGS = ["--connect-timeout", "8", "--join-timeout", "8", "--mesh-timeout", "4",
         "--op-timeout", "4", "--transport-timeout", "20", "--timeout", "40",
         "--transports", "socket", "--min-bytes", "64K", "--max-bytes", "256K", "--iters", "3",
         "--warmup-iters", "0", "--pairwise=never"]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def run_world(binary, out, env_of, limit=60):
    """WORLD ranks, rank r with the environment env_of(r) on top of a clean one; the exit codes
    and rank 0's verdict."""
    port = free_port()

    def clean_env(r):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("NCCL_", "FI_", "OFI_", "OMPI_", "UCX_", "NCCLSMOKE_TEST"))}
        env.update(env_of(r))
        return env

    def cmd_of(r):
        return [binary, "run", "--launcher", "flags", "--rank", str(r), "--world-size",
                str(WORLD), "--master-addr", "127.0.0.1", "--master-port", str(port),
                "--node-name", f"n{r}", "--job-id", "skew", "--out-dir", out, "--quiet"] + FLAGS

    codes = run_ranks(cmd_of, clean_env, out, WORLD, limit)
    try:
        with open(os.path.join(out, "verdict.json")) as f:
            return codes, json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{out}/verdict.json: {e}")
        return codes, {"findings": []}


def skews(v):
    return [f for f in v.get("findings", []) if f["code"] == "CONFIG_SKEW"]


BASE = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "1", "FI_PROVIDER": "efa"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ncclsmoke-skew-")

    codes, v = run_world(args.binary, os.path.join(work, "alike"), lambda r: dict(BASE))
    print(f"  alike: exit {codes}, verdict {v.get('verdict')}, CONFIG_SKEW {len(skews(v))}")
    if skews(v) or v.get("verdict") != "pass" or any(c != 0 for c in codes.values()):
        fail(f"alike: exit {codes}, verdict {v.get('verdict')}: {[f['message'] for f in skews(v)]}")

    def ib(r):
        env = dict(BASE)
        if r == 2:
            env["NCCL_IB_DISABLE"] = "0"
        return env

    codes, v = run_world(args.binary, os.path.join(work, "ib"), ib)
    s = skews(v)
    print(f"  ib: exit {codes}, verdict {v.get('verdict')}: {[f['message'] for f in s]}")
    if len(s) != 1:
        fail(f"ib: {len(s)} CONFIG_SKEW findings, expected 1")
    else:
        f = s[0]
        if f["ranks"] != [2] or "NCCL_IB_DISABLE" not in f["message"] or \
                '"0"' not in f["message"] or '"1"' not in f["message"]:
            fail(f"ib: {f['ranks']} {f['message']!r}: expected rank 2, the variable and both values")
        if (f.get("evidence") or {}).get("majority") != "1":
            fail(f"ib: evidence {f.get('evidence')}")
    if v.get("verdict") != "degraded" or codes.get(0) != 3:
        fail(f"ib: verdict {v.get('verdict')}, rank 0 exit {codes.get(0)}: expected degraded, 3")
    others = [f for f in v.get("findings", []) if f["code"] != "CONFIG_SKEW"]
    if others:
        fail(f"ib: other findings {[(f['code'], f['message']) for f in others]}")

    def ifname(r):
        env = {k: val for k, val in BASE.items() if k != "NCCL_SOCKET_IFNAME"}
        if r == 2:
            env["NCCL_SOCKET_IFNAME"] = "no-such-nic"
        return env

    t0 = time.monotonic()
    codes, v = run_world(args.binary, os.path.join(work, "ifname"), ifname)
    took = time.monotonic() - t0
    s = skews(v)
    init = [f for f in v.get("findings", []) if f["code"] == "TRANSPORT_INIT_FAILED"]
    print(f"  ifname: exit {codes} in {took:.1f} s, verdict {v.get('verdict')}: "
          f"{[f['message'][:160] for f in s + init]}")
    if len(s) != 1 or s[0]["ranks"] != [2] or "the other 3 ranks" not in s[0]["message"] or \
            "do not set it" not in s[0]["message"]:
        fail(f"ifname: CONFIG_SKEW {[(f['ranks'], f['message']) for f in s]}: expected rank 2 "
             f"against the others that do not set it")
    if not any(2 in f["ranks"] and "no-such-nic" in f["message"] for f in init):
        fail(f"ifname: no TRANSPORT_INIT_FAILED on rank 2 naming the rule: "
             f"{[(f['code'], f['ranks']) for f in v.get('findings', [])]}")
    if took > 15:
        fail(f"ifname: took {took:.1f} s: the others waited out the deadline for rank 2")
    # Each other rank's own verdict blames rank 2, the root, even one whose neighbours are ranks
    # that gave up because of it (rank 0: ranks 1 and 3).
    for r in (0, 1, 3):
        try:
            with open(os.path.join(work, "ifname", f"verdict.rank{r}.json")) as f:
                own = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"ifname: rank {r}'s verdict: {e}")
            continue
        peers = [(f.get("subject") or {}).get("peer") for f in own.get("findings", [])
                 if f["code"] == "TRANSPORT_INIT_FAILED"]
        if not peers or any(p != 2 for p in peers):
            fail(f"ifname: rank {r}'s TRANSPORT_INIT_FAILED blames {peers}, expected rank 2: "
                 f"{[f['message'][:200] for f in own.get('findings', [])]}")

    profiles = os.path.join(work, "profiles.yaml")
    with open(profiles, "w") as f:
        f.write("profiles:\n"
                "  - name: policy-test\n"
                "    environment: {FI_PROVIDER: efa, NCCL_DEBUG: ~}\n"
                "    transports:\n"
                "      - transport: socket\n"
                "        baselines:\n"
                "          - {busbw_gbps: 0.00001, gate_bytes: 262144, source: test}\n")

    def policy(r):
        env = dict(BASE)
        if r == 1:
            del env["FI_PROVIDER"]
        return env

    global FLAGS
    plain = FLAGS
    FLAGS = FLAGS + ["--profiles", profiles, "--profile", "policy-test"]
    codes, v = run_world(args.binary, os.path.join(work, "policy"), policy)
    FLAGS = plain
    pol = {(f.get("evidence") or {}).get("variable"): f for f in v.get("findings", [])
           if f["code"] == "ENV_POLICY"}
    print(f"  policy: exit {codes}, verdict {v.get('verdict')}: "
          f"{[f['message'] for f in pol.values()]}, CONFIG_SKEW {len(skews(v))}")
    if sorted(pol) != ["FI_PROVIDER", "NCCL_DEBUG"]:
        fail(f"policy: ENV_POLICY variables {sorted(pol)}, expected FI_PROVIDER and NCCL_DEBUG")
    else:
        f = pol["FI_PROVIDER"]
        if f["ranks"] != [1] or '"efa"' not in f["message"] or "does not set it" not in f["message"]:
            fail(f"policy: FI_PROVIDER {f['ranks']} {f['message']!r}")
        if pol["NCCL_DEBUG"]["ranks"] != [0, 1, 2, 3]:
            fail(f"policy: NCCL_DEBUG names {pol['NCCL_DEBUG']['ranks']}, expected every rank")
    if skews(v):
        fail(f"policy: CONFIG_SKEW beside the policy: {[f['message'] for f in skews(v)]}")
    if v.get("verdict") != "degraded":
        fail(f"policy: verdict {v.get('verdict')}, expected degraded")

    def missing(r):
        env = dict(BASE)
        env["OMPI_MCA_ess_base_vpid"] = str(r)  # mpirun's own, different on every rank
        if r == 1:
            del env["NCCL_IB_DISABLE"]
        if r == 3:
            env["FI_PROVIDER"] = "tcp"
        return env

    codes, v = run_world(args.binary, os.path.join(work, "missing"), missing)
    s = {(f.get("evidence") or {}).get("item"): f for f in skews(v)}
    print(f"  missing: exit {codes}, verdict {v.get('verdict')}: {[f['message'] for f in s.values()]}")
    if sorted(s) != ["FI_PROVIDER", "NCCL_IB_DISABLE"]:
        fail(f"missing: CONFIG_SKEW items {sorted(s)}, expected FI_PROVIDER and NCCL_IB_DISABLE")
    else:
        if s["NCCL_IB_DISABLE"]["ranks"] != [1] or "does not set it" not in s["NCCL_IB_DISABLE"]["message"]:
            fail(f"missing: NCCL_IB_DISABLE {s['NCCL_IB_DISABLE']['ranks']} "
                 f"{s['NCCL_IB_DISABLE']['message']!r}")
        if s["FI_PROVIDER"]["ranks"] != [3] or '"tcp"' not in s["FI_PROVIDER"]["message"]:
            fail(f"missing: FI_PROVIDER {s['FI_PROVIDER']['ranks']} {s['FI_PROVIDER']['message']!r}")
    # A skew names a configuration, not a broken node: nobody is set aside.
    sus = os.path.join(work, "missing", "suspects.txt")
    if os.path.exists(sus) and open(sus).read().strip():
        fail(f"missing: suspects.txt lists {open(sus).read()!r}")

    return finish(failures, work)

if __name__ == "__main__":
    sys.exit(main())
