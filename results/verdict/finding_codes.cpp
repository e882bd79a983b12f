#include "results/verdict/finding_codes.h"

#include "results/verdict/finding_text.h"

#include <algorithm>
#include <stdexcept>

namespace ncclsmoke::results {

namespace {

const std::vector<FindingCode> kCodes = {
    // --- config -----------------------------------------------------------------------------
    {Code::CONFIG_INVALID, Severity::error, Layer::config, Outcome::degraded,
     "A flag or launcher variable has a value ncclsmoke cannot use; the run stopped before "
     "touching the network.",
     "Fix {variable} (value {value}): {fix}"},
    {Code::CONFIG_MISSING, Severity::error, Layer::config, Outcome::degraded,
     "Something the run needs (rank, world size, master address or port) was given neither by "
     "flag nor by the launcher's environment.",
     "Set {variable} or pass {flag}; under Kubernetes check the Job's env and the downward API."},
    {Code::CONFIG_SKEW, Severity::warning, Layer::config, Outcome::degraded,
     "Some ranks run with a communication stack or settings other than the majority's: a "
     "variable that shapes the transports (NCCL_*, FI_*, OFI_*, OMPI_MCA_*, UCX_*) set "
     "differently or missing, or another NCCL, plugin, CUDA, libfabric, MPI or ncclsmoke. "
     "Each item is one finding naming the odd ranks and hosts; the values by rank are in the "
     "evidence.",
     "Make every rank run the same stack and settings for {item}: fix the node image or the job's "
     "environment (the pod spec or policy that injects it, the Slurm script), then run again."},
    {Code::ENV_POLICY, Severity::warning, Layer::config, Outcome::degraded,
     "A rank runs without a variable the profile's environment policy wants, or with another "
     "value (a missing NCCL_SOCKET_IFNAME or FI_PROVIDER is found here in a minute, not from a "
     "training job's logs). One finding per variable, naming each rank off it with what it has.",
     "Set {variable} ({wanted}) on the named ranks: in the pod spec, the policy that injects the "
     "job's defaults (a Kyverno mutate rule), or the Slurm script; the profile {profile} wants "
     "it."},
    {Code::HOST_EXCLUDED, Severity::error, Layer::config, Outcome::degraded,
     "A rank runs on a host that was set aside (--exclude-hosts, or the suspects file of an earlier "
     "failing run given to --exclude-file): the job was placed on a node known to be bad, so the run "
     "stopped after the join instead of testing it again.",
     "Reschedule without {hosts} (Slurm: --exclude; Kubernetes: cordon the node or an anti-affinity "
     "rule), or, once the node is repaired, remove it from {source}."},
    // --- rendezvous -------------------------------------------------------------------------
    {Code::RENDEZVOUS_DNS, Severity::error, Layer::rendezvous, Outcome::degraded,
     "The master's name did not resolve within the deadline; this is DNS, not TCP reachability.",
     "Check that {master} exists (headless Service published, pod Ready, subdomain matches) and "
     "that CoreDNS answers from this node."},
    {Code::RENDEZVOUS_REFUSED, Severity::error, Layer::rendezvous, Outcome::degraded,
     "The master's host answered the connection with a reset: it is up, but nothing listens on the "
     "port or a REJECT rule is in the way.",
     "Check that rank 0 is running and listens on {master}, that MASTER_PORT is the same on every "
     "rank, and for REJECT rules on that port."},
    {Code::RENDEZVOUS_TIMEOUT, Severity::error, Layer::rendezvous, Outcome::degraded,
     "Nothing answered the connection to the master before the deadline: the SYN was dropped. "
     "This is the signature of a security group or NetworkPolicy that blocks the port.",
     "Allow TCP {master} from every node to rank 0's host (e.g. restore the security group's "
     "self-referencing rule, or the NetworkPolicy ingress for the job's pods)."},
    {Code::RENDEZVOUS_STALLED, Severity::error, Layer::rendezvous, Outcome::degraded,
     "The master's store accepted the TCP connection but never answered the handshake or the "
     "first request: the process is stopped (SIGSTOP, a debugger), swapping or overloaded. Not a "
     "firewall: a dropped SYN never lets the connection complete (that is RENDEZVOUS_TIMEOUT).",
     "Look at rank 0's process behind {master}: its state (T = stopped, D = blocked in I/O), CPU "
     "and memory pressure (swap), an attached debugger or a frozen container."},
    {Code::RENDEZVOUS_UNREACHABLE, Severity::error, Layer::rendezvous, Outcome::degraded,
     "The network reported no route to the master (host or network unreachable).",
     "Check routes and subnets between this node and {master}; the address may belong to a "
     "network this node is not attached to."},
    {Code::RANKS_MISSING, Severity::error, Layer::rendezvous, Outcome::degraded,
     "Some ranks never joined the rendezvous before the deadline.",
     "Check that the pods/processes for the named ranks started (pending pod, crash loop, "
     "wrong WORLD_SIZE on the launcher) and can reach {master}."},
    {Code::WORLD_MISMATCH, Severity::error, Layer::rendezvous, Outcome::degraded,
     "Ranks disagree about the world: a different world size, a duplicate rank, or a rank outside "
     "the world joined the same store.",
     "Make WORLD_SIZE and the rank assignment identical on every rank; check for a leftover job "
     "using the same master address and port."},
    {Code::STORE_FOREIGN_JOB, Severity::error, Layer::rendezvous, Outcome::degraded,
     "The rank reached a store that belongs to another job (two jobs on one MASTER_ADDR:PORT); "
     "it did not touch that job's keys, and that job is not affected.",
     "Give every job its own MASTER_PORT (port {port} is shared by job {this_job} and job "
     "{other_job}); under Slurm leave MASTER_PORT unset and ncclsmoke derives one from "
     "SLURM_JOB_ID."},
    {Code::STORE_TAMPERED, Severity::error, Layer::rendezvous, Outcome::degraded,
     "A value in the store failed the job token's verification (NCCLSMOKE_JOB_TOKEN): someone "
     "who does not hold the token wrote it (a stranger on the cluster network, or a rank given "
     "another token). The rank ignored it, as if the key were not there; what it would have "
     "claimed (a verdict, a roster, an address, sweep figures) is not in this verdict.",
     "Find who else writes to the store at {master} (key {key}) and restrict who can reach "
     "MASTER_PORT (NetworkPolicy, security group); make sure every rank of the job gets the same "
     "token (one Secret, or `ncclsmoke launch`'s own)."},
    {Code::RENDEZVOUS_LOST, Severity::error, Layer::rendezvous, Outcome::degraded,
     "The connection to the rendezvous store broke after the rank had joined.",
     "Check whether rank 0 ({master}) was killed, OOM-killed or evicted, or whether a connection "
     "tracking / idle timeout cut the connection."},
    {Code::STORE_FULL, Severity::error, Layer::rendezvous, Outcome::degraded,
     "The store refused a request or a connection because one of its store-wide limits was "
     "reached (keys, total bytes, connections); the refused client only saw its connection "
     "closed or refused, so its own error reads as a lost or refused store.",
     "Raise {flag} (now {value}) where the store is served, or find what fills it: the last "
     "refused client was {peer}; under `ncclsmoke run` the store lives in rank 0's process."},
    // --- mesh -------------------------------------------------------------------------------
    {Code::MESH_BLOCKED, Severity::error, Layer::mesh, Outcome::degraded,
     "Ranks can reach the master but not each other on the probed pairs; a collective would hang "
     "on these pairs.",
     "Open the rank-to-rank ports (NCCL/Gloo use ephemeral ports) between the named hosts; "
     "suspect host: {suspect}."},
    {Code::MESH_INCOMPLETE, Severity::warning, Layer::mesh, Outcome::inconclusive,
     "The mesh probe's deadline ended before every probed pair was tried or answered; the pairs "
     "left are not tested (neither passed nor blocked), and ranks still probing are not lost.",
     "Raise --mesh-timeout (it was {timeout} for {ranks} ranks), or look for an overloaded host "
     "(CPU, many ranks per node); a blocked path shows as MESH_BLOCKED, not as this."},
    {Code::MTU_MISMATCH, Severity::error, Layer::mesh, Outcome::degraded,
     "Packets as large as the interface MTU do not cross the path between the named hosts, while "
     "small ones do: a path-MTU black hole (a switch port, bridge, tunnel or VPC with a smaller MTU "
     "that drops instead of answering). Collectives stall on their first full-size segment. The "
     "mesh finds it with don't-fragment datagrams, so the transports are not run on it.",
     "Make the MTU the same end to end: the host's interface says {local_mtu}, the path carries at "
     "most {path_mtu}; fix the smaller hop (switch, bridge, CNI/overlay MTU) or lower the "
     "interface MTU on {hosts}."},
    // --- run --------------------------------------------------------------------------------
    {Code::PEER_LOST, Severity::error, Layer::run, Outcome::degraded,
     "A rank that had joined disappeared mid-run (killed, crashed, or its connection reset).",
     "Look at the named rank's pod/process (exit code, OOM, eviction) and at its node's kernel log."},
    {Code::PEER_STALLED, Severity::error, Layer::run, Outcome::degraded,
     "A rank that had joined stopped answering, not even the liveness heartbeat, while its "
     "connections stayed open: the process is frozen (SIGSTOP, a debugger), swapping or starved. "
     "Every collective waits on it; the ranks that time out next to it are not the cause.",
     "Check the named rank's process state on its host (state T = stopped, an attached debugger), "
     "its memory pressure and swap, and its CPU; its neighbours' timeouts follow from it."},
    {Code::RUN_TIMEOUT, Severity::error, Layer::run, Outcome::degraded,
     "The whole run exceeded its global deadline; the phase that was running is named.",
     "Raise the deadline only if the phase is known to be slow here; otherwise treat it as a hang "
     "in {phase}."},
    {Code::RUN_TERMINATED, Severity::error, Layer::run, Outcome::inconclusive,
     "The rank was stopped by a signal (SIGTERM/SIGINT) before it finished: its launcher's time "
     "limit (a Kubernetes Job's activeDeadlineSeconds, Slurm's --time, mpirun's --timeout), a "
     "cancelled job or deleted pod, or an operator; the message names the likely one for the "
     "launcher. The verdict holds what was done so far.",
     "Look at the last phase that finished in this rank's verdict: a run that keeps being killed "
     "there is hanging in that phase; if the deadline is simply too short, {deadline_fix}."},
    {Code::RESULTS_MISSING, Severity::warning, Layer::run, Outcome::inconclusive,
     "A rank's local verdict never reached rank 0, so its measurements are missing from the "
     "global verdict.",
     "Read the named rank's local verdict file and log; it holds that rank's own view."},
    {Code::VERDICT_DISPROVED, Severity::error, Layer::run, Outcome::inconclusive,
     "The verdict posted to the store for a rank contradicts what rank 0 itself observed of that "
     "rank (its host, the hosts of the job, the world size it joined with): someone else wrote "
     "it, or the rank's process is not the one that joined. Rank 0 set it aside and judged "
     "without it; the rank's own verdict file still holds what it saw.",
     "Read the named rank's local verdict file (written on its own host) and compare; find who "
     "else reaches MASTER_PORT (NetworkPolicy, security group) and set a job token "
     "(NCCLSMOKE_JOB_TOKEN) so a stranger's posts are refused."},
    // --- transport --------------------------------------------------------------------------
    {Code::TRANSPORT_INIT_FAILED, Severity::error, Layer::transport, Outcome::degraded,
     "A transport failed to initialise (NCCL or libfabric init, communicator creation); its own "
     "last error is in the evidence.",
     "Read the library's error in the evidence; check the interface chosen ({interface}) and "
     "NCCL_SOCKET_IFNAME / FI_PROVIDER."},
    {Code::TRANSPORT_UNAVAILABLE, Severity::warning, Layer::transport, Outcome::inconclusive,
     "A transport that was asked for does not exist on this node (no such libfabric provider, no "
     "MPI, no GPU for NCCL).",
     "Install or enable {transport} on the node image, or stop requesting it for this node class."},
    {Code::TRANSPORT_TIMEOUT, Severity::error, Layer::transport, Outcome::degraded,
     "A collective did not complete within its deadline and was aborted.",
     "A peer or a path is stuck: look at the named ranks' hosts and at MESH findings; raise the "
     "deadline only for very large message sizes."},
    {Code::SILENT_FALLBACK, Severity::error, Layer::transport, Outcome::degraded,
     "The bytes went over a slower transport than the one expected (e.g. Socket instead of EFA), "
     "usually because a plugin or driver is missing.",
     "Expected {expected}, observed {observed}: check the NCCL network plugin (aws-ofi-nccl), "
     "FI_PROVIDER, and the device plugin on the node."},
    {Code::BANDWIDTH_REGRESSION, Severity::warning, Layer::transport, Outcome::degraded,
     "Bus bandwidth at the gate size is below the baseline's tolerance (severity error below the "
     "second threshold).",
     "Compare with the baseline in the verdict; look for a degraded link, a changed instance type, "
     "or noisy neighbours on {hosts}."},
    {Code::STRAGGLER, Severity::warning, Layer::transport, Outcome::degraded,
     "One rank's collective times are far from its peers'; the whole job runs at its speed.",
     "Check the named host's NIC (errors, link speed), CPU throttling and co-located workloads."},
    {Code::SLOW_HOST, Severity::warning, Layer::transport, Outcome::degraded,
     "Most links of the named host are far worse than the links between the other hosts (time, "
     "time blocked sending or retransmits, measured per peer in this run, no baseline needed), or the liveness "
     "watches of several other hosts saw its ranks go quiet behind retransmits: the host, not one "
     "cable, slows every collective it is part of.",
     "Set {hosts} aside for this job (--exclude-hosts, Slurm drain) and check its NIC: link speed and "
     "errors (ethtool -S), packet loss, a rate limit, CPU throttling; the per-link figures are in the "
     "evidence."},
    {Code::SLOW_LINK, Severity::warning, Layer::transport, Outcome::degraded,
     "One pair of hosts is far slower than the links between other hosts while both ends are fine "
     "with their other partners: the path between them (a cable, a switch port, a route), not a "
     "host. With two hosts (nothing to compare with), a link that retransmits 2% or more of what "
     "it sent: either end or the path, neither set aside.",
     "Check the path between {hosts} (switch ports, cabling, routes); both hosts are fine with other "
     "partners, so setting either aside is not needed. With two hosts, run each against a third "
     "host to tell which one it is."},
    {Code::BELOW_LINE_RATE, Severity::warning, Layer::transport, Outcome::degraded,
     "A transport's best bus bandwidth at its largest size is a small fraction of what the slowest "
     "interface in the world says it can carry (its link speed): a rate limit, packet loss, or the "
     "bytes taking a slower path than the one expected. Needs no baseline: it is the first run's "
     "expectation.",
     "Compare the figures in the evidence: look for a rate limit or loss on the hosts (tc, ethtool "
     "-S), and for the path the transport really used (its identity row); --pairwise=always tells "
     "which host or link, where there are more than two hosts."},
    // --- data -------------------------------------------------------------------------------
    {Code::DATA_CORRUPTION, Severity::error, Layer::data, Outcome::degraded,
     "An all-reduce returned wrong values; the count of wrong elements per rank is in the evidence.",
     "Do not train on these nodes; drain the named hosts and check GPU/NIC health (ECC, link "
     "errors) before reuse."},
    // --- judging ----------------------------------------------------------------------------
    {Code::GPU_XID, Severity::error, Layer::node, Outcome::degraded,
     "The NVIDIA driver logged a GPU fault in a rank's kernel log (NVRM: Xid). 48, 64, 74, 79 and "
     "95 mean the GPU needs a reset or replacing (error, the host a suspect); others, often an "
     "application's fault, are warnings. The kernel keeps the lines since boot: the finding says "
     "when it was logged.",
     "Cordon {host} and take the GPU at PCI:{pci} out of service (nvidia-smi -q on that node; a "
     "reset or a replacement for Xid {xid}), then reboot it before it runs jobs again; the Xid's "
     "meaning is in NVIDIA's Xid catalogue."},
    {Code::GPU_HEALTH, Severity::error, Layer::node, Outcome::degraded,
     "What NVML says of a GPU on a rank's node: lost, uncorrected ECC errors since the driver "
     "loaded, a row remap or page retirement waiting for a reset, a row remap that failed "
     "(errors, the node a suspect); a PCIe link narrower than it can train, clocks held down by "
     "a hardware slowdown, heat or a power brake (warnings); a node that sees fewer GPUs than "
     "most nodes (an error); NVML that cannot start beside a driver (a warning).",
     "Cordon {host} and check the GPU {gpu}: nvidia-smi -q -d ECC,ROW_REMAPPER,PCIE,PERFORMANCE "
     "on that node; a pending remap or retirement needs a GPU reset (or a reboot), a failed remap "
     "or a lost GPU a replacement; a narrow PCIe link a reseat."},
    {Code::NIC_DOWN, Severity::error, Layer::node, Outcome::degraded,
     "An RDMA port is not ACTIVE on a host where the same port is ACTIVE on other hosts of the "
     "job: a cable, a transceiver, a switch port or the subnet manager left that host a rail "
     "short, and NCCL spreads its channels over the ports it finds. A port down on every host is "
     "cabled nowhere and is not named.",
     "Check {port} on {host}: ibstat {device} (or `rdma link show`), the cable and the switch "
     "port; cordon {host} until the port is ACTIVE again."},
    {Code::NIC_ERRORS, Severity::warning, Layer::node, Outcome::degraded,
     "A network device's error counters moved during the run: InfiniBand symbol or receive "
     "errors, a link that went down or retrained (an error), retries that ran out, EFA's dropped "
     "packets, an interface's errors or drops. The counters are attached to the link or host "
     "finding they explain.",
     "Check {device} on {host}: the cable and transceiver (symbol errors, link downs), the switch "
     "port's own counters, and `ethtool -S` / `perfquery` on that node; a link that went down "
     "during the run means cordon {host} until it holds."},
    {Code::BASELINE_MISSING, Severity::warning, Layer::run, Outcome::inconclusive,
     "Bandwidth could not be judged: no baseline band for this (transport, world size, profile), "
     "the run's sweep did not include the band's gate size, or nothing was measured.",
     "The finding's own hint names which: no band -> record healthy runs and run `ncclsmoke "
     "baseline learn` for profile {profile}; gate size not measured -> widen "
     "--min-bytes/--max-bytes to include it (or use --gate)."},
};

}  // namespace

const std::vector<FindingCode>& finding_codes() { return kCodes; }

const FindingCode* find_code(Code code) {
  auto i = static_cast<std::size_t>(code);
  // The table is in enumerator order (enums.h); the results tests check it.
  if (i < kCodes.size() && kCodes[i].code == code) return &kCodes[i];
  for (const auto& c : kCodes) {
    if (c.code == code) return &c;
  }
  return nullptr;
}

const FindingCode* find_code(const AnyCode& code) { return find_code(code.code()); }

const FindingCode* find_code(std::string_view code) {
  auto c = parse_code(code);
  return c ? find_code(*c) : nullptr;
}

std::string fill_template(std::string_view tmpl, const std::map<std::string, std::string>& vars) {
  std::string out;
  out.reserve(tmpl.size());
  size_t i = 0;
  while (i < tmpl.size()) {
    if (tmpl[i] == '{') {
      size_t close = tmpl.find('}', i + 1);
      if (close != std::string_view::npos) {
        std::string name(tmpl.substr(i + 1, close - i - 1));
        auto it = vars.find(name);
        out += it != vars.end() ? it->second : "<" + name + ">";
        i = close + 1;
        continue;
      }
    }
    out += tmpl[i++];
  }
  return out;
}

Finding make_finding(Code code, std::string message, std::vector<int> ranks,
                     std::vector<std::string> hosts,
                     const std::map<std::string, std::string>& hint_vars) {
  const FindingCode* c = find_code(code);
  if (!c) throw std::invalid_argument("make_finding: Code::unknown is not a finding code");
  Finding f;
  f.code = c->code;
  f.severity = c->severity;
  f.layer = c->layer;
  f.ranks = std::move(ranks);
  f.hosts = std::move(hosts);
  f.message = std::move(message);
  f.hint = fill_template(c->hint, hint_vars);
  if (f.ranks.size() > kMaxListedRanks) cap_listed_ranks(f);
  return f;
}

void cap_listed_ranks(Finding& f) {
  std::sort(f.ranks.begin(), f.ranks.end());
  f.ranks.erase(std::unique(f.ranks.begin(), f.ranks.end()), f.ranks.end());
  if (f.ranks.size() <= kMaxListedRanks) return;
  std::size_t total = f.ranks.size();
  if (f.evidence.is_object() && f.evidence.contains("ranks_total") &&
      f.evidence["ranks_total"].is_number_unsigned())
    total = std::max(total, f.evidence["ranks_total"].get<std::size_t>());
  if (!f.evidence.is_object()) f.evidence = nlohmann::json::object();
  f.evidence["ranks_total"] = total;
  f.ranks.resize(kMaxListedRanks);
}

Finding make_finding_about(Code code, Subject subject, std::string message_template,
                           std::vector<int> ranks, std::vector<std::string> hosts,
                           const std::map<std::string, std::string>& hint_vars) {
  Finding f = make_finding(code, std::string(), std::move(ranks), std::move(hosts), hint_vars);
  f.subject = std::move(subject);
  f.message_template = std::move(message_template);
  render(f);
  return f;
}

std::string findings_markdown() {
  std::string md =
      "# Finding codes\n\n"
      "<!-- Generated from results/verdict/finding_codes.cpp (findings_markdown()); "
      "tests/results keeps this file identical. -->\n\n"
      "Every problem a run finds is a finding in the verdict's `findings[]` with one of these "
      "codes, the ranks and hosts it concerns, a one-line message and a hint. Severity `error` "
      "makes the run `fail` (exit 1); `warning` makes it `degraded` (exit 3) or `inconclusive` "
      "(exit 4) as the column *warning means* says; `info` changes nothing. Placeholders in braces are "
      "filled in by the run.\n\n"
      "| code | layer | default severity | warning means | what it means for an operator | hint |\n"
      "|---|---|---|---|---|---|\n";
  for (const auto& c : kCodes) {
    md += "| `" + to_string(c.code) + "` | " + to_string(c.layer) + " | " +
          to_string(c.severity) + " | " + to_string(c.warning_effect) + " | " +
          std::string(c.meaning) + " | " + std::string(c.hint) + " |\n";
  }
  // One heading per code, so an alert's runbook_url can point at docs/findings.md#<code in
  // lower case> (GitHub's heading anchor).
  md += "\n## By code\n";
  for (const auto& c : kCodes) {
    md += "\n### " + to_string(c.code) + "\n\n" + std::string(c.meaning) + "\n\n*Layer* " +
          to_string(c.layer) + ", *default severity* " + to_string(c.severity) +
          ". *What to do:* " + std::string(c.hint) + "\n";
  }
  md +=
      "\nExit codes: 0 pass, 1 fail, 2 usage error, 3 degraded, 4 inconclusive. "
      "`inconclusive` (a required phase skipped or not run, a missing measurement or baseline) is "
      "never `pass`.\n";
  return md;
}

}  // namespace ncclsmoke::results
