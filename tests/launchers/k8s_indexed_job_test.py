"""The project's smoke CronJob as a Kubernetes Indexed Job on network namespaces: 3 pods.

What the Job controller gives each pod of a completionMode: Indexed Job, read in
kubernetes/kubernetes:
- pkg/controller/job/indexed_job_utils.go (78fc8e44052f699bf598f84b697b41e5a328c9c5),
  addCompletionIndexEnvVariable: JOB_COMPLETION_INDEX from the downward API (the pod's
  batch.kubernetes.io/job-completion-index label or annotation); addCompletionIndexAnnotation /
  podGenerateNameWithIndex: pod names <job>-<index>-<random>.
- pkg/controller/job/job_controller.go, manageJob: template.Spec.Hostname = "<job>-<index>"
  (commit not recorded in the search index), so with the pod's subdomain the pod answers to
  <job>-<index>.<subdomain> through the headless Service.
The world size is the pod spec's (completions), never the controller's: our CronJob passes it as
NCCLSMOKE_PODS (cronjob/k8s/base/cronjob.yaml), read here from that file.

Two tests:
- test_cronjob_pods: each pod runs cronjob/entrypoint.sh with the container env of
  cronjob/k8s/base/cronjob.yaml (valueFrom fields resolved as the kubelet would: the job-name
  label, spec.nodeName) plus JOB_COMPLETION_INDEX, and the CronJob's args with small sizes.
  Changed for a test machine: NCCLSMOKE_PODS/completions 3 (an overlay's job), the emptyDir
  paths (out, history) moved to the test's directory, and NCCLSMOKE_PUSHGATEWAY (a cluster DNS
  name) swapped for NCCLSMOKE_TEXTFILE_DIR so the index-0 pod still publishes. Asserts: every pod
  exits 0, rank 0's verdict passes with 3 ranks on 3 hosts, every rank carries the Job's name as
  its job id.
- test_run_in_indexed_job_pods: an Indexed Job whose pods run `ncclsmoke run` itself, with the
  controller's JOB_COMPLETION_INDEX and host name plus what such a pod template must add
  (WORLD_SIZE = completions, MASTER_ADDR = <job>-0.<subdomain>, MASTER_PORT). Asserts: pass,
  world source k8s-indexed-job, and the job id is the Job's name, taken from the host name.

Needs root and iproute2 (else exit 77). Usage: /usr/bin/python3 k8s_indexed_job_test.py --binary B
"""

import os
import sys

import yaml  # python3-yaml

import k8s_pods
import suite

netns = k8s_pods.netns
BINARY = None
JOB_TOKEN = "3f" * 32  # what `openssl rand -hex 32` gives: the Secret's one value
CRONJOB_YAML = os.path.join(suite.ROOT, "cronjob", "k8s", "base", "cronjob.yaml")
ENTRYPOINT = os.path.join(suite.ROOT, "cronjob", "entrypoint.sh")
PODS = 3
JOB = "ncclsmoke-29421440"  # a CronJob's Job: <cronjob>-<scheduled time in minutes>
SERVICE = "ncclsmoke"
SMALL = ["--min-bytes", "64K", "--max-bytes", "64K", "--gate-bytes", "64K", "--iters", "2"]


def cronjob_container():
    with open(CRONJOB_YAML) as f:
        doc = yaml.safe_load(f)
    pod = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return doc["spec"]["jobTemplate"]["spec"], pod, pod["containers"][0]


def resolve_env(container, index, node):
    """The container's env as the kubelet resolves it for pod `index` on `node`."""
    env = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = str(item["value"])
            continue
        ref = item["valueFrom"].get("secretKeyRef")
        if ref is not None:
            # The bundled PostgreSQL (base/history.yaml) is not run here: the history's own path
            # is proven by history_contract and the cronjob e2e test. Pods of this test get no
            # NCCLSMOKE_HISTORY / PG* variables, as if the Secret held none of these keys.
            # The job token's Secret holds one token for every pod, as `kubectl create secret`
            # in cronjob.yaml's comment makes it.
            if ref.get("name") == "ncclsmoke-job-token":
                env[item["name"]] = JOB_TOKEN
                continue
            if ref.get("name") not in ("ncclsmoke-history", "ncclsmoke-history-password"):
                raise AssertionError(f"cronjob.yaml: no test value for secret {ref.get('name')}")
            continue
        path = item["valueFrom"]["fieldRef"]["fieldPath"]
        if path == "spec.nodeName":
            env[item["name"]] = node
        elif path == "metadata.labels['batch.kubernetes.io/job-name']":
            env[item["name"]] = JOB
        elif path in ("metadata.labels['batch.kubernetes.io/job-completion-index']",
                      "metadata.annotations['batch.kubernetes.io/job-completion-index']"):
            env[item["name"]] = str(index)
        else:
            raise AssertionError(f"cronjob.yaml: no test value for fieldPath {path}")
    env["JOB_COMPLETION_INDEX"] = str(index)  # addCompletionIndexEnvVariable
    return env


