"""A Kubeflow Trainer v2 TrainJob (torch runtime) on network namespaces: 2 nodes.

What the controllers give each trainer pod, read in kubeflow/trainer and kubernetes-sigs/jobset:
- kubeflow/trainer pkg/runtime/framework/plugins/torch/torch.go
  (06b555d6ef884257016880d2f719121652b63e23), Torch.EnforceMLPolicy, for any command but
  torchtune's: PET_NNODES = numNodes, PET_NPROC_PER_NODE = numProcPerNode ("auto" by default; with
  "auto" and resourcesPerNode without a GPU, the CPU count), PET_NODE_RANK from the downward API
  (the pod's batch.kubernetes.io/job-completion-index annotation), PET_MASTER_ADDR =
  "<trainjob>-node-0-0.<trainjob>", PET_MASTER_PORT = 29500 (constants.ContainerTrainerPort).
  No RANK, WORLD_SIZE, MASTER_ADDR or MASTER_PORT.
- kubeflow/trainer pkg/runtime/framework/plugins/jobset/builder.go
  (085950848078dd559f175342f6d724de205ac675), Builder.Trainer: the trainer's replicated Job
  "node" gets replicas 1 and parallelism = completions = numNodes. So every node is a pod of one
  Indexed child Job <trainjob>-node-0 (JobSet's webhook defaults completionMode to Indexed):
  the Job controller gives it JOB_COMPLETION_INDEX (= PET_NODE_RANK) and the host name
  <trainjob>-node-0-<i> (JobSet's subdomain is the JobSet's, i.e. the TrainJob's, name; see
  k8s_jobset_test.py). JobSet itself sets no variable.
Each pod here is a namespace with that host name, "<trainjob>-node-0-0.<trainjob>" resolving to
node 0 through /etc/hosts (there is no cluster DNS), and exactly those variables.

Two tests:
- test_run_one_process_per_node: numProcPerNode "auto", each pod runs `ncclsmoke run` (one rank
  per pod): every pod exits 0, rank 0's verdict passes with world.size 2 and world.source
  "trainer-v2", and every rank's job_id is the TrainJob's name with job_id_source
  "hostname (TrainJob)".
- test_launch_two_per_node: numProcPerNode 2, each pod runs `ncclsmoke launch --nproc-per-node 2`:
  every pod exits 0, rank 0's verdict passes with world.size 4, and every rank's world.source is
  "trainer-v2" (not "flags") and its job_id the TrainJob's name.

Needs root and iproute2 (else exit 77). Usage: /usr/bin/python3 k8s_trainjob_test.py --binary B
"""

import os
import sys

import k8s_pods
import suite

netns = k8s_pods.netns
BINARY = None
TRAINJOB = "llama-ft"
NODES = 2
PORT = 29500  # constants.ContainerTrainerPort
RUN_FLAGS = ["--transports", "socket", "--min-bytes", "64K", "--max-bytes", "64K",
             "--gate-bytes", "64K", "--iters", "2", "--connect-timeout", "20",
             "--join-timeout", "20", "--timeout", "40"]


def pod_names():
    return [f"{TRAINJOB}-node-0-{i}" for i in range(NODES)]


def controller_env(node_rank, nproc_per_node):
    return {"PET_NNODES": NODES,                                   # torch.go
            "PET_NPROC_PER_NODE": nproc_per_node,
            "PET_NODE_RANK": node_rank,
            "PET_MASTER_ADDR": f"{TRAINJOB}-node-0-0.{TRAINJOB}",
            "PET_MASTER_PORT": PORT,
            "JOB_COMPLETION_INDEX": node_rank}                     # the Job controller


class TrainJob(suite.NamespaceCase):
    dir_prefix = "ncclsmoke-k8s-tj"

    def run_pods(self, tag, nproc_per_node, command):
        outs = [os.path.join(self.tmp, f"out{i}") for i in range(NODES)]
        with netns.Testbed(NODES, self.tmp, tag=tag) as bed:
            names = pod_names()
            k8s_pods.name_pods(bed, names, {f"{n}.{TRAINJOB}": i for i, n in enumerate(names)})
            envs = [k8s_pods.pod_env(h, controller_env(h.index, nproc_per_node))
                    for h in bed.hosts]
            cmds = [[BINARY] + command + ["--out-dir", outs[i]] + RUN_FLAGS for i in range(NODES)]
            rc, out = k8s_pods.run_pods(bed, cmds, envs, self.tmp, timeout_s=60)
        print(f"  pod exit codes: {rc}")
        g, local = k8s_pods.passing_verdicts(self, rc, out, outs, pod_names())
        return g, local

    def test_run_one_process_per_node(self):
        g, local = self.run_pods("tjr", "auto", ["run"])
        self.assertEqual(g["world"]["size"], NODES)
        self.assertEqual(g["world"]["source"], "trainer-v2")
        self.assertEqual(sorted(local), list(range(NODES)))
        for r, v in local.items():
            self.assertEqual(v["world"].get("job_id"), TRAINJOB, (r, v["world"]))
            self.assertEqual(v["world"].get("job_id_source"), "hostname (TrainJob)",
                             (r, v["world"]))

    def test_launch_two_per_node(self):
        g, local = self.run_pods("tjl", 2, ["launch", "--nproc-per-node", "2"])
        self.assertEqual(g["world"]["size"], 2 * NODES)
        self.assertEqual(sorted(local), list(range(2 * NODES)))
        for r, v in local.items():
            self.assertEqual(v["world"].get("source"), "trainer-v2", (r, v["world"]))
            self.assertEqual(v["world"].get("job_id"), TRAINJOB, (r, v["world"]))


def on_binary(path):
    global BINARY
    BINARY = path


if __name__ == "__main__":
    sys.exit(suite.main([TrainJob], __doc__, on_binary))
