"""`ncclsmoke launch` as a per-node launcher, on loopback (no namespaces, no root).

- Bad flags and variables (PET_NNODES=x, an elastic range, a node rank past the node count,
  nproc 0, a malformed or service-link MASTER_PORT ...) exit 2 with one line naming the flag or
  variable and its value, and start nothing (the --out-dir is never created).
- `launch --nproc-per-node 3` and `launch -n 2` work as before: one machine, ranks local-<r>, a
  free loopback port, every rank under one random job id that differs between launches; a port
  taken before rank 0 binds it is retried once on another (NCCLSMOKE_TEST_FIRST_PORT holds the
  first attempt to a port the test keeps).
- PET_NNODES=1 PET_NPROC_PER_NODE=2 (a one-pod PyTorchJob) starts 2 ranks; PET_MASTER_PORT is
  the store's port; --job-id reaches every rank.
- Without --out-dir each launch writes into its own ./ncclsmoke-runs/<run id>/ (printed first and
  last), nothing into the current directory, and the folder's name is every verdict's run_id;
  --spawn exec, fork and auto (the default) start one world.
- The screen: a local rank that cannot resolve MASTER_ADDR puts its own RENDEZVOUS_DNS on the
  screen before rank 0's summary (which only says it never joined), and the torchrun-like banner
  on stderr names the first failing rank (rank, local rank, host, pid, exit code, time, log,
  verdict, finding); a read-only --out-dir exits 8 naming it and starts nothing; a bad
  NCCLSMOKE_LOG_LEVEL exits 2 naming it and starts nothing; --verbose shows every local rank's
  log lines prefixed "[rank N] ".
- Tables: the live rows and the summary table are nccl-tests' columns, unprefixed on stdout, the
  log lines on stderr; --table-format csv / json put a parseable table alone on stdout; the
  "carried by" lines name the socket interface and the fabric provider, warn that fabric used its
  tcp default, and name FI_PROVIDER when it hid the provider; a no-baseline pass says how to learn
  one.

Usage: /usr/bin/python3 launch_cli_test.py --binary build/ncclsmoke
"""

import argparse
import csv
import glob
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

BINARY = None
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
RUN_FLAGS = ["--transports", "socket", "--min-bytes", "64K", "--max-bytes", "64K",
             "--gate-bytes", "64K", "--iters", "2", "--timeout", "60"]
