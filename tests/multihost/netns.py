"""Test hosts on network namespaces, for the multi-host tests (stdlib only, /usr/bin/python3).

A Testbed makes H hosts: one network namespace each, joined by a bridge that lives in a namespace
of its own, so nothing is added to the root namespace. Each host gets 10.<x>.<y>.<i>/24 on its
eth0 (a /24 that no root-namespace address or route uses), `lo` up, NO default route (nothing can
leave), its own hostname (via `unshare --uts` when a process is started), and its own
/etc/netns/<ns>/hosts and resolv.conf (`nameserver 127.0.0.1`, so no DNS query can leave either).

Safety rules (../../shared/TESTHOSTS.md): every process that sends traffic runs inside a host's
namespace; the root namespace never connects to a namespace address; every loop is bounded; and
the context manager removes everything it made (processes by PID, namespaces, /etc/netns dirs)
even on exceptions and KeyboardInterrupt. Namespace names are f"nsm{pid}x<suffix>"; a start-up
sweep removes leftovers of that scheme whose pid is no longer alive (crashed earlier runs).
"""

import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time

NS_PREFIX = "nsm"
_NS_RE = re.compile(r"^nsm(\d+)x[a-z0-9]+$")
_ETC_NETNS = "/etc/netns"


def _run(args, check=True, timeout=20):
    """Runs a short command (ip, iptables, tc) with a deadline; returns CompletedProcess."""
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
    return p


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exit_on_sigterm():
    """SIGTERM (ctest, CI cancel) raises SystemExit, so every Testbed's cleanup still runs."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)


def list_namespaces():
    p = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def sweep_stale(log=print):
    """Deletes namespaces (and /etc/netns dirs) of our naming scheme left by dead processes."""
    removed = []
    for ns in list_namespaces():
        m = _NS_RE.match(ns)
        if not m:
            continue
        pid = int(m.group(1))
        if pid != os.getpid() and _pid_alive(pid):
            continue  # another live test process owns it
        _kill_pids_in_ns(ns)
        _run(["ip", "netns", "del", ns], check=False)
        removed.append(ns)
    if os.path.isdir(_ETC_NETNS):
        for d in os.listdir(_ETC_NETNS):
            m = _NS_RE.match(d)
            if m and (int(m.group(1)) == os.getpid() or not _pid_alive(int(m.group(1)))):
                shutil.rmtree(os.path.join(_ETC_NETNS, d), ignore_errors=True)
    if removed:
        log(f"netns: removed stale namespaces {removed}")
    return removed


def _kill_pids_in_ns(ns):
    p = _run(["ip", "netns", "pids", ns], check=False)
    for tok in p.stdout.split():
        try:
            os.kill(int(tok), signal.SIGKILL)
        except (ValueError, ProcessLookupError, PermissionError):
            pass


def netns_usable():
    """(True, "") when we are root and `ip netns add` works; else (False, reason)."""
    if os.geteuid() != 0:
        return False, "network-namespace tests need root (geteuid() != 0)"
    if shutil.which("ip") is None:
        return False, "iproute2 `ip` is not installed"
    probe = f"{NS_PREFIX}{os.getpid()}xprobe"
    p = _run(["ip", "netns", "add", probe], check=False)
    if p.returncode != 0:
        return False, f"`ip netns add` failed: {p.stderr.strip()}"
    _run(["ip", "netns", "del", probe], check=False)
    return True, ""


def _used_networks():
    """Every IPv4 network the root namespace has an address or a route for (default excluded)."""
    nets = []
    p = _run(["ip", "-o", "-4", "addr", "show"], check=False)
    for m in re.finditer(r"inet (\d+\.\d+\.\d+\.\d+/\d+)", p.stdout):
        nets.append(ipaddress.ip_network(m.group(1), strict=False))
    p = _run(["ip", "-4", "route", "show", "table", "all"], check=False)
    for line in p.stdout.splitlines():
        tok = line.split()
        if not tok:
            continue
        dest = tok[1] if tok[0] in ("local", "broadcast", "unicast", "multicast") and len(tok) > 1 else tok[0]
        if dest == "default":
            continue
        try:
            nets.append(ipaddress.ip_network(dest, strict=False))
        except ValueError:
            pass
    return nets


def pick_subnet():
    """A 10.x.y.0/24 that overlaps no root-namespace address or route; varies with our pid."""
    used = _used_networks()
    pid = os.getpid()
    for attempt in range(256):
        x = 200 + (pid + attempt) % 50
        y = (pid // 50 + attempt * 7) % 256
        net = ipaddress.ip_network(f"10.{x}.{y}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free 10.x.y.0/24 for the test hosts")


class Host:
    def __init__(self, bed, index, ns, name, addr):
        self.bed, self.index, self.ns, self.name, self.addr = bed, index, ns, name, addr

    def __repr__(self):
        return f"Host({self.name}, {self.ns}, {self.addr})"

    # -- commands inside the namespace -------------------------------------------------------
    def exec_args(self, argv):
        """argv wrapped to run inside this host: its namespace and its own hostname."""
        return ["ip", "netns", "exec", self.ns, "unshare", "--uts", "sh", "-c",
                'hostname "$1" && shift && exec "$@"', "sh", self.name] + list(argv)

    def run(self, argv, check=True, timeout=20):
        return _run(["ip", "netns", "exec", self.ns] + list(argv), check=check, timeout=timeout)

    def start(self, argv, log_prefix, env=None):
        """Starts argv in this host; stdout/stderr go to <log_prefix>.out/.err. Returns Popen."""
        return self.bed.start(self, argv, log_prefix, env)

    def route_dev(self, addr):
        """The device `ip route get addr` picks inside this host (must be eth0 or lo)."""
        out = self.run(["ip", "route", "get", str(addr)]).stdout
        m = re.search(r"\bdev (\S+)", out)
        return (m.group(1) if m else ""), out.strip()

    # -- firewall ------------------------------------------------------------------------------
    def iptables(self, *rule):
        self.run(["iptables", "-w", "5"] + list(rule))

    # Rules match eth0 only, like a security group: the host's own loopback traffic (rank 0
    # reaching its own store over 127.0.0.1) is not filtered.
    def drop_port(self, port, iface="eth0"):
        """Security-group style: incoming TCP to `port` is dropped (the connect times out)."""
        self.iptables("-A", "INPUT", "-i", iface, "-p", "tcp", "--dport", str(port), "-j", "DROP")

    def reject_port(self, port, iface="eth0"):
        """Incoming TCP to `port` is answered with a reset (the connect is refused at once)."""
        self.iptables("-A", "INPUT", "-i", iface, "-p", "tcp", "--dport", str(port), "-j",
                      "REJECT", "--reject-with", "tcp-reset")

    def drop_port_range(self, lo, hi, iface="eth0"):
        self.iptables("-A", "INPUT", "-i", iface, "-p", "tcp", "--dport", f"{lo}:{hi}", "-j",
                      "DROP")

    def drop_all_new_tcp_except(self, port):
        """New incoming TCP connections on eth0 are dropped, except to `port` (replies to our own
        outgoing connections still arrive: only SYNs are matched)."""
        self.iptables("-A", "INPUT", "-i", "eth0", "-p", "tcp", "--syn", "!", "--dport", str(port),
                      "-j", "DROP")

    def flush_firewall(self):
        self.iptables("-F", "INPUT")

    # -- link ----------------------------------------------------------------------------------
    def shape(self, rate="200mbit", burst="32kbit", latency="400ms"):
        """Shapes this host's egress with tbf (netem is not available on these kernels)."""
        self.run(["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst",
                  burst, "latency", latency])

    def unshape(self):
        self.run(["tc", "qdisc", "del", "dev", "eth0", "root"], check=False)

    def link(self, up):
        self.run(["ip", "link", "set", "eth0", "up" if up else "down"])


