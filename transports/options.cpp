#include "transports/options.h"
#include "transports/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace ncclsmoke::transports {
namespace {

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::size_t i = 0;
  bool negative = false;
  if (!text.empty() && text[0] == '-') {
    negative = true;
    i = 1;
  }
  if (i >= text.size() || text.size() - i > 18) return std::nullopt;
  std::int64_t v = 0;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    v = v * 10 + (text[i] - '0');
  }
  return negative ? -v : v;
}

std::optional<bool> parse_bool(std::string_view text) {
  const std::string t = lower(text);
  if (t == "true" || t == "1" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "0" || t == "no" || t == "off") return false;
  return std::nullopt;
}

std::string join_or(const std::vector<std::string>& words) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i)
    out += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  return out;
}

std::string size_accepted(std::uint64_t min, std::uint64_t max) {
  return fmt::format("a size from {} to {}; bytes or K/KiB, M/MiB, G/GiB (binary), e.g. 4096, "
                     "512K, 64M, 1G",
                     size_text(min), size_text(max));
}

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 13) return std::nullopt;  // 13 digits > 1 TiB already
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < digits; ++i) v = v * 10 + static_cast<std::uint64_t>(text[i] - '0');
  const std::string_view suffix = text.substr(digits);
  std::uint64_t mult = 0;
  if (suffix.empty() || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = std::uint64_t{1} << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = std::uint64_t{1} << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = std::uint64_t{1} << 30;
  else return std::nullopt;
  if (v > kMaxSize / mult) return std::nullopt;
  return v * mult;
}

bool parse_size(const std::string& text, std::size_t& bytes) {
  auto v = parse_size(std::string_view(text));
  if (!v) return false;
  bytes = static_cast<std::size_t>(*v);
  return true;
}

std::string size_text(std::uint64_t bytes) {
  if (bytes == 0) return "0";
  for (auto [shift, unit] : {std::pair{30, "G"}, {20, "M"}, {10, "K"}})
    if (bytes % (std::uint64_t{1} << shift) == 0) return fmt::format("{}{}", bytes >> shift, unit);
  return std::to_string(bytes);
}

std::string check_size(const std::string& text, std::uint64_t min, std::uint64_t max) {
  auto v = parse_size(text);
  if (v && *v >= min && *v <= max) return "";
  return fmt::format("is not a size (accepted: {})", size_accepted(min, max));
}

std::string OptionSpec::key() const { return fmt::format("{}.{}", backend, name); }

std::string OptionSpec::flag() const {
  std::string f = fmt::format("--{}-{}", backend, name);
  std::replace(f.begin(), f.end(), '_', '-');
  return f;
}

std::vector<std::string> OptionSpec::flags() const {
  std::vector<std::string> out = aliases;
  out.push_back(flag());
  return out;
}

std::string OptionSpec::accepted() const {
  switch (kind) {
    case OptionKind::string: return "any text";
    case OptionKind::size:
      return size_accepted(static_cast<std::uint64_t>(min), static_cast<std::uint64_t>(max));
    case OptionKind::integer: return fmt::format("an integer from {} to {}", min, max);
    case OptionKind::boolean: return "true or false";
    case OptionKind::choice: return join_or(choices);
  }
  return "";
}

std::string OptionSpec::check(const std::string& value) const {
  switch (kind) {
    case OptionKind::string: return "";
    case OptionKind::size:
      return check_size(value, static_cast<std::uint64_t>(min), static_cast<std::uint64_t>(max));
    case OptionKind::integer: {
      auto v = parse_int(value);
      if (!v) return fmt::format("is not an integer (accepted: {})", accepted());
      if (*v < min || *v > max) return fmt::format("is out of range (accepted: {})", accepted());
      return "";
    }
    case OptionKind::boolean:
      return parse_bool(value) ? "" : fmt::format("is not a boolean (accepted: {})", accepted());
    case OptionKind::choice:
      return std::find(choices.begin(), choices.end(), value) != choices.end()
                 ? ""
                 : fmt::format("is not accepted (accepted: {})", accepted());
  }
  return "";
}

OptionSpec string_option(std::string backend, std::string name, std::string help,
                         std::string default_text) {
  OptionSpec s;
  s.backend = std::move(backend);
  s.name = std::move(name);
  s.help = std::move(help);
  s.kind = OptionKind::string;
  s.default_text = std::move(default_text);
  return s;
}