# What a developer's shell or a CI pod might export; the tests set what they need themselves.
SCRUB = ("PET_", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_NAME",
         "NCCLSMOKE_", "TORCHELASTIC_", "SLURM_", "OMPI_", "PMIX_", "JOB_COMPLETION_INDEX")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}
    env.update(extra)
    return env


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LaunchCli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ncclsmoke-launch-cli-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def launch(self, args, env, out="out", timeout=120):
        out_dir = os.path.join(self.tmp, out)
        p = subprocess.run([BINARY, "launch"] + list(args) + ["--out-dir", out_dir], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        return p, out_dir

    def verdicts(self, out_dir):
        glob_ = json.load(open(os.path.join(out_dir, "verdict.json")))
        local = {}
        for path in glob.glob(os.path.join(out_dir, "verdict.rank*.json")):
            d = json.load(open(path))
            local[d["reporting_rank"]] = d
        return glob_, local

    def test_bad_input_exits_2_naming_the_variable(self):
        cases = [
            ({"PET_NNODES": "x"}, [], "PET_NNODES", "'x'"),
            ({"PET_NNODES": "1:4"}, [], "PET_NNODES", "elastic ranges need torchrun"),
            ({}, ["--nnodes", "2:3"], "--nnodes", "elastic"),
            ({"PET_NNODES": "2", "PET_NODE_RANK": "2", "MASTER_ADDR": "10.0.0.1"}, [],
             "PET_NODE_RANK", "'2'"),
            ({"PET_NNODES": "2", "MASTER_ADDR": "10.0.0.1"}, [], "PET_NODE_RANK", "not set"),
            ({"PET_NNODES": "2", "PET_NODE_RANK": "1"}, [], "MASTER_ADDR", "no master address"),
            ({"PET_NPROC_PER_NODE": "0"}, [], "PET_NPROC_PER_NODE", "'0'"),
            ({}, ["--nproc-per-node", "0"], "--nproc-per-node", "'0'"),
            ({}, ["-n", "two"], "--nproc-per-node", "'two'"),
            ({"PET_NPROC_PER_NODE": "cpu"}, [], "PET_NPROC_PER_NODE", "'cpu'"),
            ({"MASTER_PORT": "tcp://10.0.0.7:23456"}, [], "MASTER_PORT", "enableServiceLinks"),
            ({"PET_MASTER_PORT": "99999"}, [], "PET_MASTER_PORT", "'99999'"),
            ({}, ["--master-port", "29x"], "--master-port", "'29x'"),
            ({"PET_MASTER_ADDR": "master:23456"}, [], "PET_MASTER_ADDR", "host:port"),
            ({}, ["--node-rank", "1"], "--node-rank", "not below the node count 1"),
            ({}, ["--job-id", "a/b"], "--job-id", "'a/b'"),
        ]
        if not glob.glob("/dev/nvidia[0-9]*"):
            cases.append(({"PET_NPROC_PER_NODE": "auto"}, [], "PET_NPROC_PER_NODE", "no GPU"))
        for extra, args, var, text in cases:
            with self.subTest(env=extra, args=args):
                p, out_dir = self.launch(args + RUN_FLAGS, clean_env(**extra), out="bad")
                self.assertEqual(p.returncode, 2, p.stdout)
                lines = p.stdout.strip().splitlines()
                self.assertEqual(len(lines), 1, p.stdout)
                self.assertIn(var, lines[0])
                self.assertIn(text, lines[0])
                self.assertFalse(os.path.exists(out_dir), "a rank was started: " + out_dir)

    def test_nproc_per_node_3_on_one_machine(self):
        p, out = self.launch(["--nproc-per-node", "3"] + RUN_FLAGS, clean_env())
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("ncclsmoke launch: ranks 0..2 all exited 0", p.stdout)
        self.assertNotIn("FAILED", p.stdout)  # no banner for a pass
        g, local = self.verdicts(out)
        self.assertEqual(g["verdict"], "pass")
        self.assertEqual(g["world"]["size"], 3)
        self.assertEqual(g["world"]["master_addr"], "127.0.0.1")
        self.assertEqual(sorted(r["node"] for r in g["ranks"]), ["local-0", "local-1", "local-2"])
        self.assertEqual(sorted(local), [0, 1, 2])
        for r in range(3):
            self.assertTrue(os.path.exists(os.path.join(out, f"rank{r}.log")))
        ids = {d["world"].get("job_id") for d in local.values()}
        self.assertEqual(len(ids), 1, ids)
        job = ids.pop()
        self.assertTrue(job and job.startswith("launch-"), job)
        # A second launch is another job.
        p2, out2 = self.launch(["-n", "2"] + RUN_FLAGS, clean_env(), out="again")
        self.assertEqual(p2.returncode, 0, p2.stdout)
        g2, _ = self.verdicts(out2)
        self.assertEqual(g2["world"]["size"], 2)
        self.assertNotEqual(g2["world"].get("job_id"), job)

    def test_a_port_taken_before_rank_0_binds_it_is_retried_on_another(self):
        # The port the launcher picked is taken before rank 0 binds it (held here, through the
        # test hook that makes the first attempt take it): rank 0 reports the clash in its
        # verdict, the launcher says so and starts again on a free port, and the run passes.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
            held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            held.bind(("0.0.0.0", 0))
            held.listen(1)
            port = held.getsockname()[1]
            # Rank 1 of the first attempt reaches the held port, which never answers: a short
            # --connect-timeout ends that attempt sooner.
            p, out = self.launch(["-n", "2", "--connect-timeout", "3"] + RUN_FLAGS,
                                 clean_env(NCCLSMOKE_TEST_FIRST_PORT=str(port)))
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn(f"port {port} was taken before rank 0 could bind it; starting again on "
                      "another port", p.stdout)
        g, _ = self.verdicts(out)
        self.assertEqual(g["verdict"], "pass", p.stdout)
        self.assertNotEqual(g["world"]["master_port"], port)
        self.assertEqual([f["code"] for f in g["findings"]], [], "the clash of the first attempt "
                         "is not in the second's verdict")

    def test_pet_variables_of_a_one_pod_pytorchjob(self):
        port = free_port()
        env = clean_env(PET_NNODES="1", PET_NPROC_PER_NODE="2", PET_MASTER_PORT=str(port))
        p, out = self.launch(RUN_FLAGS, env)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("node 0/1", p.stdout)
        g, local = self.verdicts(out)
        self.assertEqual(g["verdict"], "pass")
        self.assertEqual(g["world"]["size"], 2)
        self.assertEqual(g["world"]["master_port"], port)
        self.assertEqual(sorted(local), [0, 1])

    def test_job_id_flag_reaches_every_rank(self):
        p, out = self.launch(["-n", "2", "--job-id", "nightly-42"] + RUN_FLAGS, clean_env())
        self.assertEqual(p.returncode, 0, p.stdout)
        _, local = self.verdicts(out)
        self.assertEqual({d["world"].get("job_id") for d in local.values()}, {"nightly-42"})

    def test_default_out_dir_is_a_new_run_directory(self):
        # No --out-dir: ./ncclsmoke-runs/<run id>/, printed, and nothing in the current directory.
        runs = []
        for _ in range(2):
            p = subprocess.run([BINARY, "launch", "-n", "2"] + RUN_FLAGS, env=clean_env(),
                               cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout)
            first = p.stdout.splitlines()[0]
            self.assertRegex(first, r"logs and verdicts in ncclsmoke-runs/\d{8}T\d{6}Z-[0-9a-f]{8}$")
            run_dir = first.rsplit(" in ", 1)[1].strip()
            self.assertTrue(p.stdout.rstrip().endswith("logs and verdicts in " + run_dir), p.stdout)
            runs.append(run_dir)
            path = os.path.join(self.tmp, run_dir)
            g, local = self.verdicts(path)
            self.assertEqual(g["verdict"], "pass")
            self.assertEqual(sorted(local), [0, 1])
            # One run id: the folder's name is every verdict's run_id, and the screen says it.
            run_id = os.path.basename(run_dir)
            self.assertEqual(g["run_id"], run_id)
            self.assertEqual({d["run_id"] for d in local.values()}, {run_id})
            self.assertIn("run id " + run_id, first)
            self.assertIn(f"ncclsmoke pass (exit 0): run {run_id}", p.stdout)
            for r in range(2):
                self.assertTrue(os.path.exists(os.path.join(path, f"rank{r}.log")))
        self.assertNotEqual(runs[0], runs[1])
        self.assertEqual(sorted(os.listdir(self.tmp)), ["ncclsmoke-runs"])
        self.assertEqual(sorted(os.listdir(os.path.join(self.tmp, "ncclsmoke-runs"))),
                         sorted(os.path.basename(r) for r in runs))

    def test_spawn_exec_and_fork_start_the_same_ranks(self):
        # --spawn exec (a fresh `ncclsmoke run` per rank), fork and auto (the default) give one world.
        seen = {}
        for mode in ("exec", "fork", "auto"):
            p, out = self.launch(["-n", "2", "--spawn", mode, "--job-id", "spawn-" + mode]
                                 + RUN_FLAGS, clean_env(), out=mode)
            self.assertEqual(p.returncode, 0, p.stdout)
            g, local = self.verdicts(out)
            self.assertEqual(g["verdict"], "pass")
            self.assertEqual(sorted(local), [0, 1])
            self.assertEqual({d["world"].get("job_id") for d in local.values()}, {"spawn-" + mode})
            seen[mode] = sorted((r["rank"], r["node"]) for r in g["ranks"])
        self.assertEqual(seen["exec"], seen["fork"])
        p, _ = self.launch(["-n", "2", "--spawn", "clone"] + RUN_FLAGS, clean_env(), out="bad")
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn("--spawn", p.stdout)

    # ---- the screen ---------------------------------------------------------------------------

    def launch_split(self, args, env, out="out", timeout=120, cwd=None):
        """Like launch(), with stdout and stderr apart."""
        out_dir = os.path.join(self.tmp, out)
        p = subprocess.run([BINARY, "launch"] + list(args) + ["--out-dir", out_dir], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout, cwd=cwd)
        return p, out_dir

    def test_a_local_ranks_dns_failure_is_on_the_screen_with_the_banner(self):
        # MASTER_ADDR that never resolves: rank 0 serves the store itself and only sees rank 1
        # missing; rank 1's own finding (RENDEZVOUS_DNS) is what the screen must lead with.
        env = clean_env(MASTER_ADDR="no-such-master.invalid")
        p, out = self.launch_split(["-n", "2", "--connect-timeout", "4", "--join-timeout", "7"]
                                   + RUN_FLAGS, env)
        screen = p.stdout + p.stderr
        self.assertEqual(p.returncode, 1, screen)
        self.assertIn("RENDEZVOUS_DNS", p.stdout, screen)
        self.assertIn("no-such-master.invalid", p.stdout)
        dns = p.stdout.index("[RENDEZVOUS_DNS]")
        head = p.stdout.index("ncclsmoke fail (exit 1)")
        self.assertLess(dns, head, "rank 1's own finding comes first, before rank 0's summary")
        self.assertIn("RANKS_MISSING", p.stdout[head:])
        # The banner: the first failure is rank 1 (it gave up at its connect deadline, before
        # rank 0's join deadline), named as torchrun names it.
        self.assertNotIn("ranks' exit codes", screen)
        self.assertIn("ncclsmoke launch FAILED: 2 of 2 ranks on node 0", p.stderr)
        root = p.stderr[p.stderr.index("Root Cause (first observed failure):"):]
        self.assertRegex(root, r"rank      : 1 \(local_rank: 1\)")
        self.assertRegex(root, r"exitcode  : 1 \(fail; pid: (\d+)\)")
        self.assertRegex(root, r"time      : \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
        self.assertIn("host      : " + socket.gethostname(), root)
        self.assertIn("log       : " + os.path.join(out, "rank1.log"), root)
        self.assertIn("verdict   : " + os.path.join(out, "verdict.rank1.json"), root)
        self.assertIn("finding   : RENDEZVOUS_DNS", root)
        failures = p.stderr[p.stderr.index("Failures:"):p.stderr.index("Root Cause")]
        self.assertIn("rank      : 0 (local_rank: 0)", failures)
        # Each rank's own pid (rank 1 never joined, so no verdict holds its pid to compare with).
        pid1 = int(re.search(r"pid: (\d+)", root).group(1))
        pid0 = int(re.search(r"pid: (\d+)", failures).group(1))
        self.assertNotEqual(pid0, pid1)
        self.assertNotEqual(pid1, os.getpid())
        # The log holds both of rank 1's streams.
        log1 = open(os.path.join(out, "rank1.log")).read()
        self.assertIn("did not resolve", log1)
        self.assertIn("ncclsmoke fail (exit 1)", log1)

    def test_json_log_lines_carry_the_local_ranks_finding_and_the_first_failure(self):
        # --log-format json: every line of launch's stderr is one JSON object, rank 1's own
        # RENDEZVOUS_DNS among them, and the banner is one object naming the first failure.
        env = clean_env(MASTER_ADDR="no-such-master.invalid")
        p, out = self.launch_split(["-n", "2", "--connect-timeout", "2", "--join-timeout", "3",
                                    "--log-format", "json"] + RUN_FLAGS, env, out="json-log")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        objs = [json.loads(l) for l in p.stderr.splitlines() if l.strip()]
        launch = [o for o in objs if o.get("phase") == "launch"]
        self.assertTrue(any(o.get("code") == "RENDEZVOUS_DNS" and o.get("rank") == 1
                            for o in launch), launch)
        failed = [o for o in launch if "FAILED" in o["message"]]
        self.assertEqual(len(failed), 1, launch)
        self.assertIn("first failure: rank 1 (local_rank 1), exit 1 (fail)", failed[0]["message"])
        self.assertIn(os.path.join(out, "rank1.log"), failed[0]["message"])

    def test_unwritable_out_dir_exits_8_naming_it(self):
        ro = os.path.join(self.tmp, "ro")
        os.makedirs(ro)
        target = os.path.join(ro, "out")
        if os.geteuid() == 0:
            if not shutil.which("unshare"):
                self.skipTest("root without unshare: cannot make a read-only directory")
            # A read-only tmpfs in a private mount namespace (root ignores permission bits).
            script = ('mount -t tmpfs -o ro tmpfs "$1" || exit 77; shift; exec "$@"')
            cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", ro,
                   BINARY, "launch", "-n", "2", "--out-dir", target] + RUN_FLAGS
        else:
            os.chmod(ro, 0o555)
            cmd = [BINARY, "launch", "-n", "2", "--out-dir", target] + RUN_FLAGS
        p = subprocess.run(cmd, env=clean_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        if p.returncode == 77:
            self.skipTest("cannot mount a read-only tmpfs here: " + p.stdout)
        self.assertEqual(p.returncode, 8, p.stdout)
        self.assertIn(f"--out-dir '{target}'", p.stdout)
        self.assertIn("no rank was started", p.stdout)
        self.assertEqual(len(p.stdout.strip().splitlines()), 1, p.stdout)

    def test_bad_log_level_is_refused_before_any_rank_starts(self):
        p, out = self.launch(["-n", "2"] + RUN_FLAGS, clean_env(NCCLSMOKE_LOG_LEVEL="loud"))
        self.assertEqual(p.returncode, 2, p.stdout)
        lines = p.stdout.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stdout)
        self.assertIn("NCCLSMOKE_LOG_LEVEL='loud'", lines[0])
        self.assertFalse(os.path.exists(out), "a rank was started")
        p, out = self.launch(["-n", "2"] + RUN_FLAGS, clean_env(NCCLSMOKE_RUN_ID="a/b"))
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn("NCCLSMOKE_RUN_ID", p.stdout)
        self.assertFalse(os.path.exists(out), "a rank was started")

    def test_verbose_shows_every_local_rank_prefixed(self):
        p, _ = self.launch_split(["-n", "3", "--verbose"] + RUN_FLAGS, clean_env())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for r in range(3):
            self.assertRegex(p.stderr, rf"(?m)^\[rank {r}\] {STAMP} rank {r} info  mesh: pass in",
                             p.stderr)
        # The table and the summary stay unprefixed on stdout.
        self.assertNotIn("[rank", p.stdout)
        # Without --verbose: rank 0's lines only, as `run` prints them (no prefix).
        p, _ = self.launch_split(["-n", "3"] + RUN_FLAGS, clean_env(), out="quiet")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("[rank", p.stderr)
        self.assertRegex(p.stderr, rf"(?m)^{STAMP} rank 0 info  mesh: pass in")
        self.assertNotRegex(p.stderr, r"rank [12] info")

    def test_tables_are_nccl_tests_rows_on_stdout_logs_on_stderr(self):
        args = ["-n", "2", "--transports", "socket", "--min-bytes", "64K", "--max-bytes", "256K",
                "--iters", "2", "--timeout", "60"]
        p, out = self.launch_split(args, clean_env())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # Log lines (time, rank, level) on stderr only.
        self.assertRegex(p.stderr, rf"(?m)^{STAMP} rank 0 info  transport:socket: start")
        self.assertNotRegex(p.stdout, STAMP + " rank")
        # nccl-tests' column header, twice (live and summary), and its rows: 13 columns.
        header = [l for l in p.stdout.splitlines() if l.split()[:3] == ["#", "size", "count"]]
        self.assertEqual(len(header), 2, p.stdout)
        self.assertEqual(header[0].split(), ["#", "size", "count", "type", "redop", "root",
                                             "time", "algbw", "busbw", "#wrong", "time", "algbw",
                                             "busbw", "#wrong"])
        self.assertEqual(header[0], header[1], "the live rows and the summary: one shape")
        rows = [l.split() for l in p.stdout.splitlines() if l and l[0] == " "]
        rows = [r for r in rows if len(r) == 13 and r[0].isdigit()]
        self.assertEqual(len(rows), 6, p.stdout)  # 64K, 128K, 256K: live, then the summary
        for r in rows:
            self.assertEqual(r[2:5], ["float32", "sum", "-1"])
            int(r[0]), int(r[1]), int(r[8]), int(r[12])
            float(r[5]), float(r[6]), float(r[7]), float(r[9]), float(r[10]), float(r[11])
        self.assertEqual([r[0] for r in rows], ["65536", "131072", "262144"] * 2)
        summary = p.stdout.index("ncclsmoke pass (exit 0)")
        self.assertIn("# Avg bus bandwidth    :", p.stdout[summary:])
        # A pass without a baseline says how to learn one.
        self.assertIn("no baseline", p.stdout)
        self.assertIn("ncclsmoke baseline learn --history DB --profiles FILE", p.stdout)
        # csv: the table alone on stdout, the human summary on stderr.
        p, _ = self.launch_split(args + ["--table-format", "csv"], clean_env(), out="csv")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        table = list(csv.DictReader(io.StringIO(p.stdout)))
        self.assertEqual([r["size"] for r in table], ["65536", "131072", "262144"], p.stdout)
        for r in table:
            self.assertEqual((r["transport"], r["ranks"], r["type"]), ("socket", "2", "float32"))
            self.assertGreater(float(r["oop_busbw_gbps"]), 0)
            self.assertEqual(r["ip_wrong"], "0")
        self.assertEqual([r["gate"] for r in table if r["gate"]], [table[-1]["gate"]])
        self.assertIn("ncclsmoke pass (exit 0)", p.stderr)
        # json: one document on stdout.
        p, out = self.launch_split(args + ["--table-format", "json"], clean_env(), out="json")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual(doc["run_id"], json.load(open(os.path.join(out, "verdict.json")))["run_id"])
        self.assertEqual([r["size"] for r in doc["rows"]], [65536, 131072, 262144])
        self.assertTrue(all(r["out_of_place"]["wrong"] == 0 for r in doc["rows"]))

    def test_carried_by_names_interface_and_provider(self):
        args = ["-n", "2", "--transports", "socket,fabric", "--min-bytes", "64K",
                "--max-bytes", "64K", "--gate-bytes", "64K", "--iters", "2", "--timeout", "60"]
        p, out = self.launch_split(args, clean_env())
        v = json.load(open(os.path.join(out, "verdict.json")))
        fabric = [ph for ph in v["phases"] if ph["name"] == "transport:fabric"]
        carried = p.stdout[p.stdout.index("carried by"):]
        self.assertRegex(carried, r"(?m)^  socket  interface lo \(chosen by the route to the store\)$")
        if fabric and fabric[0]["status"] == "pass":
            self.assertRegex(carried, r"(?m)^  fabric  provider tcp;ofi_rxm, domain lo")
            self.assertIn("WARNING: tcp is the fabric transport's default: no --fabric-provider",
                          carried)
            p2, _ = self.launch_split(args + ["--fabric-provider", "tcp"], clean_env(), out="asked")
            self.assertNotIn("fabric transport's default", p2.stdout)
        else:
            print(f"  (fabric did not pass here: {fabric}; its provider line not checked)")
        # FI_PROVIDER hides the provider asked for: the message and the warning name it.
        p, _ = self.launch_split(args, clean_env(FI_PROVIDER="efa"), out="fi")
        self.assertIn("FI_PROVIDER=efa in the environment limits libfabric to those providers",
                      p.stdout)
        self.assertIn("WARNING: FI_PROVIDER=efa in the environment", p.stdout)


def main():
    global BINARY
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    args = ap.parse_args()
    BINARY = os.path.abspath(args.binary)
    if not os.access(BINARY, os.X_OK):
        print(f"not executable: {BINARY}")
        return 1
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(
        unittest.TestLoader().loadTestsFromTestCase(LaunchCli))
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
