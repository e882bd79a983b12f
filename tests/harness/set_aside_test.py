#!/usr/bin/python3
"""Setting a bad node aside, end to end on loopback with real ranks. Every rank
runs on this machine, so each gets a node of its own (--node-name n0..n3): the set-aside list
matches a rank's host or node.

  exclude   --exclude-hosts n2: every rank stops right after the join with HOST_EXCLUDED naming
            rank 2 and node n2 (source --exclude-hosts); no mesh and no transport ran (no mesh
            phase that ran, no transport rows); exit 1 on every rank; fast.
  suspects  rank 2 freezes in the sweep (NCCLSMOKE_TEST_PAUSE_AT=sweep): the run fails with
            PEER_STALLED naming it, and rank 0 writes suspects.txt beside verdict.json: the one
            line "n2 # ...PEER_STALLED... run <id>".
  feed      the next run with --exclude-file <that suspects.txt>: HOST_EXCLUDED naming rank 2,
            the file, line 1, the earlier run's id and code; its own suspects.txt lists n2 again
            (still set aside); a passing run writes an empty suspects.txt.
  bad file  --exclude-file missing, a directory, a FIFO, too big, with a bad line: CONFIG_INVALID
            naming the file (and the line), exit 1, verdict.json written, fast.

    /usr/bin/python3 tests/harness/set_aside_test.py --binary build/ncclsmoke
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from loopback import free_port, proc_state

WORLD = 4
FLAGS = ["--connect-timeout", "8", "--join-timeout", "8", "--mesh-timeout", "4",
         "--pair-timeout", "1.5", "--op-timeout", "4", "--transport-timeout", "20",
         "--timeout", "40", "--transports", "socket"]
SHORT = ["--min-bytes", "64K", "--max-bytes", "1M", "--iters", "3", "--warmup-iters", "0"]
# Long enough for the test hook to freeze a rank 0.3 s into the sweep.
LONG = ["--min-bytes", "64M", "--max-bytes", "64M", "--iters", "400", "--warmup-iters", "1"]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def argv(binary, rank, port, out, extra, world=WORLD):
    return [binary, "run", "--launcher", "flags", "--rank", str(rank), "--world-size", str(world),
            "--master-addr", "127.0.0.1", "--master-port", str(port), "--node-name", f"n{rank}",
            "--job-id", "setaside", "--out-dir", out, "--quiet"] + FLAGS + \
        (LONG if "--long" in extra else SHORT) + [a for a in extra if a != "--long"]


def run_world(binary, out, extra, victim=None, limit=60):
    """Starts WORLD ranks; a victim freezes itself in the sweep. Returns (codes, took_s)."""
    os.makedirs(out, exist_ok=True)
    port = free_port()
    procs = []
    for r in range(WORLD):
        env = dict(os.environ)
        env.pop("NCCLSMOKE_TEST_PAUSE_AT", None)
        if r == victim:
            env["NCCLSMOKE_TEST_PAUSE_AT"] = "sweep"
        procs.append(subprocess.Popen(argv(binary, r, port, out, extra), env=env,
                                      stdout=open(os.path.join(out, f"rank{r}.out"), "w"),
                                      stderr=subprocess.STDOUT))
    t0 = time.monotonic()
    codes = {}
    try:
        for r, p in enumerate(procs):
            if r == victim:
                continue
            try:
                codes[r] = p.wait(timeout=max(0.1, limit - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                codes[r] = None
        return codes, time.monotonic() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
        return {"findings": [], "phases": [], "transports": [], "ranks": []}


def findings(v, code):
    return [f for f in v.get("findings", []) if f["code"] == code]


def check_excluded(name, out, codes, took, want_source, want_line=None, want_run=None):
    if any(c != 1 for c in codes.values()):
        fail(f"{name}: exit codes {codes}, expected 1 (fail) on every rank")
    if took > 15:
        fail(f"{name}: took {took:.1f} s; a set-aside run must stop right after the join")
    views = [("verdict.json", load(os.path.join(out, "verdict.json")))]
    views += [(f"verdict.rank{r}.json", load(os.path.join(out, f"verdict.rank{r}.json")))
              for r in range(WORLD)]
    for label, v in views:
        ex = findings(v, "HOST_EXCLUDED")
        if len(ex) != 1:
            fail(f"{name}: {label}: {len(ex)} HOST_EXCLUDED findings, expected 1: "
                 f"{[f['code'] for f in v['findings']]}")
            continue
        f = ex[0]
        if f["ranks"] != [2]:
            fail(f"{name}: {label}: HOST_EXCLUDED names ranks {f['ranks']}, expected [2]")
        items = (f.get("evidence") or {}).get("excluded", [])
        if [(i["rank"], i["node"], i["matched"]) for i in items] != [(2, "n2", "n2")]:
            fail(f"{name}: {label}: evidence.excluded is {items}")
        elif items[0]["source"] != want_source or (want_line and items[0]["line"] != want_line) or \
                (want_run and items[0]["run_id"] != want_run):
            fail(f"{name}: {label}: excluded by {items[0]}, expected source {want_source} "
                 f"line {want_line} run {want_run}")
        if want_source not in f["message"] or want_source not in f["hint"]:
            fail(f"{name}: {label}: the message/hint do not say where the exclusion came from: "
                 f"{f['message']!r} / {f['hint']!r}")
        if v.get("verdict") != "fail":
            fail(f"{name}: {label}: verdict {v.get('verdict')}, expected fail")
        ran = [p["name"] for p in v["phases"] if p["status"] not in ("not_run", "skipped")]
        if any(p == "mesh" or p.startswith("transport") for p in ran) or v.get("transports"):
            fail(f"{name}: {label}: phases {ran} / {len(v.get('transports', []))} transport rows: "
                 f"the mesh or a transport ran")
    print(f"  {name}: HOST_EXCLUDED in every verdict, exit {sorted(set(codes.values()))}, "
          f"{took:.1f} s: {findings(views[0][1], 'HOST_EXCLUDED')[0]['message'] if findings(views[0][1], 'HOST_EXCLUDED') else ''}")


def suspects_lines(out):
    path = os.path.join(out, "suspects.txt")
    if not os.path.exists(path):
        fail(f"{path} was not written")
        return []
    return open(path).read().splitlines()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    binary = os.path.abspath(ap.parse_args().binary)
    work = tempfile.mkdtemp(prefix="ncclsmoke-setaside.")

    # --- exclude -----------------------------------------------------------------------------
    out = os.path.join(work, "exclude")
    codes, took = run_world(binary, out, ["--exclude-hosts", "elsewhere, n2"])
    check_excluded("exclude", out, codes, took, "--exclude-hosts")
    print("CASE exclude:", "done")

    # --- suspects: a failing run names rank 2's node ----------------------------------------------
    out1 = os.path.join(work, "failing")
    codes, took = run_world(binary, out1, ["--long"], victim=2)
    v1 = load(os.path.join(out1, "verdict.json"))
    print(f"  suspects: failing run exit {codes} in {took:.1f} s: "
          f"{[(f['code'], f['ranks']) for f in v1['findings']]}")
    lines = suspects_lines(out1)
    print(f"  suspects.txt: {lines}")
    if v1.get("verdict") != "fail":
        fail(f"suspects: the frozen rank's run is {v1.get('verdict')}, expected fail")
    if len(lines) != 1 or not lines[0].startswith("n2 # ") or "PEER_STALLED" not in lines[0] or \
            f"run {v1.get('run_id')}" not in lines[0]:
        fail(f"suspects: suspects.txt is {lines}, expected one line 'n2 # ...PEER_STALLED... run "
             f"{v1.get('run_id')}'")

    # --- feed: the next run reads it ------------------------------------------------------------
    out2 = os.path.join(work, "next")
    sfile = os.path.join(out1, "suspects.txt")
    codes, took = run_world(binary, out2, ["--exclude-file", sfile])
    check_excluded("feed", out2, codes, took, sfile, want_line=1, want_run=v1.get("run_id"))
    again = suspects_lines(out2)
    if len(again) != 1 or not again[0].startswith("n2 # HOST_EXCLUDED"):
        fail(f"feed: the excluded run's suspects.txt is {again}, expected n2 still set aside")

    # A passing run: an empty suspects.txt (an old one in the directory is not left behind).
    out3 = os.path.join(work, "pass")
    os.makedirs(out3)
    with open(os.path.join(out3, "suspects.txt"), "w") as f:
        f.write("stale # PEER_LOST run old\n")
    codes, took = run_world(binary, out3, ["--exclude-hosts", "not-in-this-job"])
    v3 = load(os.path.join(out3, "verdict.json"))
    if v3.get("verdict") != "pass" or any(c != 0 for c in codes.values()):
        fail(f"pass: verdict {v3.get('verdict')} codes {codes}, expected pass: "
             f"{[(f['code'], f['message']) for f in v3['findings']]}")
    if suspects_lines(out3) != []:
        fail(f"pass: suspects.txt is {suspects_lines(out3)}, expected empty")
    sa = [p for p in v3["phases"] if p["name"] == "set-aside"]
    if not sa or sa[0]["status"] != "pass":
        fail(f"pass: set-aside phase {sa}")
    print(f"  pass: verdict {v3.get('verdict')}, suspects.txt empty, set-aside {sa}")

    # --- bad files ------------------------------------------------------------------------------
    bad = os.path.join(work, "bad")
    os.makedirs(bad)
    big = os.path.join(bad, "big.txt")
    with open(big, "w") as f:
        f.write("n1\n" * 400000)
    badline = os.path.join(bad, "badline.txt")
    with open(badline, "w") as f:
        f.write("# a comment\nn1 # SLOW_HOST run x\nn2 n3\n")
    badname = os.path.join(bad, "badname.txt")
    with open(badname, "w") as f:
        f.write("n1\nno/slash\n")
    fifo = os.path.join(bad, "fifo")
    os.mkfifo(fifo)
    cases = [("missing", os.path.join(bad, "nope.txt"), "does not exist", None),
             ("directory", bad, "directory", None),
             ("fifo", fifo, "not a regular file", None),
             ("too big", big, "larger than", None),
             ("two names", badline, "more than one name", 3),
             ("bad name", badname, "not a host", 2)]
    for name, path, words, line in cases:
        out = os.path.join(work, "cfg-" + name.replace(" ", "-"))
        t0 = time.monotonic()
        p = subprocess.run(argv(binary, 0, free_port(), out, ["--exclude-file", path], world=1),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        took = time.monotonic() - t0
        v = load(os.path.join(out, "verdict.json"))
        cfg = findings(v, "CONFIG_INVALID")
        msg = cfg[0]["message"] if cfg else ""
        where = f"{path} line {line}" if line else path
        ok = p.returncode == 1 and cfg and where in msg and words in msg and took < 10
        print(f"  bad file {name}: exit {p.returncode} in {took:.1f} s: {msg!r}")
        if not ok:
            fail(f"bad file {name}: exit {p.returncode}, CONFIG_INVALID {msg!r}: expected exit 1 "
                 f"naming '{where}' and '{words}'")

    if failures:
        print(f"{len(failures)} failure(s); work dir kept: {work}")
        return 1
    subprocess.run(["rm", "-rf", work])
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
