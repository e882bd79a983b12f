"""Kubernetes "pods" on network namespaces, for the k8s_* launcher tests (stdlib, /usr/bin/python3).

A pod is a host of ../multihost/netns.py's Testbed (its own namespace, eth0 on a private /24, no
default route, its own /etc/hosts) renamed to the pod's host name (set with `unshare --uts` when
a process starts) and given the names a cluster's DNS would answer for it (a Service name, a
headless-Service name <host>.<subdomain>) in every pod's /etc/hosts. Each pod's process starts
with a container-like environment: PATH, HOME, HOSTNAME (the kubelet sets it to the pod's host
name), the API server's KUBERNETES_SERVICE_* (every pod has them) and exactly the variables the
test passes, nothing inherited from the test's own shell.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "multihost"))

import netns  # noqa: E402
import suite  # noqa: E402  (verdict loading with schema validation, NamespaceCase)


def name_pods(bed, names, dns=None):
    """Renames bed.hosts[i] to names[i]; `dns` maps extra names to a pod index (Service names).
    Every pod's /etc/hosts then lists every pod under its name and those extra names."""
    dns = dict(dns or {})
    for h, name in zip(bed.hosts, names):
        h.name = name
    lines = [f"{h.addr} {h.name}" for h in bed.hosts]
    lines += [f"{bed.hosts[i].addr} {extra}" for extra, i in dns.items()]
    for h in bed.hosts:
        path = os.path.join("/etc/netns", h.ns, "hosts")
        with open(path, "a") as f:
            f.write("\n".join(lines) + "\n")


def pod_env(host, variables, path_dirs=()):
    env = {"PATH": ":".join(list(path_dirs) + ["/usr/local/bin", "/usr/bin", "/bin",
                                                "/usr/sbin", "/sbin"]),
           "HOME": "/root", "HOSTNAME": host.name,
           # The kubelet gives every container the API server's Service variables, service
           # links or not (pkg/kubelet/kubelet_pods.go, getServiceEnvVarMap: the "kubernetes"
           # Service of the default namespace is always included).
           "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
           "KUBERNETES_SERVICE_PORT_HTTPS": "443"}
    env.update({k: str(v) for k, v in variables.items()})
    return env


def run_pods(bed, commands, envs, workdir, timeout_s):
    """Starts commands[i] in pod i with envs[i]; waits at most timeout_s for all of them (a pod
    still running then is killed and reported as "hung"). Returns ({i: rc}, {i: output})."""
    procs = {}
    for i, h in enumerate(bed.hosts):
        if commands[i] is None:
            continue
        procs[i] = h.start(commands[i], os.path.join(workdir, f"pod{i}"), env=envs[i])
    rc = {}

    def all_ended():
        for i, p in procs.items():
            if i not in rc and p.poll() is not None:
                rc[i] = p.returncode
        return len(rc) == len(procs)
    suite.poll_until(all_ended, timeout_s, 0.05)
    for i, p in procs.items():
        if i not in rc:
            bed.kill9(p)
            p.wait(timeout=5)
            rc[i] = "hung"
    out = {}
    for i in procs:
        text = ""
        for ext in (".out", ".err"):
            try:
                with open(os.path.join(workdir, f"pod{i}{ext}"), errors="replace") as f:
                    text += f.read()
            except OSError:
                pass
        out[i] = text
    return rc, out


def load_verdicts(*dirs):
    """(rank 0's global verdict or None, {rank: local verdict}) from the pods' out dirs."""
    glob_, local = None, {}
    for d in dirs:
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            path = os.path.join(d, name)
            if name == "verdict.json":
                glob_ = suite.load_verdict(path)
            elif name.startswith("verdict.rank") and name.endswith(".json"):
                v = suite.load_verdict(path)
                local[v["reporting_rank"]] = v
    return glob_, local


def passing_verdicts(case, rc, out, outs, names=None):
    """Asserts (on the unittest `case`) that every pod exited 0 and rank 0's verdict.json passes;
    returns (global verdict, {rank: local verdict}). `names`: the pods' host names, for messages."""
    for i in sorted(rc):
        who = f"pod {i}" + (f" ({names[i]})" if names else "")
        case.assertEqual(rc[i], 0, f"{who}:\n{out[i][-3000:]}")
    g, local = load_verdicts(*outs)
    case.assertIsNotNone(g, "rank 0 wrote no global verdict:\n" + out[0][-3000:])
    case.assertEqual(g["verdict"], "pass", suite.codes(g))
    return g, local
