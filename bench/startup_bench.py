#!/usr/bin/python3
"""Start-up cost of the binary: wall time of commands that do no work, `--version` and
`run --help` (what every rank, every CronJob `publish`, every test process pays before anything
else), and the shared libraries the process maps.

With two binaries (--before OLD) the runs alternate OLD, NEW, OLD, NEW ... so machine load hits
both alike; the median (and min/max) of each is printed side by side with the ratio. Goal: the
median `--version` under 30 ms on this 2-core machine.

Not a test: it only prints figures. Exit 1 only when a command failed (a time from a failed run
would mean nothing).

Usage: /usr/bin/python3 bench/startup_bench.py NCCLSMOKE [--before OLD_NCCLSMOKE] [--reps 10]
"""
import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = (["--version"], ["run", "--help"])
# Libraries whose load is costly or optional on a node: the binary opens them at run time only.
WATCHED = ("libfabric", "libmpi", "libopen-pal", "libpmix", "libpsm", "libnccl", "libcudart")


def timed(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"startup_bench: {' '.join(cmd)} exited {p.returncode}: {p.stderr.decode()[-400:]}")
    return dt


def loaded_libraries(binary):
    """The watched libraries a `--version` process has mapped when it exits (LD_DEBUG=files)."""
    p = subprocess.run([binary, "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       env={"LD_DEBUG": "files", "PATH": "/usr/bin:/bin"}, timeout=60)
    names = set()
    for line in p.stderr.decode(errors="replace").splitlines():
        if "calling init:" in line:
            path = line.split("calling init:")[-1].strip()
            if any(w in path for w in WATCHED):
                names.add(path.rsplit("/", 1)[-1])
    return sorted(names)


def summary(samples):
    ms = [s * 1000 for s in samples]
    return statistics.median(ms), min(ms), max(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--before", help="an older binary to alternate with")
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    contenders = [("before", a.before)] if a.before else []
    contenders.append(("now", a.binary))
    for _, b in contenders:  # warm the page cache: the first start reads the file from disk
        for args in COMMANDS:
            timed([b] + args)
    times = {(name, tuple(args)): [] for name, _ in contenders for args in COMMANDS}
    for _ in range(a.reps):
        for args in COMMANDS:
            for name, b in contenders:
                times[(name, tuple(args))].append(timed([b] + args))
    print(f"startup_bench: {a.reps} runs each, alternating; wall ms median (min-max)")
    for args in COMMANDS:
        line = f"  {' '.join(args):<12}"
        medians = {}
        for name, _ in contenders:
            med, lo, hi = summary(times[(name, tuple(args))])
            medians[name] = med
            line += f"  {name}: {med:7.1f} ({lo:.1f}-{hi:.1f})"
        if a.before:
            line += f"  ratio now/before: {medians['now'] / medians['before']:.3f}"
        print(line)
    for name, b in contenders:
        libs = loaded_libraries(b)
        print(f"  {name}: optional libraries loaded by --version: {', '.join(libs) or 'none'}")
    med_now = summary(times[("now", ("--version",))])[0]
    print(f"startup_ms_version={med_now:.1f} goal<30 {'met' if med_now < 30 else 'MISSED'}")


if __name__ == "__main__":
    main()
