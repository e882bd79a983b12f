#pragma once
// What the kernel knows of one TCP connection (getsockopt TCP_INFO): the per-link evidence that
// names a lossy or slow link without a baseline. Counters are cumulative over the connection's
// life, so reading them once after the traffic gives the whole run's figures.
#include <cstdint>
#include <optional>

namespace ncclsmoke::rendezvous {

struct TcpLinkInfo {
  std::uint64_t total_retrans = 0;  // segments retransmitted (tcpi_total_retrans)
  std::uint64_t segs_out = 0;       // segments sent, retransmissions included (tcpi_segs_out)
  double rtt_us = 0;                // smoothed round-trip time (tcpi_rtt)
  double min_rtt_us = 0;            // the lowest seen (tcpi_min_rtt): the path without queues
  std::uint64_t bytes_acked = 0;    // tcpi_bytes_acked
  std::uint64_t delivery_rate = 0;  // bytes/s of the last delivery sample (tcpi_delivery_rate)
  std::uint64_t busy_us = 0;        // time busy sending data (tcpi_busy_time)
  // Now: retransmission timeouts in a row not yet recovered (tcpi_retransmits) and the timer's
  // backoff (tcpi_backoff). Both 0 on a path whose peer's kernel acknowledges (a frozen process's
  // still does); > 0 while a segment went a whole RTO without an acknowledgement.
  unsigned unrecovered_rtos = 0;
  unsigned backoff = 0;
};

// nullopt: not a TCP socket, closed, or a kernel too old for the counters (segs_out is 0).
std::optional<TcpLinkInfo> read_tcp_info(int fd);

}  // namespace ncclsmoke::rendezvous
