"""A LeaderWorkerSet group on network namespaces: a leader and 3 workers, `ncclsmoke run`.

What the controller gives each pod, read in kubernetes-sigs/lws:
- pkg/utils/pod/pod_utils.go (1b17603c212a9ebf3ac751ed06d30011cf51f9a3), AddLWSVariables, run
  by the pod webhook on every container: LWS_LEADER_ADDRESS = "<lws>-<group>.<subdomain>.<ns>"
  (the leader's DNS name through the headless Service, which is named after the
  LeaderWorkerSet), LWS_GROUP_SIZE = the size annotation (leader included), LWS_WORKER_INDEX =
  the worker-index label (0 for the leader). Nothing else: no MASTER_ADDR/MASTER_PORT, no
  WORLD_SIZE, no RANK.
- The leader is pod <group> of the StatefulSet <lws>, so its host name is <lws>-<group>; the
  workers of group g are the StatefulSet <lws>-<g>'s pods <lws>-<g>-<i>, i = 1..size-1 (a
  StatefulSet pod's host name is its pod name).
Here: LeaderWorkerSet "smoke", group 0, namespace "default", size 4, so LWS_LEADER_ADDRESS is
smoke-0.smoke.default, which every pod's /etc/hosts resolves to the leader (there is no cluster
DNS). The port is ncclsmoke's default, 29500, unless the user's template sets MASTER_PORT.

Two tests, each 4 pods running `ncclsmoke run` with exactly those variables:
- test_run_in_lws_group: every pod exits 0; rank 0's verdict passes with world.size 4,
  world.source "leaderworkerset", world.master_port 29500 (the default), and every rank's
  world.job_id is "smoke-0" with job_id_source "LWS_LEADER_ADDRESS".
- test_master_port_from_user: the same with MASTER_PORT=23456 added by the user's pod template:
  the same verdict, on port 23456.

Needs root and iproute2 (else exit 77). Usage: /usr/bin/python3 k8s_leaderworkerset_test.py --binary B
"""

import os
import sys

import k8s_pods
import suite

netns = k8s_pods.netns
BINARY = None
LWS = "smoke"
GROUP = 0
NAMESPACE = "default"
SIZE = 4
LEADER_ADDRESS = f"{LWS}-{GROUP}.{LWS}.{NAMESPACE}"
RUN_FLAGS = ["--transports", "socket", "--min-bytes", "64K", "--max-bytes", "64K",
             "--gate-bytes", "64K", "--iters", "2", "--connect-timeout", "20",
             "--join-timeout", "20", "--timeout", "40"]


def pod_names():
    return [f"{LWS}-{GROUP}"] + [f"{LWS}-{GROUP}-{i}" for i in range(1, SIZE)]


def controller_env(worker_index):
    """AddLWSVariables for pod `worker_index` of group GROUP."""
    return {"LWS_LEADER_ADDRESS": LEADER_ADDRESS,
            "LWS_GROUP_SIZE": SIZE,
            "LWS_WORKER_INDEX": worker_index}


class LeaderWorkerSet(suite.NamespaceCase):
    dir_prefix = "ncclsmoke-k8s-lws"

    def run_group(self, tag, extra_env, port):
        outs = [os.path.join(self.tmp, f"out{i}") for i in range(SIZE)]
        with netns.Testbed(SIZE, self.tmp, tag=tag) as bed:
            names = pod_names()
            # The headless Service answers <pod>.<lws>.<ns> for every pod of the set.
            k8s_pods.name_pods(bed, names,
                               {f"{n}.{LWS}.{NAMESPACE}": i for i, n in enumerate(names)})
            envs = [k8s_pods.pod_env(h, dict(controller_env(h.index), **extra_env))
                    for h in bed.hosts]
            cmds = [[BINARY, "run", "--out-dir", outs[i]] + RUN_FLAGS for i in range(SIZE)]
            rc, out = k8s_pods.run_pods(bed, cmds, envs, self.tmp, timeout_s=60)
        print(f"  pod exit codes: {rc}")
        g, local = k8s_pods.passing_verdicts(self, rc, out, outs, pod_names())
        self.assertEqual(g["world"]["size"], SIZE)
        self.assertEqual(g["world"]["source"], "leaderworkerset")
        self.assertEqual(g["world"]["master_port"], port)
        self.assertEqual(sorted(local), list(range(SIZE)))
        for r, v in local.items():
            self.assertEqual(v["world"].get("job_id"), f"{LWS}-{GROUP}", (r, v["world"]))
            self.assertEqual(v["world"].get("job_id_source"), "LWS_LEADER_ADDRESS",
                             (r, v["world"]))

    def test_run_in_lws_group(self):
        self.run_group("lws", {}, 29500)

    def test_master_port_from_user(self):
        self.run_group("lwsp", {"MASTER_PORT": 23456}, 23456)


def on_binary(path):
    global BINARY
    BINARY = path


if __name__ == "__main__":
    sys.exit(suite.main([LeaderWorkerSet], __doc__, on_binary))
