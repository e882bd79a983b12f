#pragma once
// One way to write how long something took or waited in a message: "2.0s", or "0.25s" where
// tenths hide the difference. Every error and finding writes its waits through this (the
// rendezvous' errors, the transports', judging's findings), so they read alike.
//
// A leaf (the standard library only), like rank_ref.h: part of the header-only target
// ncclsmoke_message_spelling (rendezvous/CMakeLists.txt), which results/ reaches through
// ncclsmoke_verdict without linking the network code. deadline.h includes it for its users.
#include <cstdio>
#include <string>

namespace ncclsmoke::rendezvous {

// How long something waited, as every message writes it: "2.0s".
inline std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

// The same with hundredths below 10 s ("0.25s"), for waits where tenths hide the difference
// (connect attempts, store operations, socket ops).
inline std::string seconds_text_fine(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.2fs" : "%.1fs", s);
  return buf;
}

}  // namespace ncclsmoke::rendezvous
