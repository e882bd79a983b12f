"""A JobSet on network namespaces: one replicated Job of 2 child Jobs x 2 pods, `ncclsmoke run`.

What the controllers give each pod, read in kubernetes-sigs/jobset and kubernetes/kubernetes:
- kubernetes-sigs/jobset pkg/controllers/jobset_controller.go (snapshot
  d9037389738e801f3ea1846a586c35e610934f05): constructJob names child Job <js>-<rjob>-<j>
  (placement.GenJobName) and, with network.enableDNSHostnames, sets the pod template's subdomain
  to GetSubdomain(js), the JobSet's name by default; labelAndAnnotateObject puts on the Job and
  on its pod template the label and annotation jobset.sigs.k8s.io/jobset-name, and
  jobset.sigs.k8s.io/job-global-index (globalJobIndex: the child Job's index across every
  replicated Job) and jobset.sigs.k8s.io/global-replicas (globalReplicas: the sum of all
  replicas). JobSet sets no environment variable itself. Its webhook
  (pkg/webhooks/jobset_webhook.go) defaults each replicated Job to completionMode Indexed.
- kubernetes/kubernetes pkg/controller/job (see k8s_indexed_job_test.py): an Indexed Job's pod
  gets JOB_COMPLETION_INDEX (its index inside its child Job) and, with a subdomain, the host name
  <job>-<index>, i.e. <js>-<rjob>-<j>-<p>, which answers as <js>-<rjob>-<j>-<p>.<js>.
Our manifests add, by the downward API: JOBSET_NAME (label jobset-name), JOBSET_JOB_GLOBAL_INDEX
(annotation job-global-index), JOBSET_GLOBAL_REPLICAS (annotation global-replicas); and the user
sets WORLD_SIZE (every pod of the JobSet), MASTER_ADDR=<js>-<rjob>-0-0.<js> and MASTER_PORT.
Rank = JOBSET_JOB_GLOBAL_INDEX * (WORLD_SIZE / JOBSET_GLOBAL_REPLICAS) + JOB_COMPLETION_INDEX.

Each pod here is a namespace with that host name, the <host>.<js> names in /etc/hosts (there is no
cluster DNS) and exactly those variables. Two tests:
- test_run_in_jobset_pods: pods js-w-0-0, js-w-0-1, js-w-1-0, js-w-1-1 run `ncclsmoke run`;
  every pod exits 0, rank 0's verdict.json passes with world.size 4 and world.source "jobset",
  ranks 0..3 on those 4 hosts in that order, and every rank's world.job_id is "js" with
  job_id_source "JOBSET_NAME".
- test_without_downward_api_env: the same pods without the three JOBSET_* variables (a JobSet
  whose manifest lacks our downward-API env): every pod exits non-zero well before the 30 s join
  timeout (no hang into RANKS_MISSING), and its verdict file (verdict.rank<N>.json or
  verdict.invalid-config.<pid>.json) has a CONFIG_MISSING finding whose variable is
  JOBSET_GLOBAL_REPLICAS and whose message mentions JobSet.

Needs root and iproute2 (else exit 77). Usage: /usr/bin/python3 k8s_jobset_test.py --binary B
"""

import glob
import os
import sys
import time

import k8s_pods
import suite

netns = k8s_pods.netns
BINARY = None
JOBSET = "js"
RJOB = "w"
JOBS = 2          # replicatedJobs[0].replicas
PODS_PER_JOB = 2  # parallelism = completions
WORLD = JOBS * PODS_PER_JOB
PORT = 29500
SMALL = ["--transports", "socket", "--min-bytes", "64K", "--max-bytes", "64K",
         "--gate-bytes", "64K", "--iters", "2"]


def pod_names():
    return [f"{JOBSET}-{RJOB}-{j}-{p}" for j in range(JOBS) for p in range(PODS_PER_JOB)]


def pod_env(index, downward_api=True):
    """Pod `index` (child Job index // PODS_PER_JOB, completion index % PODS_PER_JOB)."""
    j, p = divmod(index, PODS_PER_JOB)
    env = {"JOB_COMPLETION_INDEX": p,                       # the Job controller
           "WORLD_SIZE": WORLD,                             # the user
           "MASTER_ADDR": f"{JOBSET}-{RJOB}-0-0.{JOBSET}",
           "MASTER_PORT": PORT}
    if downward_api:                                        # our manifest's downward API
        env.update({"JOBSET_NAME": JOBSET,
                    "JOBSET_JOB_GLOBAL_INDEX": j,
                    "JOBSET_GLOBAL_REPLICAS": JOBS})
    return env


