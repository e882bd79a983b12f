"""`ncclsmoke launch` as a per-node launcher, on loopback (no namespaces, no root).

- Bad flags and variables (PET_NNODES=x, an elastic range, a node rank past the node count,
  nproc 0, a malformed or service-link MASTER_PORT ...) exit 2 with one line naming the flag or
  variable and its value, and start nothing (the --out-dir is never created).
- `launch --nproc-per-node 3` and `launch -n 2` work as before: one machine, ranks local-<r>, a
  free loopback port, every rank under one random job id that differs between launches.
- PET_NNODES=1 PET_NPROC_PER_NODE=2 (a one-pod PyTorchJob) starts 2 ranks; PET_MASTER_PORT is
  the store's port; --job-id reaches every rank.
- Without --out-dir each launch writes into its own ./ncclsmoke-runs/<run id>/ (printed first and
  last), nothing into the current directory; --spawn exec, fork and auto (the default) start one world.

Usage: /usr/bin/python3 launch_cli_test.py --binary build/ncclsmoke
"""

import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

BINARY = None
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
        self.assertIn("ranks' exit codes: 0=0 1=0 2=0", p.stdout)
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
            self.assertIn("logs and verdicts in ncclsmoke-runs/launch-", first)
            run_dir = first.rsplit(" in ", 1)[1].strip()
            self.assertTrue(p.stdout.rstrip().endswith("logs and verdicts in " + run_dir), p.stdout)
            runs.append(run_dir)
            path = os.path.join(self.tmp, run_dir)
            g, local = self.verdicts(path)
            self.assertEqual(g["verdict"], "pass")
            self.assertEqual(sorted(local), [0, 1])
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
