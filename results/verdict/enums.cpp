#include "results/verdict/enums.h"

#include <array>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>

namespace ncclsmoke::results {

namespace {

// Spellings in enumerator order (the schema's enum lists).
constexpr std::array<std::string_view, 3> kSeverity = {"error", "warning", "info"};
constexpr std::array<std::string_view, 6> kLayer = {"config", "rendezvous", "mesh",
                                                     "transport", "data", "run"};
constexpr std::array<std::string_view, 6> kPhaseStatus = {"pass",     "fail",         "skipped",
                                                          "degraded", "inconclusive", "not_run"};
constexpr std::array<std::string_view, 4> kOutcome = {"pass", "degraded", "fail", "inconclusive"};
constexpr std::array<std::string_view, 4> kRankStatus = {"joined", "missing", "lost", "failed"};
#define NCCLSMOKE_CODE_SPELLING(name) #name,
constexpr std::string_view kCode[] = {NCCLSMOKE_FINDING_CODES(NCCLSMOKE_CODE_SPELLING) ""};
#undef NCCLSMOKE_CODE_SPELLING
static_assert(std::size(kCode) == static_cast<std::size_t>(Code::unknown) + 1);

template <typename E, typename Table>
std::string_view spell(const Table& t, E e) {
  auto i = static_cast<std::size_t>(e);
  return i < std::size(t) ? t[i] : std::string_view("?");
}

template <typename E, typename Table>
std::optional<E> find(const Table& t, std::string_view s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (t[i] == s) return static_cast<E>(i);
  }
  return std::nullopt;
}

template <typename E>
void read(const nlohmann::json& j, E& out, std::optional<E> (*parse)(std::string_view),
          const char* what) {
  if (!j.is_string()) throw std::invalid_argument(std::string(what) + ": not a string");
  auto v = parse(j.get_ref<const std::string&>());
  if (!v) {
    throw std::invalid_argument(std::string(what) + ": unknown value '" +
                                j.get_ref<const std::string&>() + "'");
  }
  out = *v;
}

}  // namespace

std::string_view name(Severity s) { return spell(kSeverity, s); }
std::string_view name(Layer l) { return spell(kLayer, l); }
std::string_view name(PhaseStatus s) { return spell(kPhaseStatus, s); }
std::string_view name(Outcome o) { return spell(kOutcome, o); }
std::string_view name(RankStatus s) { return spell(kRankStatus, s); }
std::string_view name(Code c) { return spell(kCode, c); }

std::optional<Severity> parse_severity(std::string_view s) {
  return find<Severity>(kSeverity, s, kSeverity.size());
}
std::optional<Layer> parse_layer(std::string_view s) {
  return find<Layer>(kLayer, s, kLayer.size());
}
std::optional<PhaseStatus> parse_phase_status(std::string_view s) {
  return find<PhaseStatus>(kPhaseStatus, s, kPhaseStatus.size());
}
std::optional<Outcome> parse_outcome(std::string_view s) {
  return find<Outcome>(kOutcome, s, kOutcome.size());
}
std::optional<RankStatus> parse_rank_status(std::string_view s) {
  return find<RankStatus>(kRankStatus, s, kRankStatus.size());
}
std::optional<Code> parse_code(std::string_view s) {
  // Not "" (the unknown slot's spelling).
  return find<Code>(kCode, s, static_cast<std::size_t>(Code::unknown));
}

bool is_code_shape(std::string_view s) {
  if (s.empty() || s[0] < 'A' || s[0] > 'Z') return false;
  for (char ch : s) {
    if (!((ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_')) return false;
  }
  return true;
}

std::optional<AnyCode> AnyCode::parse(std::string_view text) {
  if (!is_code_shape(text)) return std::nullopt;
  return from_text(text);
}

AnyCode AnyCode::from_text(std::string_view text) {
  if (auto c = parse_code(text)) return AnyCode(*c);
  AnyCode a;
  a.text_ = std::string(text);
  return a;
}

std::ostream& operator<<(std::ostream& os, Severity s) { return os << name(s); }
std::ostream& operator<<(std::ostream& os, Layer l) { return os << name(l); }
std::ostream& operator<<(std::ostream& os, PhaseStatus s) { return os << name(s); }
std::ostream& operator<<(std::ostream& os, Outcome o) { return os << name(o); }
std::ostream& operator<<(std::ostream& os, RankStatus s) { return os << name(s); }
std::ostream& operator<<(std::ostream& os, Code c) {
  return os << (c == Code::unknown ? std::string_view("<unknown>") : name(c));
}
std::ostream& operator<<(std::ostream& os, const AnyCode& c) { return os << c.str(); }

void to_json(nlohmann::json& j, Severity s) { j = name(s); }
void to_json(nlohmann::json& j, Layer l) { j = name(l); }
void to_json(nlohmann::json& j, PhaseStatus s) { j = name(s); }
void to_json(nlohmann::json& j, Outcome o) { j = name(o); }
void to_json(nlohmann::json& j, RankStatus s) { j = name(s); }
void to_json(nlohmann::json& j, Code c) { j = name(c); }
void to_json(nlohmann::json& j, const AnyCode& c) { j = c.str(); }
void from_json(const nlohmann::json& j, Severity& s) { read(j, s, parse_severity, "severity"); }
void from_json(const nlohmann::json& j, Layer& l) { read(j, l, parse_layer, "layer"); }
void from_json(const nlohmann::json& j, PhaseStatus& s) {
  read(j, s, parse_phase_status, "phase status");
}
void from_json(const nlohmann::json& j, Outcome& o) { read(j, o, parse_outcome, "verdict"); }
void from_json(const nlohmann::json& j, RankStatus& s) {
  read(j, s, parse_rank_status, "rank status");
}
void from_json(const nlohmann::json& j, Code& c) { read(j, c, parse_code, "finding code"); }
void from_json(const nlohmann::json& j, AnyCode& c) {
  if (!j.is_string()) throw std::invalid_argument("finding code: not a string");
  auto v = AnyCode::parse(j.get_ref<const std::string&>());
  if (!v) {
    throw std::invalid_argument("finding code: '" + j.get_ref<const std::string&>() +
                                "' does not match ^[A-Z][A-Z0-9_]*$");
  }
  c = std::move(*v);
}

}  // namespace ncclsmoke::results
