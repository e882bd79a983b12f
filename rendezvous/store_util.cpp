#include "rendezvous/store_util.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <thread>

namespace ncclsmoke::rendezvous {

std::optional<int64_t> parse_counter(const std::string& value) {
  if (value.empty()) return 0;
  const char* first = value.data();
  const char* last = value.data() + value.size();
  if (*first == '+') ++first;
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (ec != std::errc{} || ptr != last || first == last) return std::nullopt;
  return out;
}

std::string printable(const std::string& bytes, std::size_t max_len) {
  std::string out = "'";
  for (std::size_t i = 0; i < bytes.size() && i < max_len; ++i) {
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (bytes.size() > max_len) out += "...";
  out += "'";
  return out;
}

std::string describe_keys(const std::vector<std::string>& keys, std::size_t max_keys) {
  std::string out;
  for (std::size_t i = 0; i < keys.size() && i < max_keys; ++i) {
    if (i) out += ", ";
    out += printable(keys[i]);
  }
  if (keys.size() > max_keys) out += ", ... (" + std::to_string(keys.size() - max_keys) + " more)";
  return out;
}

std::vector<std::string> get_present(Store& store, const std::vector<std::string>& keys,
                                     Deadline deadline, std::vector<bool>& present) {
  present.assign(keys.size(), true);
  std::vector<std::string> values(keys.size());
  if (keys.empty()) return values;
  // Waits by looking (a CHECK is answered at once), never with a MULTI_GET left to block: one
  // the deadline cuts short costs the connection (its reply may still come, so the client
  // reconnects), and a reconnect to a store busy with thousands of ranks can wait out its whole
  // handshake timeout; rank 0 at 16,384 simulated ranks then named itself stalled.
  Millis pause{2};
  bool all_there = store.check(keys);
  while (!all_there && !expired(deadline)) {
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
    pause = std::min(pause * 2, kGetPresentMaxPause);
    all_there = store.check(keys);
  }
  if (all_there) {
    auto got = store.multi_get(keys, deadline_after(Millis{5000}));  // all there: answered at once
    if (got.size() == keys.size()) return got;
  }
  // Which are missing: CHECK halves recursively (one CHECK answers for a whole range), so a few
  // missing keys among a thousand cost tens of round trips, not a thousand.
  std::vector<std::pair<std::size_t, std::size_t>> ranges{{0, keys.size()}};
  while (!ranges.empty()) {
    auto [lo, hi] = ranges.back();
    ranges.pop_back();
    std::vector<std::string> part(keys.begin() + static_cast<long>(lo),
                                  keys.begin() + static_cast<long>(hi));
    if (store.check(part)) continue;
    if (hi - lo == 1) {
      present[lo] = false;
      continue;
    }
    std::size_t mid = lo + (hi - lo) / 2;
    ranges.emplace_back(lo, mid);
    ranges.emplace_back(mid, hi);
  }
  std::vector<std::string> have;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!present[i]) continue;
    have.push_back(keys[i]);
    index.push_back(i);
  }
  if (have.empty()) return values;
  auto got = store.multi_get(have, deadline_after(Millis{5000}));
  for (std::size_t k = 0; k < index.size() && k < got.size(); ++k) values[index[k]] = got[k];
  return values;
}


}  // namespace ncclsmoke::rendezvous
