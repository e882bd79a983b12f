#!/usr/bin/python3
"""Rank 0 at fleet size: one real rank 0 and N-1 simulated ranks on this machine.

Rank 0 is the real binary (`ncclsmoke run --rank 0 --transports none`, hosting the store). The
other ranks come from a few processes of bench/fleet_ranks (built with NCCLSMOKE_BENCH=ON), a
thread a rank, each speaking the run's protocol through the project's own store client: it
joins (join_world's store operations; the roster is read, not parsed), posts a mesh result and
answers rank 0's mesh dials, and posts a real local verdict (a rank's verdict.rankN.json from a
real 8-rank socket run: identities with link stats, node facts, env, versions) rewritten for its
rank and host, as the run posts it (without its transport rows). A
share of them (--with-findings) post a finding of their own (GPU_XID or NIC_ERRORS), named in
the world's verdict or not. Simulated hosts carry 8 ranks each (sim-0, sim-1, ...); each host's
first rank reads the roster from the store and the other 7 read its copy (rendezvous/join.h
RosterCopy), as a real run's ranks with a local rank do; --roster-from-store has every rank read
the store.

Faults: --never-join R (rank R never connects: RANKS_MISSING naming it) and --stop-mid-run R
(rank R joins, posts its mesh result, then stops without a verdict: PEER_LOST naming it).

It prints rank 0's phase lines and times, then as its last line
  ranks=N rank0_s=S rss_mib=M store_mib=M verdict_bytes=B refused=K named=K
rank0_s: from the last join (rank 0's rendezvous phase ends: it has every rank and publishes the
roster) to verdict.json written (its modification time); rss_mib:
rank 0's peak resident memory (wait4); store_mib: what the simulated ranks posted to rank 0's
store (held there until the run ends); refused: verdict posts the store refused; named: ranks
with a finding that the verdict names (out of how many, on the line before). Also the size of
rank 0's stdout summary, the series count of `ncclsmoke publish` on the verdict, and rank 0's
CPU time within rank0_s (sampled from /proc every 50 ms): on one machine, rank0_s beyond it is
rank 0 waiting for the simulated ranks, whose threads share its cores.

Not a test: it prints figures. Exit 1 when a simulated rank failed to do its part, a rank with
a finding is not named, or a fault is not named as expected; 0 otherwise.

Usage: /usr/bin/python3 bench/fleet_sim.py NCCLSMOKE --ranks N [--with-findings 0.01]
           [--never-join R] [--stop-mid-run R] [--procs K] [--template verdict.rank1.json]
           [--roster-from-store]
           [--join-timeout S] [--mesh-timeout S] [--timeout S] [--keep DIR]
"""
import argparse
import calendar
import json
import math
import os
import random
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sample_cpu(pid, samples, stop):
    """(wall time, CPU seconds of user and system) of process `pid` every 50 ms until it ends."""
    tick = os.sysconf("SC_CLK_TCK")
    while not stop.is_set():
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # the name may hold spaces
            samples.append((time.time(), (int(fields[11]) + int(fields[12])) / tick))
        except (OSError, IndexError, ValueError):
            return
        stop.wait(0.05)


def cpu_between(samples, t0, t1):
    """CPU seconds used between two wall times, from the samples nearest each (None if none)."""
    before = [c for t, c in samples if t <= t0]
    upto = [c for t, c in samples if t <= t1]
    if not before or not upto:
        return None
    return upto[-1] - before[-1]


def make_template(binary, workdir):
    """A real local verdict: rank 1's of an 8-rank socket run on loopback."""
    out = os.path.join(workdir, "template-run")
    cmd = [binary, "launch", "-n", "8", "--transports", "socket", "--out-dir", out, "--quiet"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300)
    path = os.path.join(out, "verdict.rank1.json")
    if not os.path.exists(path):
        sys.exit(f"fleet_sim: the template run wrote no {path} (exit {p.returncode}):\n"
                 f"{p.stdout[-2000:]}")
    return path


PHASE_LINE = re.compile(
    r"^(\S+) rank 0 \w+ +(\w+): (pass|fail|done|inconclusive|skipped|degraded)\b.*?in ([0-9.]+) s")


