#include "results/verdict/enums.h"

#include <array>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>

namespace ncclsmoke::results {

namespace {

// Spellings in enumerator order (the schema's enum lists).
constexpr std::array<std::string_view, 3> kSeverity = {"error", "warning", "info"};
constexpr std::array<std::string_view, 7> kLayer = {"config", "rendezvous", "mesh", "transport",
                                                     "data",   "run",        "node"};
constexpr std::array<std::string_view, 6> kPhaseStatus = {"pass",     "fail",         "skipped",
                                                          "degraded", "inconclusive", "not_run"};
constexpr std::array<std::string_view, 4> kOutcome = {"pass", "degraded", "fail", "inconclusive"};
constexpr std::array<std::string_view, 4> kRankStatus = {"joined", "missing", "lost", "failed"};
constexpr std::string_view kCode[] = {
#define NCCLSMOKE_CODE(name, ...) #name,
#include "results/verdict/finding_codes.def"
#undef NCCLSMOKE_CODE
    ""};
static_assert(std::size(kCode) == static_cast<std::size_t>(Code::unknown) + 1);
constexpr std::array<std::string_view, 2> kScope = {"global", "local"};
constexpr std::array<std::string_view, 2> kStoreDialect = {"legacy", "modern"};
// The open lists: the last slot is `unknown`'s, spelled "" (never parsed back).
constexpr std::array<std::string_view, 11> kWorldSource = {
    "flags",      "torchrun",        "openmpi", "slurm",  "k8s-indexed-job", "pytorchjob",
    "trainer-v2", "leaderworkerset", "jobset",  "launch", ""};
constexpr std::array<std::string_view, 4> kStoreHostedBy = {"rank 0", "torchelastic agent",
                                                            "external (--store)", ""};
constexpr std::array<std::string_view, 5> kServerEra = {"torch<=2.0", "torch2.1-2.4",
                                                        "torch>=2.5", "ncclsmoke", ""};
static_assert(kWorldSource.size() == static_cast<std::size_t>(WorldSource::unknown) + 1);
static_assert(kStoreHostedBy.size() == static_cast<std::size_t>(StoreHostedBy::unknown) + 1);
static_assert(kServerEra.size() == static_cast<std::size_t>(ServerEra::unknown) + 1);
constexpr std::array<std::string_view, 6> kFindingOrigin = {
    "", "liveness_watch", "lossy_path", "nccl_net_check", "profile_identity", "store_port"};
static_assert(kFindingOrigin.size() == static_cast<std::size_t>(FindingOrigin::store_port) + 1);

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

// An open list's value: any string; a spelling this build does not know keeps its text.
template <typename Any>
void read_open(const nlohmann::json& j, Any& out, const char* what) {
  if (!j.is_string()) throw std::invalid_argument(std::string(what) + ": not a string");
  out = Any::from_text(j.get_ref<const std::string&>());
}

// How an open list's bare enum prints: its spelling, or "<unknown>" for the unknown slot.
template <typename E, typename Table>
std::ostream& print_open(std::ostream& os, const Table& t, E e) {
  return e == E::unknown ? os << "<unknown>" : os << spell(t, e);
}

}  // namespace

std::string_view name(Severity s) { return spell(kSeverity, s); }
std::string_view name(Layer l) { return spell(kLayer, l); }
std::string_view name(PhaseStatus s) { return spell(kPhaseStatus, s); }
std::string_view name(Outcome o) { return spell(kOutcome, o); }
std::string_view name(RankStatus s) { return spell(kRankStatus, s); }
std::string_view name(Code c) { return spell(kCode, c); }
std::string_view name(Scope s) { return spell(kScope, s); }
std::string_view name(StoreDialect d) { return spell(kStoreDialect, d); }
std::string_view name(WorldSource s) { return spell(kWorldSource, s); }
std::string_view name(StoreHostedBy h) { return spell(kStoreHostedBy, h); }
std::string_view name(ServerEra e) { return spell(kServerEra, e); }
std::string_view name(FindingOrigin o) { return spell(kFindingOrigin, o); }

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

std::optional<Scope> parse_scope(std::string_view s) {
  return find<Scope>(kScope, s, kScope.size());
}
std::optional<StoreDialect> parse_store_dialect(std::string_view s) {
  return find<StoreDialect>(kStoreDialect, s, kStoreDialect.size());
}
// Not "" (the unknown slot's spelling).
std::optional<WorldSource> parse_world_source(std::string_view s) {
  return find<WorldSource>(kWorldSource, s, kWorldSource.size() - 1);
}
std::optional<StoreHostedBy> parse_store_hosted_by(std::string_view s) {
  return find<StoreHostedBy>(kStoreHostedBy, s, kStoreHostedBy.size() - 1);
}
std::optional<ServerEra> parse_server_era(std::string_view s) {
  return find<ServerEra>(kServerEra, s, kServerEra.size() - 1);
}
std::optional<FindingOrigin> parse_finding_origin(std::string_view s) {
  if (s.empty()) return std::nullopt;  // none is written as no member at all
  return find<FindingOrigin>(kFindingOrigin, s, kFindingOrigin.size());
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
std::ostream& operator<<(std::ostream& os, Scope s) { return os << name(s); }
std::ostream& operator<<(std::ostream& os, StoreDialect d) { return os << name(d); }
std::ostream& operator<<(std::ostream& os, WorldSource s) {
  return print_open(os, kWorldSource, s);
}
std::ostream& operator<<(std::ostream& os, StoreHostedBy h) {
  return print_open(os, kStoreHostedBy, h);
}
std::ostream& operator<<(std::ostream& os, ServerEra e) { return print_open(os, kServerEra, e); }
std::ostream& operator<<(std::ostream& os, const AnyWorldSource& s) { return os << s.str(); }
std::ostream& operator<<(std::ostream& os, const AnyStoreHostedBy& h) { return os << h.str(); }
std::ostream& operator<<(std::ostream& os, const AnyServerEra& e) { return os << e.str(); }

void to_json(nlohmann::json& j, Severity s) { j = name(s); }
void to_json(nlohmann::json& j, Layer l) { j = name(l); }
void to_json(nlohmann::json& j, PhaseStatus s) { j = name(s); }
void to_json(nlohmann::json& j, Outcome o) { j = name(o); }
void to_json(nlohmann::json& j, RankStatus s) { j = name(s); }
void to_json(nlohmann::json& j, Code c) { j = name(c); }
void to_json(nlohmann::json& j, const AnyCode& c) { j = c.str(); }
void to_json(nlohmann::json& j, Scope s) { j = name(s); }
void to_json(nlohmann::json& j, StoreDialect d) { j = name(d); }
void to_json(nlohmann::json& j, WorldSource s) { j = name(s); }
void to_json(nlohmann::json& j, StoreHostedBy h) { j = name(h); }
void to_json(nlohmann::json& j, ServerEra e) { j = name(e); }
void to_json(nlohmann::json& j, const AnyWorldSource& s) { j = s.str(); }
void to_json(nlohmann::json& j, const AnyStoreHostedBy& h) { j = h.str(); }
void to_json(nlohmann::json& j, const AnyServerEra& e) { j = e.str(); }
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
void from_json(const nlohmann::json& j, Scope& s) { read(j, s, parse_scope, "scope"); }
void from_json(const nlohmann::json& j, StoreDialect& d) {
  read(j, d, parse_store_dialect, "store dialect");
}
void from_json(const nlohmann::json& j, WorldSource& s) {
  read(j, s, parse_world_source, "world source");
}
void from_json(const nlohmann::json& j, StoreHostedBy& h) {
  read(j, h, parse_store_hosted_by, "store hosted_by");
}
void from_json(const nlohmann::json& j, ServerEra& e) { read(j, e, parse_server_era, "store era"); }
void from_json(const nlohmann::json& j, AnyWorldSource& s) { read_open(j, s, "world source"); }
void from_json(const nlohmann::json& j, AnyStoreHostedBy& h) {
  read_open(j, h, "store hosted_by");
}
void from_json(const nlohmann::json& j, AnyServerEra& e) { read_open(j, e, "store era"); }
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
