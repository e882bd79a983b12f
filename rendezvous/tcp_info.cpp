// Its own translation unit, out of the unity build: <linux/tcp.h> has the full struct tcp_info
// (segs_out, busy_time ...) and clashes with glibc's <netinet/tcp.h>, which the other files use.
#include "rendezvous/tcp_info.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstring>

namespace ncclsmoke::rendezvous {

std::optional<TcpLinkInfo> read_tcp_info(int fd) {
  if (fd < 0) return std::nullopt;
  struct tcp_info ti;
  std::memset(&ti, 0, sizeof ti);
  socklen_t len = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return std::nullopt;
  // The kernel fills as much as it has; an old one stops before segs_out.
  if (len < offsetof(struct tcp_info, tcpi_segs_out) + sizeof ti.tcpi_segs_out) return std::nullopt;
  TcpLinkInfo out;
  out.total_retrans = ti.tcpi_total_retrans;
  out.segs_out = ti.tcpi_segs_out;
  out.rtt_us = ti.tcpi_rtt;
  out.unrecovered_rtos = ti.tcpi_retransmits;
  out.backoff = ti.tcpi_backoff;
  if (len >= offsetof(struct tcp_info, tcpi_min_rtt) + sizeof ti.tcpi_min_rtt)
    out.min_rtt_us = ti.tcpi_min_rtt;
  if (len >= offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked)
    out.bytes_acked = ti.tcpi_bytes_acked;
  if (len >= offsetof(struct tcp_info, tcpi_delivery_rate) + sizeof ti.tcpi_delivery_rate)
    out.delivery_rate = ti.tcpi_delivery_rate;
  if (len >= offsetof(struct tcp_info, tcpi_busy_time) + sizeof ti.tcpi_busy_time)
    out.busy_us = ti.tcpi_busy_time;
  return out;
}

}  // namespace ncclsmoke::rendezvous
