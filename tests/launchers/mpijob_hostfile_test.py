"""An MPIJob v2 launcher's world under a real mpirun: the master from the controller's hostfile.

What the controller gives the launcher pod, read in kubeflow/mpi-operator v2,
pkg/controller/mpi_job_controller.go (newLauncherPodTemplate and the hostfile ConfigMap):
OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile, a ConfigMap whose lines are
"<mpijob>-worker-<i>.<mpijob>.<ns>.svc slots=<slotsPerWorker>", worker 0 first;
OMPI_MCA_orte_keep_fqdn_hostnames, OMPI_MCA_plm_rsh_args, K_MPI_JOB_ROLE=launcher (the launcher
container's own; mpirun's remote ranks never see it) and no MASTER_ADDR/MASTER_PORT. mpirun
forwards every OMPI_* variable of its environment to the ranks it starts, so each rank sees the
hostfile's path, and the hostfile's first host is where rank 0 runs.

Here, on loopback (no namespaces: nothing leaves the machine, mpirun starts no remote daemon):
a hostfile whose one line is "localhost slots=2", OMPI_MCA_orte_default_hostfile pointing at it in
mpirun's environment (mpirun reads it as its default hostfile too), MASTER_ADDR/MASTER_PORT and
every other launcher variable unset, and `mpirun --allow-run-as-root --oversubscribe -np 2
ncclsmoke run --master-port <free port> --transports socket ...`: the store's port is one the
kernel just handed out, never the default 29500, since the host's ports are shared with the tests
running beside this one (the master address, what this test is about, still comes from the
hostfile). Asserts: mpirun exits 0, rank 0's verdict.json passes, and the world of verdict.json
and of every rank's verdict.rank<N>.json has source "openmpi", sources.master_addr
"OMPI_MCA_orte_default_hostfile" and master_addr "localhost".

Exit: 0 pass, 1 fail, 77 skipped (no mpirun).
Usage: /usr/bin/python3 mpijob_hostfile_test.py --binary build/ncclsmoke
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "multihost"))

import suite  # noqa: E402  (verdict loading with schema validation, the suite's command line)

BINARY = None
NP = 2
SCRUB = ("PET_", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_NAME",
         "NCCLSMOKE_", "TORCHELASTIC_", "SLURM_", "OMPI_", "PMIX_", "JOB_COMPLETION_INDEX",
         "JOBSET_", "LWS_", "K_MPI_")


def free_port():
    """A TCP port free on every address a moment ago (dual-stack, as rank 0's store binds)."""
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", 0))
        return s.getsockname()[1]


class MpiJobHostfile(unittest.TestCase):
    def setUp(self):
        self.mpirun = shutil.which("mpirun")
        if not self.mpirun:
            self.skipTest("mpirun not found (apt-get install openmpi-bin)")
        self.tmp = tempfile.mkdtemp(prefix="ncclsmoke-mpijob-hostfile-")

    def tearDown(self):
        if suite.KEEP:
            print(f"  (kept {self.tmp})")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def test_master_from_default_hostfile(self):
        hostfile = os.path.join(self.tmp, "hostfile")
        with open(hostfile, "w") as f:
            f.write(f"localhost slots={NP}\n")
        out_dir = os.path.join(self.tmp, "out")
        env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}
        env["OMPI_MCA_orte_default_hostfile"] = hostfile
        cmd = [self.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(NP),
               BINARY, "run", "--master-port", str(free_port()), "--transports", "socket",
               "--min-bytes", "64K", "--max-bytes", "64K", "--gate-bytes", "64K", "--iters", "2",
               "--connect-timeout", "20", "--join-timeout", "20", "--timeout", "40",
               "--out-dir", out_dir]
        print("  " + " ".join(cmd), flush=True)
        log_path = os.path.join(self.tmp, "mpirun.log")
        with open(log_path, "w") as logf:
            proc = subprocess.Popen(cmd, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                rc = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # mpirun and the ranks it started
                proc.wait()
                rc = "hung"
        with open(log_path, errors="replace") as f:
            log = f.read()
        print(f"  mpirun exit code: {rc}")
        self.assertEqual(rc, 0, log[-3000:])
        g_path = os.path.join(out_dir, "verdict.json")
        self.assertTrue(os.path.exists(g_path), "rank 0 wrote no verdict.json:\n" + log[-3000:])
        g = suite.load_verdict(g_path)
        self.assertEqual(g["verdict"], "pass", suite.codes(g))
        worlds = {"verdict.json": g["world"]}
        for r in range(NP):
            path = os.path.join(out_dir, f"verdict.rank{r}.json")
            self.assertTrue(os.path.exists(path), f"rank {r} wrote no {path}:\n" + log[-3000:])
            worlds[os.path.basename(path)] = suite.load_verdict(path)["world"]
        for name, w in worlds.items():
            self.assertEqual(w.get("source"), "openmpi", (name, w))
            self.assertEqual(w.get("sources", {}).get("master_addr"),
                             "OMPI_MCA_orte_default_hostfile", (name, w))
            self.assertEqual(w.get("master_addr"), "localhost", (name, w))


def on_binary(path):
    global BINARY
    BINARY = path


if __name__ == "__main__":
    sys.exit(suite.main([MpiJobHostfile], __doc__, on_binary))
