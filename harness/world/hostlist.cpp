#include "harness/world/hostlist.h"

#include <cstdint>
#include <variant>

#include <fmt/format.h>

namespace ncclsmoke::harness {
namespace {

struct Range {
  uint64_t lo = 0;
  uint64_t hi = 0;
  std::size_t width = 1;  // LO's digits: the zero padding to keep
};
using Group = std::vector<Range>;
using Segment = std::variant<std::string, Group>;  // literal text, or a bracket group
using Name = std::vector<Segment>;

constexpr std::size_t kMaxDigits = 18;  // fits uint64_t with room for HI - LO + 1

bool fail(std::string* error, std::string why) {
  if (error) *error = std::move(why);
  return false;
}

// For error messages: printable ASCII, other bytes as \xNN, at most 40 characters of input.
std::string quote_item(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < 40; ++i) {
    unsigned char u = static_cast<unsigned char>(s[i]);
    if (u >= 0x20 && u < 0x7f && u != '\\') {
      out.push_back(static_cast<char>(u));
    } else {
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  if (s.size() > 40) out += "...";
  out += "'";
  return out;
}

bool parse_number(std::string_view text, std::string_view item, uint64_t& out,
                  std::string* error) {
  if (text.empty()) return fail(error, fmt::format("range item {} has an empty bound", quote_item(item)));
  if (text.size() > kMaxDigits)
    return fail(error,
                fmt::format("range bound {} has more than {} digits", quote_item(text), kMaxDigits));
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return fail(error,
                  fmt::format("range item {} is not N or LO-HI (decimal digits)", quote_item(item)));
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  out = v;
  return true;
}

bool parse_group(std::string_view body, Group& group, std::string* error) {
  if (body.empty()) return fail(error, "empty brackets '[]'");
  std::size_t start = 0;
  while (true) {
    std::size_t comma = body.find(',', start);
    std::string_view item =
        body.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty())
      return fail(error, fmt::format("empty item in {}", quote_item(fmt::format("[{}]", body))));
    Range r;
    std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      if (!parse_number(item, item, r.lo, error)) return false;
      r.hi = r.lo;
      r.width = item.size();
    } else {
      std::string_view lo = item.substr(0, dash), hi = item.substr(dash + 1);
      if (!parse_number(lo, item, r.lo, error) || !parse_number(hi, item, r.hi, error))
        return false;
      if (r.lo > r.hi)
        return fail(error, fmt::format("range {} runs backwards (LO must be <= HI)", quote_item(item)));
      r.width = lo.size();
    }
    group.push_back(r);
    if (comma == std::string_view::npos) return true;
    start = comma + 1;
  }
}

bool parse(std::string_view list, std::vector<Name>& names, std::string* error) {
  while (!list.empty() && (list.front() == ' ' || list.front() == '\t' || list.front() == '\n'))
    list.remove_prefix(1);
  while (!list.empty() && (list.back() == ' ' || list.back() == '\t' || list.back() == '\n'))
    list.remove_suffix(1);
  if (list.empty()) return fail(error, "the host list is empty");
  Name name;
  std::string literal;
  auto end_name = [&](std::size_t at) {
    if (!literal.empty()) name.emplace_back(std::move(literal));
    literal.clear();
    if (name.empty()) return fail(error, fmt::format("empty host name at offset {}", at));
    names.push_back(std::move(name));
    name.clear();
    return true;
  };
  for (std::size_t i = 0; i < list.size(); ++i) {
    const char c = list[i];
    if (c == ',') {
      if (!end_name(i)) return false;
    } else if (c == '[') {
      std::size_t close = list.find(']', i + 1);
      std::size_t nested = list.find('[', i + 1);
      if (close == std::string_view::npos)
        return fail(error, fmt::format("'[' at offset {} is never closed", i));
      if (nested < close) return fail(error, fmt::format("nested '[' at offset {}", nested));
      Group g;
      if (!parse_group(list.substr(i + 1, close - i - 1), g, error)) return false;
      if (!literal.empty()) name.emplace_back(std::move(literal));
      literal.clear();
      name.emplace_back(std::move(g));
      i = close;
    } else if (c == ']') {
      return fail(error, fmt::format("']' at offset {} has no matching '['", i));
    } else if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return fail(error, fmt::format("unexpected whitespace or control byte at offset {}", i));
    } else {
      literal.push_back(c);
    }
  }
  return end_name(list.size());
}

std::string format(uint64_t v, std::size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// Hosts a group yields, or kMaxHostlistHosts + 1 when that is more than the bound.
uint64_t group_size(const Group& g) {
  uint64_t n = 0;
  for (const Range& r : g) {
    n += r.hi - r.lo + 1;  // < 10^18 each, and we stop once past the bound
    if (n > kMaxHostlistHosts) return kMaxHostlistHosts + 1;
  }
  return n;
}

}  // namespace

std::optional<std::vector<std::string>> expand_hostlist(std::string_view list,
                                                        std::string* error) {
  std::vector<Name> names;
  if (!parse(list, names, error)) return std::nullopt;
  uint64_t total = 0;
  for (const Name& name : names) {
    uint64_t n = 1;
    for (const Segment& s : name)
      if (const Group* g = std::get_if<Group>(&s)) {
        n *= group_size(*g);  // both factors <= 2^20 + 1: no overflow
        if (n > kMaxHostlistHosts) break;
      }
    total += n;
    if (total > kMaxHostlistHosts) {
      fail(error, fmt::format("the host list expands to more than {} hosts", kMaxHostlistHosts));
      return std::nullopt;
    }
  }
  std::vector<std::string> hosts;
  hosts.reserve(total);
  for (const Name& name : names) {
    // An odometer over the name's groups, the last group turning fastest.
    std::vector<const Group*> groups;
    for (const Segment& s : name)
      if (const Group* g = std::get_if<Group>(&s)) groups.push_back(g);
    std::vector<std::size_t> range_at(groups.size(), 0);
    std::vector<uint64_t> value(groups.size());
    for (std::size_t k = 0; k < groups.size(); ++k) value[k] = (*groups[k])[0].lo;
    while (true) {
      std::string host;
      std::size_t k = 0;
      for (const Segment& s : name) {
        if (const std::string* lit = std::get_if<std::string>(&s)) {
          host += *lit;
        } else {
          host += format(value[k], (*groups[k])[range_at[k]].width);
          ++k;
        }
      }
      hosts.push_back(std::move(host));
      // Advance.
      std::size_t d = groups.size();
      while (d > 0) {
        --d;
        const Group& g = *groups[d];
        if (value[d] < g[range_at[d]].hi) {
          ++value[d];
          break;
        }
        if (range_at[d] + 1 < g.size()) {
          ++range_at[d];
          value[d] = g[range_at[d]].lo;
          break;
        }
        range_at[d] = 0;
        value[d] = g[0].lo;
        if (d == 0) {
          d = groups.size() + 1;  // wrapped around: done
          break;
        }
      }
      if (groups.empty() || d == groups.size() + 1) break;
    }
  }
  return hosts;
}

std::optional<std::string> first_host(std::string_view list, std::string* error) {
  std::vector<Name> names;
  if (!parse(list, names, error)) return std::nullopt;
  std::string host;
  for (const Segment& s : names.front()) {
    if (const std::string* lit = std::get_if<std::string>(&s)) {
      host += *lit;
    } else {
      const Range& r = std::get<Group>(s).front();
      host += format(r.lo, r.width);
    }
  }
  return host;
}

}  // namespace ncclsmoke::harness
