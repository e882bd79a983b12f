"""A Kubeflow PyTorchJob on network namespaces: Master 1 + Worker 1, nprocPerNode 2 or "auto".

What the controller gives each pod, read in kubeflow/training-operator:
- pkg/controller.v1/pytorch/envvar.go, setPodEnv (the version with getNprocPerNodeInt, which the
  search index holds without a commit; the older one at 5fa872ff10ed31b3996e0135602c991a4610a4a2
  set only WORLD_SIZE = replicas and RANK): PYTHONUNBUFFERED=0; with a Master replica the
  master's variables (below), WORLD_SIZE = total replicas x nprocPerNode, RANK = the pod index
  (Master 0, Worker i -> i + 1), PET_NPROC_PER_NODE = nprocPerNode, PET_NODE_RANK = that same
  pod index; without an elasticPolicy PET_NNODES = total replicas.
- pkg/controller.v1/pytorch/master.go (2c099d5d6a549a66009a1ac5f18930ffae7e0da9),
  MasterEnvVarGenerator.Generate: MASTER_PORT = the master container's port named
  pytorchjob-port (23456 by default), MASTER_ADDR = genGeneralName(job, "master", 0), i.e. the
  master's Service "<job>-master-0". The v1 controller sets no PET_MASTER_ADDR/PET_MASTER_PORT
  (only kubeflow/trainer v2's TrainJob does).
- Pods are named <job>-master-0 / <job>-worker-0 (replicaName), which is also their host name.
So a pod holds a *node* rank in RANK, and WORLD_SIZE counts processes.

Each pod here is a namespace with that host name, "<job>-master-0" resolving to the master pod's
address through /etc/hosts (there is no cluster DNS), and exactly those variables. The pod runs
`ncclsmoke launch`; both pods must exit 0, and rank 0's verdict must pass with 4 ranks on 2 hosts
and one job id (the job name, from the pods' host names) on every rank. Then the same pods start
`ncclsmoke run` directly, without a launcher: that must be refused with CONFIG_INVALID naming
PET_NPROC_PER_NODE (a process per pod would take a node rank for its own), not hang into
RANKS_MISSING.

With nprocPerNode "auto" the controller counts one process per pod (getNprocPerNodeInt returns 1
for anything but an integer: "the number of process will be determinated in the user process
phase"): WORLD_SIZE = replicas x 1 = 2, RANK = the pod index, PET_NPROC_PER_NODE=auto,
PET_NNODES = 2, PET_NODE_RANK, MASTER_ADDR/MASTER_PORT as above, no TORCHELASTIC_RUN_ID. Those
pods start `ncclsmoke run` directly, one rank each (test_auto_one_process_per_pod): both pods
exit 0, rank 0's verdict passes with world.size 2 and world.source "pytorchjob", and every rank's
job id is the job's name.

Needs root and iproute2 (else exit 77). Usage: /usr/bin/python3 k8s_pytorchjob_test.py --binary B
"""

import os
import sys

import k8s_pods
import suite

BINARY = None
JOB = "smoke"
PORT = 23456  # kubeflowv1.PytorchJobDefaultPort; the namespaces are ours, so no clash
RUN_FLAGS = ["--transports", "socket", "--min-bytes", "64K", "--max-bytes", "64K",
             "--gate-bytes", "64K", "--iters", "2", "--connect-timeout", "20",
             "--join-timeout", "20", "--timeout", "60"]


def controller_env(pod_index, nproc_per_node="2"):
    """setPodEnv + MasterEnvVarGenerator for replicas Master 1 + Worker 1, nprocPerNode "2" (or
    "auto": getNprocPerNodeInt counts 1 process per pod in WORLD_SIZE)."""
    per_pod = int(nproc_per_node) if nproc_per_node.isdigit() else 1
    return {
        "PYTHONUNBUFFERED": "0",
        "MASTER_PORT": str(PORT),
        "MASTER_ADDR": f"{JOB}-master-0",
        "WORLD_SIZE": str(2 * per_pod),
        "RANK": str(pod_index),
        "PET_NPROC_PER_NODE": nproc_per_node,
        "PET_NODE_RANK": str(pod_index),
        "PET_NNODES": "2",
    }