def rfc3339_to_unix(ts):
    # "2026-12-07T18:03:57.400Z"
    base, frac = ts.rstrip("Z").split(".")
    t = time.strptime(base, "%Y-%m-%dT%H:%M:%S")
    return float(calendar.timegm(t)) + float("0." + frac)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--with-findings", type=float, default=0.0,
                    help="share of the simulated ranks that post a finding (0.01 = 1%%)")
    ap.add_argument("--never-join", type=int, action="append", default=[])
    ap.add_argument("--stop-mid-run", type=int, action="append", default=[])
    ap.add_argument("--procs", type=int, default=0,
                    help="simulator processes (default: one per 4,096 ranks, at least 2)")
    ap.add_argument("--helper", default="", help="fleet_ranks (default: beside the binary)")
    ap.add_argument("--template", default="", help="a real verdict.rankN.json to post")
    ap.add_argument("--join-timeout", type=float, default=0,
                    help="rank 0's --join-timeout (default: its own)")
    ap.add_argument("--mesh-timeout", type=float, default=0,
                    help="rank 0's --mesh-timeout (default: its own)")
    ap.add_argument("--timeout", type=float, default=0, help="rank 0's --timeout (default: its own)")
    ap.add_argument("--roster-from-store", action="store_true",
                    help="every simulated rank reads the roster from rank 0's store (none from "
                         "its host leader's copy, rendezvous/join.h RosterCopy)")
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--keep", default="", help="keep rank 0's output in this folder")
    a = ap.parse_args()

    n = a.ranks
    binary = os.path.abspath(a.binary)
    helper = a.helper or os.path.join(os.path.dirname(binary), "fleet_ranks")
    if not os.path.exists(helper):
        sys.exit(f"fleet_sim: no {helper}: build with -DNCCLSMOKE_BENCH=ON (target fleet_ranks)")
    nofile = raise_nofile()
    procs = a.procs or max(2, math.ceil(n / 4096))
    workdir = a.keep or tempfile.mkdtemp(prefix="fleet-sim-")
    os.makedirs(workdir, exist_ok=True)
    template = a.template or make_template(binary, workdir)
    rng = random.Random(a.seed)
    faulty = set(a.never_join) | set(a.stop_mid_run)
    candidates = [r for r in range(1, n) if r not in faulty]
    with_finding = sorted(rng.sample(candidates, round(len(candidates) * a.with_findings)))

    port = free_port()
    job = f"fleet-{n}-{os.getpid()}"
    out_dir = os.path.join(workdir, "out")
    shutil.rmtree(out_dir, ignore_errors=True)
    rank0_cmd = [binary, "run", "--launcher", "flags", "--rank", "0", "--world-size", str(n),
                 "--master-addr", "127.0.0.1", "--master-port", str(port), "--job-id", job,
                 "--transports", "none", "--out-dir", out_dir]
    for flag, value in (("--join-timeout", a.join_timeout), ("--mesh-timeout", a.mesh_timeout),
                        ("--timeout", a.timeout)):
        if value:
            rank0_cmd += [flag, str(value)]
    print(f"fleet_sim: {n} ranks (rank 0 real, {n - 1} simulated in {procs} processes), "
          f"{len(with_finding)} with a finding, never joins: {a.never_join or '-'}, "
          f"stops mid-run: {a.stop_mid_run or '-'}; open-file limit {nofile}; in {workdir}",
          flush=True)
    rank0_out = open(os.path.join(workdir, "rank0.stdout"), "w")
    rank0_err = open(os.path.join(workdir, "rank0.stderr"), "w")
    t_start = time.time()
    rank0 = subprocess.Popen(rank0_cmd, stdout=rank0_out, stderr=rank0_err)
    cpu_samples, sampling_stop = [], threading.Event()
    sampler = threading.Thread(target=sample_cpu, args=(rank0.pid, cpu_samples, sampling_stop),
                               daemon=True)
    sampler.start()

    per = math.ceil((n - 1) / procs)
    helpers = []
    for k in range(procs):
        first, last = 1 + k * per, min(n - 1, (k + 1) * per)
        if first > last:
            continue
        mine = lambda rs: ",".join(str(r) for r in rs if first <= r <= last)
        cmd = [helper, "--port", str(port), "--job-id", job, "--world", str(n), "--first",
               str(first), "--last", str(last), "--template", template, "--rank0-host",
               socket.gethostname()]
        for flag, rs in (("--finding", with_finding), ("--stop-after-mesh", a.stop_mid_run)):
            if mine(rs):
                cmd += [flag, mine(rs)]
        # Every helper hears of every absent rank: rank 0 picks the peers it dials among the
        # ranks that joined, and the helper that answers them must pick the same ones.
        if a.never_join:
            cmd += ["--never-join", ",".join(str(r) for r in a.never_join)]
        if a.join_timeout:
            cmd += ["--join-timeout", str(a.join_timeout + 10)]
        if a.roster_from_store:
            cmd += ["--roster-from-store"]
        helpers.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))

    reports = []
    for h in helpers:
        text, _ = h.communicate()
        try:
            reports.append(json.loads(text.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            reports.append({"errors": {"?": f"helper printed no report (exit {h.returncode})"}})
    _, status, usage = os.wait4(rank0.pid, 0)
    sampling_stop.set()
    sampler.join()
    rank0.returncode = os.waitstatus_to_exitcode(status)
    rank0_out.close()
    rank0_err.close()
    wall = time.time() - t_start

    verdict_path = os.path.join(out_dir, "verdict.json")
    if not os.path.exists(verdict_path):
        sys.exit(f"fleet_sim: rank 0 (exit {rank0.returncode}) wrote no verdict.json; "
                 f"see {workdir}/rank0.stderr")
    with open(verdict_path) as f:
        verdict = json.load(f)
    verdict_bytes = os.path.getsize(verdict_path)
    written = os.stat(verdict_path).st_mtime
    last_join = max(r.get("last_join_unix_ns", 0) for r in reports) / 1e9
    refused = sum(len(r.get("refused", [])) for r in reports)
    errors = {}
    for r in reports:
        errors.update(r.get("errors", {}))
    posted = sum(r.get("posted", 0) for r in reports)
    post_bytes = sum(r.get("post_bytes", 0) for r in reports)
    roster_bytes = max(r.get("roster_bytes", 0) for r in reports)
    roster_copies = sum(r.get("roster_copies", 0) for r in reports)

    # What the verdict names.
    named_by_code = {}
    for f in verdict.get("findings", []):
        named_by_code.setdefault(f.get("code"), set()).update(f.get("ranks", []))
    node_named = named_by_code.get("GPU_XID", set()) | named_by_code.get("NIC_ERRORS", set())
    named = [r for r in with_finding if r in node_named]
    healthy_named = sorted((node_named - set(with_finding)))

    # Rank 0's phases, from its log lines.
    log = open(os.path.join(workdir, "rank0.stderr")).read() + open(
        os.path.join(workdir, "rank0.stdout")).read()
    phases, stamps = [], {}
    for line in log.splitlines():
        m = PHASE_LINE.match(line)
        if m:
            phases.append((m.group(2), m.group(3), float(m.group(4))))
            stamps[m.group(2)] = rfc3339_to_unix(m.group(1))
    stdout_bytes = os.path.getsize(os.path.join(workdir, "rank0.stdout"))
    pub = subprocess.run([binary, "publish", verdict_path, "--fail-on", "none", "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    series = sum(1 for line in pub.stdout.splitlines() if line and not line.startswith("#"))

    for name, status, secs in phases:
        print(f"  rank 0 {name:<11} {status:<12} {secs:8.2f} s")
    print(f"  wall {wall:.1f} s; rank 0 exit {rank0.returncode}, verdict {verdict.get('verdict')}"
          f", findings {sorted(named_by_code)}")
    print(f"  simulated: {posted} verdicts posted ({post_bytes / 2**20:.1f} MiB), "
          f"{len(errors)} ranks with an error; the roster each read: {roster_bytes} bytes, "
          f"{roster_copies} from their host leader's copy")
    for r, e in sorted(errors.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else -1)[:10]:
        print(f"    rank {r}: {e}")
    print(f"  stdout summary {stdout_bytes} bytes; publish: {series} series")
    print(f"  ranks with a finding named: {len(named)} of {len(with_finding)}"
          f"{'; healthy ranks named: ' + str(healthy_named[:20]) if healthy_named else ''}")
    ok = not errors or set(errors) <= {str(r) for r in a.stop_mid_run}
    ok = ok and len(named) == len(with_finding) and not healthy_named
    for r in a.never_join:
        hit = r in named_by_code.get("RANKS_MISSING", set())
        print(f"  never joined: rank {r} {'named' if hit else 'NOT named'} by RANKS_MISSING")
        ok = ok and hit
    for r in a.stop_mid_run:
        hit = r in named_by_code.get("PEER_LOST", set())
        print(f"  stopped mid-run: rank {r} {'named' if hit else 'NOT named'} by PEER_LOST")
        ok = ok and hit
    rss_mib = usage.ru_maxrss / 1024
    # The last join is when rank 0 had every rank: its rendezvous phase's end (the roster).
    joined_at = stamps.get("rendezvous")
    rank0_s = written - joined_at if joined_at else float("nan")
    if last_join and joined_at:
        print(f"  the last simulated rank had the roster {last_join - joined_at:.2f} s after "
              f"rank 0 published it")
    cpu = cpu_between(cpu_samples, joined_at, written) if joined_at else None
    if cpu is not None:
        print(f"  rank 0's CPU (all its threads, the store's too) in those {rank0_s:.2f} s: "
              f"{cpu:.2f} s; over its whole run: {usage.ru_utime + usage.ru_stime:.2f} s")
    print(f"ranks={n} rank0_s={rank0_s:.2f} rss_mib={rss_mib:.0f} store_mib={post_bytes / 2**20:.0f}"
          f" verdict_bytes={verdict_bytes} refused={refused} named={len(named)}")
    if not a.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