def verdict_files(out_dir):
    return sorted(glob.glob(os.path.join(out_dir, "verdict.rank*.json")) +
                  glob.glob(os.path.join(out_dir, "verdict.invalid-config.*.json")))


class JobSet(suite.NamespaceCase):
    dir_prefix = "ncclsmoke-k8s-js"

    def make_pods(self, bed):
        names = pod_names()
        k8s_pods.name_pods(bed, names, {f"{n}.{JOBSET}": i for i, n in enumerate(names)})

    def test_run_in_jobset_pods(self):
        outs = [os.path.join(self.tmp, f"out{i}") for i in range(WORLD)]
        with netns.Testbed(WORLD, self.tmp, tag="jsr") as bed:
            self.make_pods(bed)
            envs = [k8s_pods.pod_env(h, pod_env(h.index)) for h in bed.hosts]
            cmds = [[BINARY, "run", "--out-dir", outs[i], "--connect-timeout", "20",
                     "--join-timeout", "20", "--timeout", "40"] + SMALL for i in range(WORLD)]
            rc, out = k8s_pods.run_pods(bed, cmds, envs, self.tmp, timeout_s=60)
        print(f"  pod exit codes: {rc}")
        g, local = k8s_pods.passing_verdicts(self, rc, out, outs, pod_names())
        self.assertEqual(g["world"]["size"], WORLD)
        self.assertEqual(g["world"]["source"], "jobset")
        self.assertEqual({r["rank"]: r.get("host") for r in g["ranks"]},
                         dict(enumerate(pod_names())))
        self.assertEqual(sorted(local), list(range(WORLD)))
        for r, v in local.items():
            self.assertEqual(v["world"].get("job_id"), JOBSET, (r, v["world"]))
            self.assertEqual(v["world"].get("job_id_source"), "JOBSET_NAME", (r, v["world"]))

    def test_without_downward_api_env(self):
        outs = [os.path.join(self.tmp, f"out{i}") for i in range(WORLD)]
        with netns.Testbed(WORLD, self.tmp, tag="jsm") as bed:
            self.make_pods(bed)
            envs = [k8s_pods.pod_env(h, pod_env(h.index, downward_api=False)) for h in bed.hosts]
            cmds = [[BINARY, "run", "--out-dir", outs[i], "--connect-timeout", "30",
                     "--join-timeout", "30", "--timeout", "40"] + SMALL for i in range(WORLD)]
            t0 = time.monotonic()
            rc, out = k8s_pods.run_pods(bed, cmds, envs, self.tmp, timeout_s=45)
            wall = time.monotonic() - t0
        print(f"  pod exit codes: {rc}, all ended after {wall:.1f}s")
        for i in range(WORLD):
            self.assertNotEqual(rc[i], "hung", out[i][-2000:])
            self.assertNotEqual(rc[i], 0, out[i][-2000:])
        self.assertLess(wall, 15.0, "the pods waited instead of refusing the config at once:\n" +
                        out[0][-2000:])
        for i in range(WORLD):
            files = verdict_files(outs[i])
            self.assertTrue(files, f"pod {i} wrote no verdict file:\n{out[i][-2000:]}")
            findings = []
            for path in files:
                findings += suite.load_verdict(path)["findings"]
            self.assertNotIn("RANKS_MISSING", [f["code"] for f in findings], findings)
            hits = [f for f in findings if f["code"] == "CONFIG_MISSING" and
                    f.get("evidence", {}).get("variable") == "JOBSET_GLOBAL_REPLICAS"]
            self.assertTrue(hits, f"pod {i}: no CONFIG_MISSING for JOBSET_GLOBAL_REPLICAS: "
                                  f"{[(f['code'], f.get('evidence'), f['message']) for f in findings]}")
            self.assertTrue(any("JobSet" in f["message"] for f in hits),
                            [f["message"] for f in hits])


def on_binary(path):
    global BINARY
    BINARY = path


if __name__ == "__main__":
    sys.exit(suite.main([JobSet], __doc__, on_binary))
