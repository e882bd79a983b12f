#include "rendezvous/bounded_json.h"

#include <fmt/format.h>

#include <vector>

namespace ncclsmoke::rendezvous {

std::string json_size_text(std::size_t bytes) {
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  if (bytes < (std::size_t{1} << 20)) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
}

std::optional<std::string> json_limit_problem(std::string_view text, std::size_t max_bytes,
                                              int max_depth) {
  if (text.size() > max_bytes)
    return fmt::format("{} ({} bytes), more than the {} limit", json_size_text(text.size()),
                       text.size(), json_size_text(max_bytes));
  int depth = 0;
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n; ++i) {
    const char c = text[i];
    if (c == '"') {
      // Skip the string; an escaped quote does not end it. An unterminated string ends the scan
      // (nlohmann then names the syntax error).
      for (++i; i < n && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return fmt::format("nested deeper than {} levels at byte {}", max_depth, i);
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced text is nlohmann's to name
    }
  }
  return std::nullopt;
}

BoundedJson parse_bounded_json(std::string_view text, std::size_t max_bytes, int max_depth) {
  BoundedJson out;
  out.value = nlohmann::json(nlohmann::json::value_t::discarded);
  if (auto problem = json_limit_problem(text, max_bytes, max_depth)) {
    out.error = std::move(*problem);
    return out;
  }
  try {
    out.value = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1, column 5: ..."; the
    // part after the bracket is the reason.
    std::string why = e.what();
    if (auto cut = why.find("] "); cut != std::string::npos) why.erase(0, cut + 2);
    if (why.size() > 200) why.resize(200);
    out.error = fmt::format("not JSON at byte {} ({})", e.byte, why);
    out.value = nlohmann::json(nlohmann::json::value_t::discarded);
  }
  return out;
}

nlohmann::json parse_bounded_or_discarded(std::string_view text, std::size_t max_bytes) {
  return parse_bounded_json(text, max_bytes).value;
}

bool json_deeper_than(const nlohmann::json& j, int max_depth) {
  // (node, its depth): containers count one level each, as json_limit_problem counts brackets.
  std::vector<std::pair<const nlohmann::json*, int>> stack{{&j, 0}};
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (!node->is_structured()) continue;
    if (depth + 1 > max_depth) return true;
    for (const auto& child : *node) stack.emplace_back(&child, depth + 1);
  }
  return false;
}

}  // namespace ncclsmoke::rendezvous