class PyTorchJob(suite.NamespaceCase):
    dir_prefix = "ncclsmoke-k8s-ptj"

    def pods(self, bed, nproc_per_node="2"):
        k8s_pods.name_pods(bed, [f"{JOB}-master-0", f"{JOB}-worker-0"])
        return [k8s_pods.pod_env(h, controller_env(h.index, nproc_per_node)) for h in bed.hosts]

    def test_launch_in_each_pod(self):
        with netns.Testbed(2, self.tmp, tag="ptj") as bed:
            envs = self.pods(bed)
            outs = [os.path.join(self.tmp, f"out{i}") for i in range(2)]
            cmds = [[BINARY, "launch", "--out-dir", outs[i]] + RUN_FLAGS for i in range(2)]
            rc, out = k8s_pods.run_pods(bed, cmds, envs, self.tmp, timeout_s=90)
        print(f"  pod exit codes: {rc}")
        g, local = k8s_pods.passing_verdicts(self, rc, out, outs)
        self.assertEqual(g["world"]["size"], 4)
        self.assertEqual(len(g["ranks"]), 4)
        self.assertTrue(all(r["status"] == "joined" for r in g["ranks"]), g["ranks"])
        hosts = {r["rank"]: r.get("host") for r in g["ranks"]}
        self.assertEqual(hosts, {0: f"{JOB}-master-0", 1: f"{JOB}-master-0",
                                 2: f"{JOB}-worker-0", 3: f"{JOB}-worker-0"})
        self.assertEqual(sorted(local), [0, 1, 2, 3])
        jobs = {r: v["world"].get("job_id") for r, v in local.items()}
        self.assertEqual(set(jobs.values()), {JOB}, jobs)
        # Each pod's launcher found it in its own host name and handed it to its ranks.
        for i in range(2):
            self.assertIn(f"job id {JOB} (from hostname (PyTorchJob))", out[i])
        # Each pod's launcher prints its node's summary: node 1 shows its lowest rank, 2.
        self.assertIn("node 0/2", out[0])
        self.assertIn("node 1/2", out[1])
        self.assertIn("ranks 2..3 all exited 0", out[1])

    def test_run_without_launch_names_pet_nproc_per_node(self):
        with netns.Testbed(2, self.tmp, tag="ptr") as bed:
            envs = self.pods(bed)
            outs = [os.path.join(self.tmp, f"out{i}") for i in range(2)]
            cmds = [[BINARY, "run", "--out-dir", outs[i], "--connect-timeout", "5",
                     "--join-timeout", "5", "--timeout", "20"] for i in range(2)]
            rc, out = k8s_pods.run_pods(bed, cmds, envs, self.tmp, timeout_s=40)
        print(f"  pod exit codes: {rc}")
        for i in range(2):
            self.assertNotEqual(rc[i], "hung", out[i][-2000:])
            self.assertNotEqual(rc[i], 0, out[i][-2000:])
            text = out[i]
            for d in (outs[i],):
                if os.path.isdir(d):
                    for name in os.listdir(d):
                        if name.endswith(".json"):
                            with open(os.path.join(d, name)) as f:
                                text += f.read()
            self.assertIn("CONFIG_INVALID", text, text[-3000:])
            self.assertIn("PET_NPROC_PER_NODE", text, text[-3000:])
            self.assertNotIn("RANKS_MISSING", text, text[-3000:])

    def test_auto_one_process_per_pod(self):
        with netns.Testbed(2, self.tmp, tag="pta") as bed:
            envs = self.pods(bed, "auto")
            outs = [os.path.join(self.tmp, f"out{i}") for i in range(2)]
            cmds = [[BINARY, "run", "--out-dir", outs[i]] + RUN_FLAGS for i in range(2)]
            rc, out = k8s_pods.run_pods(bed, cmds, envs, self.tmp, timeout_s=90)
        print(f"  pod exit codes: {rc}")
        g, local = k8s_pods.passing_verdicts(self, rc, out, outs)
        self.assertEqual(g["world"]["size"], 2)
        self.assertEqual(g["world"]["source"], "pytorchjob")
        self.assertEqual(sorted(local), [0, 1])
        for r, v in local.items():
            self.assertEqual(v["world"].get("job_id"), JOB, (r, v["world"]))


netns = k8s_pods.netns


def on_binary(path):
    global BINARY
    BINARY = path


if __name__ == "__main__":
    sys.exit(suite.main([PyTorchJob], __doc__, on_binary))
