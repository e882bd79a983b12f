#pragma once
// One way to name a rank in a message: "rank 3 (host node-a)", or "rank 3" when the host is not
// known. Every error and finding names its ranks through this, so a grep or an alert template
// meets one spelling. Formats with fmt:
//   fmt::format("{} lost {}", RankRef{me, my_host}, RankRef{peer, peer_host})
// rank < 0 reads "no rank" (a process whose rank was never known, e.g. a bad configuration).
//
// A leaf (fmt only), in rendezvous/ because the rendezvous is the lowest module whose messages
// name ranks, and rendezvous/ may not include results/ (docs/architecture.md); results/ names
// ranks the same way through the header-only target ncclsmoke_message_spelling
// (rendezvous/CMakeLists.txt), which ncclsmoke_verdict links: one spelling, no network code.
#include <fmt/format.h>

#include <string>
#include <string_view>

namespace ncclsmoke::rendezvous {

struct RankRef {
  int rank = -1;
  std::string_view host;
};

inline std::string rank_text(int rank, std::string_view host = {}) {
  if (rank < 0) return host.empty() ? std::string("no rank") : fmt::format("host {}", host);
  if (host.empty()) return fmt::format("rank {}", rank);
  return fmt::format("rank {} (host {})", rank, host);
}

}  // namespace ncclsmoke::rendezvous

template <>
struct fmt::formatter<ncclsmoke::rendezvous::RankRef> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const ncclsmoke::rendezvous::RankRef& r, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(
        ncclsmoke::rendezvous::rank_text(r.rank, r.host), ctx);
  }
};
