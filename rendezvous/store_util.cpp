#include "rendezvous/store_util.h"

#include <charconv>
#include <cstdio>

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

}  // namespace ncclsmoke::rendezvous
