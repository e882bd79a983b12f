#pragma once
// A full verdict touching every field, shared by the results tests.
#include "results/verdict/finding_codes.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results::testing {

inline Verdict full_sample() {
  Verdict v;
  v.tool.version = "0.1.0";
  v.run_id = "20240501T101500Z-3fa9c2d1";
  v.started_at = "2024-05-01T10:15:00.123Z";
  v.duration_s = 10.4;
  v.scope = Scope::global;
  v.reporting_rank = 0;
  v.verdict = Outcome::fail;
  v.exit_code = 1;
  v.world = {4, "master.smoke.svc", 29500, WorldSource::torchrun};
  v.ranks = {
      {0, RankStatus::joined, "host-a", "node-a", 101, "10.0.0.1", "eth0", "", -1, 25000},
      {1, RankStatus::joined, "host-b", "node-b", 102, "10.0.0.2", "eth0", ""},
      {2, RankStatus::joined, "host-c", "", 103, "10.0.0.3", "eth0", ""},
      {3, RankStatus::missing, "", "", 0, "", "", "never joined"},
  };
  v.phases = {
      {"world", PhaseStatus::pass, 0.01, true, ""},
      {"rendezvous", PhaseStatus::fail, 10.02, true, "3 of 4 ranks joined"},
      {"mesh", PhaseStatus::not_run, 0, true, "rendezvous failed"},
      {"transport:nccl", PhaseStatus::skipped, 0, false, "no CUDA device"},
  };
  TransportRow row;
  row.transport = "socket";
  row.bytes = 1 << 20;
  row.count = (1 << 20) / 4;
  row.time_us = 812.5;
  row.algbw_gbps = 1.29;
  row.busbw_gbps = 1.93;
  row.wrong = 0;
  row.gate = true;
  TransportRow unmeasured = row;
  unmeasured.rank = 2;
  unmeasured.in_place = true;
  unmeasured.time_us = std::nan("");
  unmeasured.algbw_gbps = std::nan("");
  unmeasured.busbw_gbps = std::nan("");
  unmeasured.wrong = -1;
  unmeasured.gate = false;
  unmeasured.synthetic = true;
  v.transports = {row, unmeasured};
  v.identities = {{"socket", 1, {{"network", "Socket"}}, {{"network", "Socket"}, {"interface", "eth0"}}}};
  v.baseline = {{"profile", "ci-loopback"}};
  Finding missing = make_finding(Code::RANKS_MISSING, "rank 3 never joined within 10.0 s", {3}, {},
                                 {{"master", "master.smoke.svc:29500"}});
  missing.evidence = {{"joined", 3}, {"expected", 4}};
  // A finding with a subject (schema_minor 1): every member set, the message rendered from it.
  Subject about{.reporters = {0, 2},
                .reporter_host = "host-a",
                .peer = 1,
                .peer_host = "host-b",
                .transport = "socket",
                .phase = "transport:socket",
                .item = "gate time"};
  Finding slow = make_finding_about(Code::STRAGGLER, about,
                                    "{peer} took 2.4x the median all-reduce time, seen by {reporter}",
                                    {1}, {"host-b"});
  slow.origin = FindingOrigin::liveness_watch;  // schema_minor 2: which rule made it
  v.findings = {missing, slow};
  v.env = {{"MASTER_ADDR", "master.smoke.svc"}, {"NCCL_DEBUG", "INFO"}};
  v.versions = {{"ncclsmoke", "0.1.0"}};
  v.nics.read = true;
  v.nics.root = "/sys";
  v.nics.interval_s = 2.5;
  facts::NetInterfaceFacts eth;
  eth.name = "eth0";
  eth.operstate = "up";
  eth.carrier = 1;
  eth.speed_mbps = 100000;
  eth.mtu = 9001;
  eth.rx_bytes = 4096;
  eth.tx_bytes = 8192;
  eth.moved = {{"rx_errors", 2}};
  v.nics.interfaces = {eth};
  facts::RdmaPortFacts port;
  port.device = "mlx5_0";
  port.port = 1;
  port.state = "ACTIVE";
  port.phys_state = "LinkUp";
  port.link_layer = "InfiniBand";
  port.rate_gbps = 400;
  port.moved = {{"symbol_error", 12}};
  v.nics.rdma_ports = {port};
  return v;
}

}  // namespace ncclsmoke::results::testing
