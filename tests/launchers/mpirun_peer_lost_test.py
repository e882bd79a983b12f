"""A rank killed with SIGKILL mid-sweep under real mpirun is named PEER_LOST by the survivors.

mpirun (Open MPI 4.1) SIGTERMs the surviving ranks about 1 s after one dies (LAUNCHERS.md). By
then each survivor's peer watch (rendezvous/peer_watch.h) has read the dead rank's EOF, so its
local verdict, written on SIGTERM, must carry PEER_LOST with the dead rank in `ranks` — not only
RUN_TERMINATED. Rank 0's verdict.json, when it exists, must say so too.

Steps: start 4 ranks under mpirun on loopback (socket transport, 64M, 50 iterations, so the
sweep lasts seconds); find the victim among mpirun's descendants by OMPI_COMM_WORLD_RANK in
/proc/<pid>/environ; wait until it is in the sweep (it has burnt CPU and no verdict exists yet);
kill -9 it; wait for mpirun to end; read every verdict in the out dir and print what it found.

Exit: 0 pass, 1 fail, 77 skipped (no mpirun, or the binary is missing).
Usage: /usr/bin/python3 mpirun_peer_lost_test.py --binary build/ncclsmoke [--victim 2] [--np 4]
"""

import argparse
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
from waiting import poll_until  # noqa: E402

SCRUB = ("PET_", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_NAME",
         "NCCLSMOKE_", "TORCHELASTIC_", "SLURM_", "OMPI_", "PMIX_", "JOB_COMPLETION_INDEX")


def log(msg):
    print("mpirun_peer_lost: " + msg, flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children_of(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append(int(d))
    return out


def descendants(pid):
    seen, todo = set(), [pid]
    while todo and len(seen) < 10000:  # bounded: a process tree, not a cycle, but still
        for c in children_of(todo.pop()):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return sorted(seen)


def environ_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    env = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def rank_of_live(pid, binary_name):
    """The OMPI rank of `pid` if it is still one of our ranks (not a reused pid), else None."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv0 = f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return None
    if os.path.basename(argv0) != binary_name:
        return None
    r = environ_of(pid).get("OMPI_COMM_WORLD_RANK")
    return int(r) if r is not None and r.isdigit() else None


def rank_pids(mpirun_pid, binary_name):
    """OMPI_COMM_WORLD_RANK -> pid, for mpirun's descendants running the binary."""
    found = {}
    for pid in descendants(mpirun_pid):
        r = rank_of_live(pid, binary_name)
        if r is not None:
            found[r] = pid
    return found


def peer_lost_for(verdict, victim):
    return [f for f in verdict.get("findings", [])
            if f.get("code") == "PEER_LOST" and victim in (f.get("ranks") or [])]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/ncclsmoke")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--victim", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the out dir")
    args = ap.parse_args()
    mpirun = shutil.which("mpirun")
    if not mpirun:
        log("SKIP: mpirun not found")
        return 77
    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        log("SKIP: binary %s not found" % binary)
        return 77
    if not 0 < args.victim < args.np:
        log("--victim must be a non-zero rank below --np")
        return 2

    tmp = tempfile.mkdtemp(prefix="ncclsmoke-mpirun-peer-lost-")
    out_dir = os.path.join(tmp, "out")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(args.np),
           "-x", "MASTER_ADDR=127.0.0.1", "-x", "MASTER_PORT=%d" % port,
           binary, "run", "--transports", "socket", "--max-bytes", "64M", "--iters", "50",
           "--timeout", "120", "--out-dir", out_dir]
    log("starting: " + " ".join(cmd))
    logf = open(os.path.join(tmp, "mpirun.log"), "w+")
    proc = subprocess.Popen(cmd, env=env, stdout=logf, stderr=subprocess.STDOUT,
                            start_new_session=True)
    failures = []
    pids = {}
    try:
        # 1. Find the ranks, then wait until the victim is in the sweep.
        def found_all():
            if proc.poll() is not None:
                return True
            pids.clear()
            pids.update(rank_pids(proc.pid, os.path.basename(binary)))
            return len(pids) >= args.np
        poll_until(found_all, 30, 0.1)
        log("ranks found under mpirun (pid %d): %s" % (proc.pid, pids))
        if args.victim not in pids:
            failures.append("rank %d never appeared among mpirun's children" % args.victim)
            return 1
        victim_pid = pids[args.victim]
        burnt = [0.0]

        def in_sweep():
            if proc.poll() is not None:
                return True
            burnt[0] = cpu_seconds(victim_pid) or 0.0
            return burnt[0] >= 1.0
        poll_until(in_sweep, 60, 0.05)
        cpu = burnt[0]
        verdicts_before = glob.glob(os.path.join(out_dir, "verdict*.json"))
        if proc.poll() is not None or verdicts_before:
            failures.append("the run ended before the kill (mpirun rc %s, verdicts %s): make the "
                            "sweep longer" % (proc.poll(), verdicts_before))
            return 1
        log("killing rank %d (pid %d) with SIGKILL after %.2fs of its CPU" %
            (args.victim, victim_pid, cpu))
        os.kill(victim_pid, signal.SIGKILL)

        # 2. mpirun tears the job down (SIGTERM ~1 s later, then SIGKILL).
        try:
            rc = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            failures.append("mpirun did not end within 90s of the kill")
            return 1
        log("mpirun exited with %d" % rc)

        # 3. What the survivors wrote.
        for r in range(args.np):
            if r == args.victim:
                continue
            path = os.path.join(out_dir, "verdict.rank%d.json" % r)
            if not os.path.exists(path):
                failures.append("rank %d wrote no local verdict (%s)" % (r, path))
                continue
            v = json.load(open(path))
            codes = [(f.get("code"), f.get("ranks")) for f in v.get("findings", [])]
            log("rank %d local verdict: %s, findings %s" % (r, v.get("verdict"), codes))
            hits = peer_lost_for(v, args.victim)
            for h in hits:
                log("  rank %d: PEER_LOST: %s" % (r, h.get("message")))
            # Informational: the liveness watch's finding carries LostPeer::how ("(EOF)" or
            # "(ECONNRESET)"); without it the name came from the transport alone, which a rank
            # stuck outside a collective would not have had.
            watch = [h for h in hits if "(EOF)" in h.get("message", "") or
                     "(ECONNRESET)" in h.get("message", "")]
            log("  rank %d: named by the liveness watch: %s" % (r, "yes" if watch else "no"))
            if not hits:
                failures.append("rank %d's local verdict has no PEER_LOST naming rank %d" %
                                (r, args.victim))
        glob_path = os.path.join(out_dir, "verdict.json")
        if os.path.exists(glob_path):
            v = json.load(open(glob_path))
            codes = [(f.get("code"), f.get("ranks")) for f in v.get("findings", [])]
            log("rank 0's verdict.json: %s, findings %s" % (v.get("verdict"), codes))
            if not peer_lost_for(v, args.victim):
                failures.append("verdict.json has no PEER_LOST naming rank %d" % args.victim)
        else:
            log("no verdict.json (rank 0 was terminated before it could write one)")
        return 1 if failures else 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for r, pid in pids.items():  # ranks mpirun left behind (it was killed, or hung)
            if rank_of_live(pid, os.path.basename(binary)) == r:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        logf.seek(0)
        tail = logf.read()[-3000:]
        logf.close()
        if failures:
            log("mpirun output (tail):\n" + tail)
            for f in failures:
                log("FAIL: " + f)
        else:
            log("PASS: every survivor named rank %d PEER_LOST" % args.victim)
        if args.keep:
            log("out dir kept: " + out_dir)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
