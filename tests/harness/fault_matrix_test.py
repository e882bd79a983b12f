#!/usr/bin/python3
"""The fault matrix: one rank of 4 frozen (SIGSTOP) or killed (SIGKILL) in each phase
(rendezvous, mesh, sweep), the victim being rank 0 (which hosts the store) or rank 2. Each case
must

  - end: every survivor exits within the deadline of the phase it was struck in (BOUNDS, from the
    flags below) + 2 s, and without the run watchdog (RUN_TIMEOUT would mean a phase deadline did
    not hold);
  - name the right rank and cause: rank 0's verdict.json (when rank 0 is the victim: every
    survivor's verdict.rank<N>.json) holds an error finding of an expected code (EXPECT) naming
    the victim;
  - blame no other rank: no error finding there names a rank other than the victim (a survivor's
    own view may name itself, e.g. "rank 3 cannot reach the store").

The victim is struck at an exact point by the binary's test-only hook (harness/run/transport_phase.h,
NCCLSMOKE_TEST_PAUSE_AT): it stops itself there with SIGSTOP; the test then leaves it stopped
(SIGSTOP case) or SIGKILLs it (SIGKILL case). Points: rendezvous (connected to the store, not yet
joined, while the others join), mesh (its mesh address published, before it dials), sweep (0.3 s
into the socket sweep, inside a collective).

Every wait chain a verdict carries (the transports' wait states: "3 waits on 2, 2 on 1, 1 on 0",
evidence.wait_chain of a timeout or a lost connection) must end at the victim.

Prints one line per case: time to verdict (fault -> the checked verdict file written), time until
the last survivor ended, the blamed ranks and cause codes, the exit code, the wait chains seen. The same cases run across
network-namespace hosts in tests/multihost/test_fault_matrix_netns.py (this module's run_matrix).

    /usr/bin/python3 tests/harness/fault_matrix_test.py --binary build/ncclsmoke [-k mesh] [--keep]

Exit status: 0 every case passed, 1 some case failed.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from loopback import free_port, poll_until, proc_state

WORLD = 4
FLAGS = {"--connect-timeout": 8, "--join-timeout": 6, "--mesh-timeout": 4, "--pair-timeout": 1.5,
         "--op-timeout": 4, "--transport-timeout": 20, "--timeout": 40}
SWEEP = ["--transports", "socket", "--min-bytes", "64M", "--max-bytes", "64M", "--iters", "400",
         "--warmup-iters", "1"]
SILENCE_S = 3   # the liveness watch's silence timeout (rendezvous/peer_watch.h)
GATHER_S = 5    # rank 0 waits at most this for a verdict that is not coming (run_command.cpp)
GRACE_S = 2     # the mesh's done_grace (rendezvous/mesh.h)

# Deadline of the phase a fault hits, in seconds after the fault, that the survivors' run may
# take in all (the case must end by this + 2 s):
#   rendezvous: the join barrier (--join-timeout), then rank 0's wait for verdicts that do not come
#   mesh: the probe (--mesh-timeout) and the done grace others wait for rank 0's summary (2 x
#         grace), then the verdict gather
#   sweep: one collective (--op-timeout) or the silence timeout, whichever comes later, then the
#         verdict gather
BOUNDS = {
    "rendezvous": FLAGS["--join-timeout"] + GATHER_S,
    "mesh": FLAGS["--mesh-timeout"] + 2 * GRACE_S + GATHER_S,
    "sweep": max(FLAGS["--op-timeout"], SILENCE_S) + GATHER_S,
}

# Codes that name the cause, per (phase, victim is rank 0, signal). The first is the one wanted;
# a case passes when the victim is named with any of them.
EXPECT = {
    ("rendezvous", True, "SIGSTOP"): ["RENDEZVOUS_STALLED"],
    ("rendezvous", True, "SIGKILL"): ["RENDEZVOUS_REFUSED", "RENDEZVOUS_LOST"],
    ("rendezvous", False, "SIGSTOP"): ["RANKS_MISSING"],
    ("rendezvous", False, "SIGKILL"): ["RANKS_MISSING"],
    ("mesh", True, "SIGSTOP"): ["PEER_STALLED"],
    ("mesh", True, "SIGKILL"): ["PEER_LOST", "RENDEZVOUS_LOST"],
    ("mesh", False, "SIGSTOP"): ["PEER_STALLED"],
    ("mesh", False, "SIGKILL"): ["PEER_LOST"],
    ("sweep", True, "SIGSTOP"): ["PEER_STALLED"],
    ("sweep", True, "SIGKILL"): ["PEER_LOST"],
    ("sweep", False, "SIGSTOP"): ["PEER_STALLED"],
    ("sweep", False, "SIGKILL"): ["PEER_LOST"],
}

# Findings about the store (rank 0's host): they name rank 0 by what they are, whatever `ranks` says.
STORE_CODES = {"RENDEZVOUS_STALLED", "RENDEZVOUS_REFUSED", "RENDEZVOUS_TIMEOUT", "RENDEZVOUS_LOST",
               "RENDEZVOUS_UNREACHABLE"}


CASES = [(phase, victim, sig) for phase in ("rendezvous", "mesh", "sweep") for victim in (0, 2)
         for sig in ("SIGSTOP", "SIGKILL")]


class Loopback:
    """Every rank on this machine, on 127.0.0.1."""
    name = "loopback"

    def __init__(self, binary):
        self.binary = binary

    def master_addr(self):
        return "127.0.0.1"

    def port(self):
        return free_port()

    def extra_args(self, rank):
        return ["--store-bind", "127.0.0.1"]

    def spawn(self, rank, argv, env, log_prefix):
        log = open(log_prefix + ".log", "w")
        try:
            return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    stdin=subprocess.DEVNULL)
        finally:
            log.close()

    def log_text(self, work, rank):
        texts = []
        for ext in (".log", ".out", ".err"):
            p = os.path.join(work, f"rank{rank}{ext}")
            if os.path.exists(p):
                texts.append(open(p, errors="replace").read())
        return "".join(texts)


def rank_argv(env_, binary, rank, port, work):
    args = [binary, "run", "--launcher", "flags", "--rank", str(rank), "--world-size", str(WORLD),
            "--master-addr", env_.master_addr(), "--master-port", str(port), "--out-dir", work,
            "--job-id", "faultmatrix", "--quiet"]
    for k, v in FLAGS.items():
        args += [k, str(v)]
    return args + SWEEP + env_.extra_args(rank)


def run_case(env_, binary, phase, victim, sig, work):
    """Runs one case; returns a dict of what happened (see check())."""
    port = env_.port()
    procs = []
    for r in range(WORLD):
        env = dict(os.environ)
        env.pop("NCCLSMOKE_TEST_PAUSE_AT", None)
        if r == victim:
            env["NCCLSMOKE_TEST_PAUSE_AT"] = phase
        procs.append(env_.spawn(r, rank_argv(env_, binary, r, port, work), env,
                                os.path.join(work, f"rank{r}")))
    out = {"reached": False, "ended": False, "took_s": None, "fault_wall": None, "codes": {}}
    try:
        poll_until(lambda: proc_state(procs[victim].pid) in ("T", ""), 30)
        if proc_state(procs[victim].pid) != "T":
            tail = env_.log_text(work, victim)[-600:] if hasattr(env_, "log_text") else ""
            out["why"] = (f"rank {victim} never stopped at {phase} (state "
                          f"'{proc_state(procs[victim].pid)}'); its log ends: {tail!r}")
            return out
        out["reached"] = True
        start = time.monotonic()
        out["fault_wall"] = time.time()
        if sig == "SIGKILL":
            os.kill(procs[victim].pid, signal.SIGKILL)
        limit = FLAGS["--timeout"] + 5  # hard stop for the test itself; the bound is checked below
        survivors = [p for i, p in enumerate(procs) if i != victim]
        ended = True
        for p in survivors:
            try:
                p.wait(timeout=max(0.1, limit - (time.monotonic() - start)))
            except subprocess.TimeoutExpired:
                ended = False
        out["ended"] = ended
        out["took_s"] = time.monotonic() - start
        out["codes"] = {i: p.returncode for i, p in enumerate(procs) if i != victim}
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def verdicts_to_check(work, victim):
    """[(label, path, reporter)]: rank 0's global verdict, or each survivor's own."""
    if victim != 0:
        return [("verdict.json", os.path.join(work, "verdict.json"), None)]
    return [(f"verdict.rank{r}.json", os.path.join(work, f"verdict.rank{r}.json"), r)
            for r in range(WORLD) if r != victim]


def names(f, victim):
    return victim in f.get("ranks", []) or (victim == 0 and f["code"] in STORE_CODES)


def check(work, phase, victim, sig, run):
    """(problems, row): row holds the figures for the report table."""
    want = EXPECT[(phase, victim == 0, sig)]
    problems = []
    row = {"case": f"{phase:<10} {sig} rank {victim}", "verdict_s": None, "end_s": run["took_s"],
           "blamed": set(), "causes": set(), "exit": sorted(set(run["codes"].values()))}
    if not run["reached"]:
        return [run.get("why", "victim never reached its point")], row
    bound = BOUNDS[phase] + 2
    if not run["ended"]:
        problems.append(f"survivors still running {FLAGS['--timeout'] + 5} s after the {sig}")
    elif run["took_s"] > bound:
        problems.append(f"survivors ended {run['took_s']:.1f} s after the {sig}: over the "
                        f"{phase} bound {bound} s")
    for label, path, reporter in verdicts_to_check(work, victim):
        if not os.path.exists(path):
            problems.append(f"{label} was not written")
            continue
        written = os.stat(path).st_mtime - run["fault_wall"]
        row["verdict_s"] = max(row["verdict_s"] or 0, written)
        try:
            v = json.load(open(path))
        except ValueError as e:
            problems.append(f"{label} is not JSON: {e}")
            continue
        errors = [f for f in v.get("findings", []) if f.get("severity") == "error"]
        for f in errors:
            row["causes"].add(f["code"])
            row["blamed"].update(x for x in f.get("ranks", []) if x != reporter)
        named = [f for f in errors if f["code"] in want and names(f, victim)]
        if not named:
            problems.append(f"{label} does not name rank {victim} with {' or '.join(want)}; "
                            f"errors: {[(f['code'], f.get('ranks')) for f in errors]}")
        elif named[0]["code"] != want[0] and len(want) == 1:
            problems.append(f"{label}: cause {named[0]['code']}, wanted {want[0]}")
        # Blame the root: every wait chain a finding carries (rank -> whom it waited on, from
        # the transports' wait states) must end at the victim.
        for f in v.get("findings", []):
            chain = (f.get("evidence") or {}).get("wait_chain") if isinstance(
                f.get("evidence"), dict) else None
            if not chain:
                continue
            row["chains"] = row.get("chains", 0) + 1
            if chain.get("root") != victim:
                problems.append(f"{label}: {f['code']}'s wait chain {chain.get('path')} ends at "
                                f"{chain.get('root')} ({chain.get('root_reason')}), not rank {victim}")
        for f in errors:
            others = [x for x in f.get("ranks", []) if x != victim and x != reporter]
            if others and f["code"] != "RUN_TIMEOUT":
                problems.append(f"{label} blames rank(s) {others}: {f['code']} "
                                f"{f.get('ranks')}: {f.get('message', '')[:200]}")
            if f["code"] == "RUN_TIMEOUT":
                problems.append(f"{label}: the run watchdog fired (RUN_TIMEOUT): a phase deadline "
                                f"did not hold")
        if v.get("exit_code", 1) == 0 or v.get("verdict") == "pass":
            problems.append(f"{label}: verdict {v.get('verdict')} (exit {v.get('exit_code')})")
    for r, code in run["codes"].items():
        if code in (0, None) or code < 0:
            problems.append(f"rank {r} exit code {code}")
    return problems, row


def fmt_row(row, status):
    v = "-" if row["verdict_s"] is None else f"{row['verdict_s']:.1f}"
    e = "-" if row["end_s"] is None else f"{row['end_s']:.1f}"
    return (f"| {row['case']} | {v} | {e} | {sorted(row['blamed']) or '-'} | "
            f"{','.join(sorted(row['causes'])) or '-'} | {row['exit'] or '-'} | "
            f"{row.get('chains', 0)} | {status} |")


def run_matrix(env_, binary, cases, keep=False, log=print):
    """Runs `cases` [(phase, victim, sig)] in env_; returns the number that failed. The binary is
    copied first, so a rebuild of the tree during the run cannot swap it under the ranks."""
    copy_dir = tempfile.mkdtemp(prefix="ncclsmoke-fm-bin-")
    try:
        private = os.path.join(copy_dir, "ncclsmoke")
        shutil.copy2(binary, private)
        return _run_matrix(env_, private, cases, keep, log)
    finally:
        shutil.rmtree(copy_dir, ignore_errors=True)


def _run_matrix(env_, binary, cases, keep, log):
    failed = 0
    log(f"fault matrix on {env_.name}: bounds (s after the fault, + 2): {BOUNDS}")
    log("| case | verdict s | end s | blamed | error codes | exit | wait chains | result |")
    log("|---|---|---|---|---|---|---|---|")
    details = []
    for phase, victim, sig in cases:
        work = tempfile.mkdtemp(prefix=f"ncclsmoke-fm-{phase}-{victim}-{sig}-")
        try:
            run = run_case(env_, binary, phase, victim, sig, work)
            problems, row = check(work, phase, victim, sig, run)
            status = "PASS" if not problems else "FAIL"
            failed += bool(problems)
            log(fmt_row(row, status))
            if problems:
                details.append((row["case"], problems, work))
        finally:
            if not keep and not any(d[2] == work for d in details):
                shutil.rmtree(work, ignore_errors=True)
    for case, problems, work in details:
        log(f"CASE {case}: FAIL" + (f" (files in {work})" if keep else " (--keep keeps the files)"))
        for p in problems:
            log(f"  problem: {p}")
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    log(f"fault_matrix ({env_.name}): {len(cases) - failed}/{len(cases)} cases passed")
    return failed


def select(cases, k):
    return [c for c in cases if not k or k in f"{c[0]} {c[1]} {c[2]}"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("-k", default="", help="only cases whose 'phase victim SIGNAL' contains this")
    ap.add_argument("--keep", action="store_true", help="keep every case's files")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    cases = select(CASES, a.k)
    if not cases:
        print(f"no case matches -k {a.k}")
        return 2
    return 1 if run_matrix(Loopback(binary), binary, cases, a.keep) else 0

if __name__ == "__main__":
    sys.exit(main())
