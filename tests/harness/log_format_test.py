#!/usr/bin/python3
"""--log-format json and --color, read from live runs of the built binary.

- a 2-rank `run` on loopback with --log-format json: every line either rank writes (stderr and
  stdout together, as a container's log has them) is one JSON object with time, rank, host, level,
  phase and message; the phases world, rendezvous, mesh, transport:socket and verdict appear; the
  rank field is the rank; the headline line says pass;
- a rank whose MASTER_ADDR does not resolve: its lines parse too, and one error line carries
  "code": "RENDEZVOUS_DNS";
- NCCLSMOKE_LOG_FORMAT=yaml is refused at the door (exit 2, naming the variable), as is
  --log-format yaml;
- text lines: --color always colours the level (an ANSI escape), --color never does not; auto
  colours on a terminal (a pty) and not with NO_COLOR set.

    /usr/bin/python3 tests/harness/log_format_test.py --binary build/ncclsmoke
"""

import argparse
import json
import os
import pty
import subprocess
import sys
import tempfile

from loopback import free_port

FIELDS = {"time", "rank", "host", "level", "phase", "message"}
SMALL = ["--transports", "socket", "--min-bytes", "64K", "--max-bytes", "64K", "--iters", "2",
         "--connect-timeout", "10", "--join-timeout", "10", "--timeout", "30"]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCLSMOKE_", "SLURM_", "OMPI_", "PMIX_", "PET_", "LWS_", "JOBSET_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                         "JOB_COMPLETION_INDEX", "TORCHELASTIC_RUN_ID", "NO_COLOR")}
    env.update(extra)
    return env


def parse_lines(text, who, problems):
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            d = json.loads(line)
        except ValueError:
            problems.append(f"{who} line {n} is not JSON: {line[:160]!r}")
            continue
        if not isinstance(d, dict) or not FIELDS <= set(d):
            problems.append(f"{who} line {n} lacks {sorted(FIELDS - set(d))}: {line[:160]!r}")
            continue
        out.append(d)
    return out


def two_rank_json(binary, work, problems):
    port = free_port()
    procs = []
    for r in range(2):
        args = [binary, "run", "--launcher", "flags", "--rank", str(r), "--world-size", "2",
                "--master-addr", "127.0.0.1", "--master-port", str(port), "--store-bind",
                "127.0.0.1", "--out-dir", work, "--log-format", "json", "--verbose"] + SMALL
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, env=clean_env()))
    for r, p in enumerate(procs):
        out, _ = p.communicate(timeout=60)
        if p.returncode != 0:
            problems.append(f"rank {r} exited {p.returncode}:\n{out[-2000:]}")
        lines = parse_lines(out, f"rank {r}", problems)
        if not lines:
            problems.append(f"rank {r} wrote no JSON line")
            continue
        ranks = {d["rank"] for d in lines}
        if ranks - {r, None} or r not in ranks:
            problems.append(f"rank {r}'s lines name ranks {ranks}")
        phases = {d["phase"] for d in lines}
        want = {"world", "rendezvous", "mesh", "transport:socket", "verdict"}
        if not want <= phases:
            problems.append(f"rank {r}: phases {sorted(phases)} lack {sorted(want - phases)}")
        head = [d for d in lines if d["phase"] == "verdict" and "pass" in d["message"]]
        if not head:
            problems.append(f"rank {r}: no verdict headline saying pass")
        print(f"  rank {r}: {len(lines)} JSON lines, phases {sorted(phases)}")


def dns_failure(binary, work, problems):
    env = clean_env(RANK="1", WORLD_SIZE="2", MASTER_ADDR="no-such-master.invalid",
                    MASTER_PORT=str(free_port()))
    p = subprocess.run([binary, "run", "--log-format", "json", "--out-dir", work,
                        "--connect-timeout", "3", "--join-timeout", "3", "--timeout", "15"],
                       capture_output=True, text=True, env=env, timeout=60)
    if p.stdout.strip():
        problems.append(f"json mode wrote to stdout: {p.stdout[:300]!r}")
    lines = parse_lines(p.stderr, "dns rank", problems)
    coded = [d for d in lines if d.get("code") == "RENDEZVOUS_DNS" and d["level"] == "error"]
    if not coded:
        problems.append("no error line with code RENDEZVOUS_DNS:\n" + p.stderr[-2000:])
    else:
        print(f"  dns rank: exit {p.returncode}, {coded[0]['message'][:100]!r}")


def refused(binary, problems):
    for args, env, name in ((["run", "--world-size", "1"], {"NCCLSMOKE_LOG_FORMAT": "yaml"},
                             "NCCLSMOKE_LOG_FORMAT"),
                            (["run", "--world-size", "1", "--log-format", "yaml"], {},
                             "--log-format")):
        p = subprocess.run([binary] + args + ["--transports", "none", "--out-dir",
                                              tempfile.gettempdir()],
                           capture_output=True, text=True, env=clean_env(**env), timeout=30)
        if p.returncode != 2 or name not in p.stderr:
            problems.append(f"{name}=yaml: exit {p.returncode}, stderr {p.stderr[-300:]!r}")


def one_rank(binary, work, extra, env, tty=False):
    # Its store on a free loopback port, not the default 29500 that a parallel test may hold.
    args = [binary, "run", "--world-size", "1", "--master-addr", "127.0.0.1", "--master-port",
            str(free_port()), "--store-bind", "127.0.0.1", "--transports", "none", "--out-dir",
            work] + extra
    if not tty:
        p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=30)
        return p.stderr
    master, slave = pty.openpty()
    try:
        p = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=slave, env=env, timeout=30)
        os.close(slave)
        slave = -1
        data = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
        return data.decode(errors="replace")
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)


def colours(binary, work, problems):
    esc = "\x1b["
    cases = [("always", ["--color", "always"], clean_env(), False, True),
             ("never on a tty", ["--color", "never"], clean_env(), True, False),
             ("auto on a tty", [], clean_env(), True, True),
             ("auto on a tty with NO_COLOR", [], clean_env(NO_COLOR="1"), True, False),
             ("auto into a pipe", [], clean_env(), False, False)]
    for name, extra, env, tty, want in cases:
        text = one_rank(binary, work, extra + ["--verbose"], env, tty)
        got = esc in text
        if got != want or "rank 0" not in text:
            problems.append(f"colour {name}: escape {'seen' if got else 'not seen'}: {text[:300]!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    a = ap.parse_args()
    problems = []
    with tempfile.TemporaryDirectory(prefix="ncclsmoke-logfmt-") as work:
        two_rank_json(a.binary, os.path.join(work, "two"), problems)
        dns_failure(a.binary, os.path.join(work, "dns"), problems)
        refused(a.binary, problems)
        colours(a.binary, os.path.join(work, "colour"), problems)
    for p in problems:
        print("FAIL:", p)
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