namespace {
// A string option whose value is a number of `kind` in [min, max].
OptionSpec ranged_option(OptionKind kind, std::string backend, std::string name, std::string help,
                         std::string default_text, std::int64_t min, std::int64_t max) {
  OptionSpec s = string_option(std::move(backend), std::move(name), std::move(help),
                               std::move(default_text));
  s.kind = kind;
  s.min = min;
  s.max = max;
  return s;
}
}  // namespace

OptionSpec size_option(std::string backend, std::string name, std::string help,
                       std::string default_text, std::uint64_t min, std::uint64_t max) {
  return ranged_option(OptionKind::size, std::move(backend), std::move(name), std::move(help),
                       std::move(default_text), static_cast<std::int64_t>(min),
                       static_cast<std::int64_t>(std::min(max, kMaxSize)));
}

OptionSpec int_option(std::string backend, std::string name, std::string help,
                      std::string default_text, std::int64_t min, std::int64_t max) {
  return ranged_option(OptionKind::integer, std::move(backend), std::move(name), std::move(help),
                       std::move(default_text), min, max);
}

OptionSpec bool_option(std::string backend, std::string name, std::string help) {
  OptionSpec s = string_option(std::move(backend), std::move(name), std::move(help), "false");
  s.kind = OptionKind::boolean;
  return s;
}

OptionSpec choice_option(std::string backend, std::string name, std::string help,
                         std::string default_text, std::vector<std::string> choices) {
  OptionSpec s = string_option(std::move(backend), std::move(name), std::move(help),
                               std::move(default_text));
  s.kind = OptionKind::choice;
  s.choices = std::move(choices);
  return s;
}

std::string BackendOptions::raw(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

std::string BackendOptions::text(const std::string& key, const OptionSpec** spec) const {
  const OptionSpec* s = find_option(key);
  if (!s) throw OptionError(fmt::format("option {} is not declared by any backend", key));
  *spec = s;
  auto it = values_.find(key);
  std::string t = it == values_.end() ? s->default_text : it->second;
  if (!t.empty()) {
    std::string why = s->check(t);
    if (!why.empty()) throw OptionError(fmt::format("{}=\"{}\" {}", key, t, why));
  }
  return t;
}

std::string BackendOptions::get_string(const std::string& key) const {
  const OptionSpec* s = nullptr;
  return text(key, &s);
}

std::uint64_t BackendOptions::get_size(const std::string& key) const {
  const OptionSpec* s = nullptr;
  std::string t = text(key, &s);
  if (s->kind != OptionKind::size) throw OptionError(fmt::format("option {} is not a size", key));
  if (t.empty()) throw OptionError(fmt::format("option {} has no value and no default", key));
  return *parse_size(std::string_view(t));
}

std::optional<std::int64_t> BackendOptions::find_int(const std::string& key) const {
  const OptionSpec* s = nullptr;
  std::string t = text(key, &s);
  if (s->kind != OptionKind::integer)
    throw OptionError(fmt::format("option {} is not an integer", key));
  if (t.empty()) return std::nullopt;
  return parse_int(t);
}

std::int64_t BackendOptions::get_int(const std::string& key) const {
  auto v = find_int(key);
  if (!v) throw OptionError(fmt::format("option {} has no value and no default", key));
  return *v;
}

bool BackendOptions::get_bool(const std::string& key) const {
  const OptionSpec* s = nullptr;
  std::string t = text(key, &s);
  if (s->kind != OptionKind::boolean)
    throw OptionError(fmt::format("option {} is not a boolean", key));
  return parse_bool(t).value_or(false);
}

std::map<std::string, std::string> with_rank_defaults(std::map<std::string, std::string> given,
                                                      const RankFacts& rank) {
  const BackendOptions view(given);
  std::map<std::string, std::string> out = given;
  for (const auto* spec : all_options())
    if (spec->per_rank_default && !given.count(spec->key()))
      out[spec->key()] = spec->per_rank_default(rank, view);
  return out;
}

void BackendOptions::validate(const std::string& backend) const {
  const std::string prefix = backend + ".";
  for (const auto& [key, value] : values_) {
    if (key.rfind(prefix, 0) != 0) continue;
    const OptionSpec* s = nullptr;
    text(key, &s);
  }
}

}  // namespace ncclsmoke::transports