class Testbed:
    """`with Testbed(4, workdir) as bed:` -> bed.hosts[0..3]; everything is removed on exit."""

    def __init__(self, n_hosts, workdir, tag="t", log=print, extra_hosts=None):
        if n_hosts < 1 or n_hosts > 200:
            raise ValueError("1..200 hosts")
        self.n_hosts = n_hosts
        self.workdir = workdir
        self.tag = re.sub(r"[^a-z0-9]", "", tag.lower())[:4] or "t"
        self.log = log
        self.extra_hosts = dict(extra_hosts or {})  # name -> address, added to every hosts file
        self.prefix = f"{NS_PREFIX}{os.getpid()}x{self.tag}"
        self.bridge_ns = f"{self.prefix}br"
        self.hosts = []
        self.procs = []
        self._made_ns = []
        self._made_etc = []
        self._made_etc_root = False
        self.subnet = None

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self):
        try:
            self._create()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False

    def _add_ns(self, ns):
        _run(["ip", "netns", "add", ns])
        self._made_ns.append(ns)
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def _create(self):
        os.makedirs(self.workdir, exist_ok=True)
        self.subnet = pick_subnet()
        base = self.subnet.network_address
        self._add_ns(self.bridge_ns)
        _run(["ip", "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge"])
        _run(["ip", "-n", self.bridge_ns, "link", "set", "br0", "up"])
        names = {f"host{i}": str(base + 1 + i) for i in range(self.n_hosts)}
        for i in range(self.n_hosts):
            ns = f"{self.prefix}h{i}"
            name = f"host{i}"
            addr = str(base + 1 + i)
            self._write_etc(ns, names)
            self._add_ns(ns)
            # Both veth ends are made from inside the bridge namespace: the root namespace never
            # holds either of them, even for a moment.
            veth = f"v{i}"
            _run(["ip", "-n", self.bridge_ns, "link", "add", veth, "type", "veth", "peer", "name",
                  "eth0", "netns", ns])
            _run(["ip", "-n", self.bridge_ns, "link", "set", veth, "master", "br0"])
            _run(["ip", "-n", self.bridge_ns, "link", "set", veth, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{addr}/{self.subnet.prefixlen}", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            self.hosts.append(Host(self, i, ns, name, addr))
        self._verify()

    def _write_etc(self, ns, names):
        d = os.path.join(_ETC_NETNS, ns)
        if not os.path.isdir(_ETC_NETNS):
            os.makedirs(_ETC_NETNS)
            self._made_etc_root = True
        os.makedirs(d, exist_ok=True)
        self._made_etc.append(d)
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        for name, addr in list(names.items()) + list(self.extra_hosts.items()):
            lines.append(f"{addr} {name}")
        with open(os.path.join(d, "hosts"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(d, "resolv.conf"), "w") as f:
            f.write("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")

    def _verify(self):
        """Every host reaches every host's address over eth0 (or lo for itself), has no default
        route, and a root-namespace-looking address is unroutable from inside."""
        for h in self.hosts:
            routes = h.run(["ip", "route", "show"]).stdout
            if "default" in routes:
                raise RuntimeError(f"{h.ns} has a default route: {routes}")
            for peer in self.hosts:
                dev, out = h.route_dev(peer.addr)
                want = "lo" if peer is h else "eth0"
                if dev != want:
                    raise RuntimeError(f"{h.ns}: route to {peer.addr} is not via {want}: {out}")
            p = h.run(["ip", "route", "get", "192.0.2.1"], check=False)
            if p.returncode == 0:
                raise RuntimeError(f"{h.ns} can route outside its subnet: {p.stdout.strip()}")
        # The bridge namespace has no addresses and no routes at all.
        if _run(["ip", "-n", self.bridge_ns, "-4", "route", "show"]).stdout.strip():
            raise RuntimeError("the bridge namespace has routes")

    def start(self, host, argv, log_prefix, env=None):
        out = open(log_prefix + ".out", "wb")
        err = open(log_prefix + ".err", "wb")
        try:
            p = subprocess.Popen(host.exec_args(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                 env=env, start_new_session=True)
        finally:
            out.close()
            err.close()
        p.host = host
        p.started_at = time.monotonic()
        self.procs.append(p)
        return p

    def kill9(self, proc):
        """SIGKILLs the started process itself (the `ip netns exec` wrapper execs down to it: ip
        exec()s unshare, which exec()s sh, which exec()s the command, so the PID is the rank's)."""
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.log(f"netns: pid {p.pid} did not exit after SIGKILL")
        for ns in reversed(self._made_ns):
            _kill_pids_in_ns(ns)
            _run(["ip", "netns", "del", ns], check=False)
        self._made_ns = []
        for d in self._made_etc:
            shutil.rmtree(d, ignore_errors=True)
        self._made_etc = []
        if self._made_etc_root:
            try:
                os.rmdir(_ETC_NETNS)  # only if we made it and it is empty again
            except OSError:
                pass
        left = [ns for ns in list_namespaces() if ns.startswith(self.prefix)]
        if left:
            self.log(f"netns: namespaces left after cleanup: {left}")