def shorter_deadlines(args):
    """The CronJob's args with its minutes-long deadlines cut down for a test."""
    out, cut = [], {"--connect-timeout": "30", "--join-timeout": "30", "--timeout": "60"}
    i = 0
    while i < len(args):
        if args[i] in cut and i + 1 < len(args):
            out += [args[i], cut[args[i]]]
            i += 2
        else:
            out.append(args[i])
            i += 1
    return out


class IndexedJob(suite.NamespaceCase):
    dir_prefix = "ncclsmoke-k8s-ij"

    def make_pods(self, bed, subdomain):
        names = [f"{JOB}-{i}" for i in range(PODS)]
        k8s_pods.name_pods(bed, names, {f"{n}.{subdomain}": i for i, n in enumerate(names)})

    def test_cronjob_pods(self):
        job_spec, pod_spec, container = cronjob_container()
        self.assertEqual(pod_spec.get("subdomain"), SERVICE)
        self.assertEqual(job_spec.get("completionMode"), "Indexed")
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir)
        os.symlink(BINARY, os.path.join(bindir, "ncclsmoke"))  # the image's /usr/local/bin
        outs = [os.path.join(self.tmp, f"out{i}") for i in range(PODS)]
        with netns.Testbed(PODS, self.tmp, tag="ijc") as bed:
            self.make_pods(bed, SERVICE)
            envs, cmds = [], []
            for h in bed.hosts:
                env = resolve_env(container, h.index, f"node-{h.index}")
                self.assertIn("NCCLSMOKE_PODS", env)
                env["NCCLSMOKE_PODS"] = str(PODS)
                env["NCCLSMOKE_OUT_DIR"] = outs[h.index]
                env["NCCLSMOKE_HISTORY"] = os.path.join(self.tmp, "history.db")
                env.pop("NCCLSMOKE_PUSHGATEWAY", None)
                env["NCCLSMOKE_TEXTFILE_DIR"] = os.path.join(self.tmp, "textfile")
                os.makedirs(env["NCCLSMOKE_TEXTFILE_DIR"], exist_ok=True)
                envs.append(k8s_pods.pod_env(h, env, path_dirs=[bindir]))
                cmds.append(["/bin/sh", ENTRYPOINT] + shorter_deadlines(container.get("args", []))
                            + SMALL)
            rc, out = k8s_pods.run_pods(bed, cmds, envs, self.tmp, timeout_s=90)
        print(f"  pod exit codes: {rc}")
        for i in range(PODS):
            self.assertEqual(rc[i], 0, f"pod {i}:\n{out[i][-3000:]}")
        g, local = k8s_pods.load_verdicts(*outs)
        self.assertIsNotNone(g, out[0][-3000:])
        self.assertEqual(g["verdict"], "pass", suite.codes(g))
        self.assertEqual(g["world"]["size"], PODS)
        self.assertTrue(g["world"]["store"].get("authenticated"), g["world"].get("store"))
        self.assertEqual({r["rank"]: r.get("host") for r in g["ranks"]},
                         {i: f"{JOB}-{i}" for i in range(PODS)})
        self.assertEqual({r["rank"]: r.get("node") for r in g["ranks"]},
                         {i: f"node-{i}" for i in range(PODS)})
        self.assertEqual(sorted(local), list(range(PODS)))
        jobs = {r: (v["world"].get("job_id"), v["world"].get("job_id_source")) for r, v in
                local.items()}
        self.assertEqual({j for j, _ in jobs.values()}, {JOB}, jobs)

    def test_run_in_indexed_job_pods(self):
        outs = [os.path.join(self.tmp, f"out{i}") for i in range(PODS)]
        with netns.Testbed(PODS, self.tmp, tag="ijr") as bed:
            self.make_pods(bed, SERVICE)
            envs = [k8s_pods.pod_env(h, {"JOB_COMPLETION_INDEX": h.index,
                                         "WORLD_SIZE": PODS,
                                         "MASTER_ADDR": f"{JOB}-0.{SERVICE}",
                                         "MASTER_PORT": 29500}) for h in bed.hosts]
            cmds = [[BINARY, "run", "--transports", "socket", "--out-dir", outs[i],
                     "--connect-timeout", "30", "--join-timeout", "30", "--timeout", "60"] + SMALL
                    for i in range(PODS)]
            rc, out = k8s_pods.run_pods(bed, cmds, envs, self.tmp, timeout_s=90)
        print(f"  pod exit codes: {rc}")
        for i in range(PODS):
            self.assertEqual(rc[i], 0, f"pod {i}:\n{out[i][-3000:]}")
        g, local = k8s_pods.load_verdicts(*outs)
        self.assertIsNotNone(g, out[0][-3000:])
        self.assertEqual(g["verdict"], "pass", suite.codes(g))
        self.assertEqual(g["world"]["source"], "k8s-indexed-job")
        self.assertEqual(len({r.get("host") for r in g["ranks"]}), PODS)
        self.assertEqual(sorted(local), list(range(PODS)))
        for r, v in local.items():
            self.assertEqual(v["world"].get("job_id"), JOB, (r, v["world"]))
            self.assertEqual(v["world"].get("job_id_source"), "hostname (Indexed Job)")


def on_binary(path):
    global BINARY
    BINARY = path


if __name__ == "__main__":
    sys.exit(suite.main([IndexedJob], __doc__, on_binary))
