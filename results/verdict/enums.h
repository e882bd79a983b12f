#pragma once
// The verdict model's enumerated values, typed, so a typo does not compile. Their JSON spelling
// (the schema's, results/verdict/verdict.schema.json) lives only here: to_string() gives it and
// parse_<type>() reads it back (nullopt for any other spelling). The JSON edges (verdict.cpp's
// to_json / verdict_from_json / verdict_from_text_fast, the history rows, metrics labels, report
// text, the CLI's printing) convert; everything else compares enums.
//
// Finding codes: the schema accepts any code matching ^[A-Z][A-Z0-9_]*$, because a verdict
// written by a newer ncclsmoke must still be read and imported into the history by an older one.
// So a finding's code is an AnyCode, a small value class: a Code (one enumerator per row of the
// finding table, finding_codes.def) or, for a code this build does not know, Code::unknown plus
// the code's text, which it keeps so the code round-trips JSON -> model -> JSON unchanged.
// make_finding() takes a Code, so only known codes can be made here; AnyCode::parse() is for
// readers. Compare with `f.code == Code::PEER_LOST` (false for every unknown code).
//
// Open lists: world.source, world.store.hosted_by and world.store.era are free text in the schema
// (a newer launcher or torch era must not make an older ncclsmoke reject the verdict), so each is
// an Open<E> value (AnyWorldSource, AnyStoreHostedBy, AnyServerEra) that keeps an unknown spelling
// as text. scope and store.dialect are enum lists in the schema, so they are plain enums; a test
// (tests/results/verdict/enums_test.cpp) keeps every enum list here equal to the schema's.
//
// Each type also has nlohmann to_json/from_json (the schema's spelling), so a `json j = severity`
// never silently writes an integer; from_json throws std::invalid_argument for a bad spelling.
#include <compare>
#include <cstdint>
#include <fmt/format.h>
#include <iosfwd>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ncclsmoke::results {

enum class Severity : std::uint8_t { error, warning, info };
enum class Layer : std::uint8_t { config, rendezvous, mesh, transport, data, run, node };
enum class PhaseStatus : std::uint8_t { pass, fail, skipped, degraded, inconclusive, not_run };
// The verdict of a run (Verdict::verdict), and what one finding or phase does to it
// (classify.h: finding_effect(), phase_effect(); `pass` there means "no effect").
enum class Outcome : std::uint8_t { pass, degraded, fail, inconclusive };
enum class RankStatus : std::uint8_t { joined, missing, lost, failed };
// Verdict::scope: rank 0's merged document, or one rank's own view.
enum class Scope : std::uint8_t { global, local };
// StoreInfo::dialect: the wire dialect the client spoke (rendezvous/wire: legacy <= torch 2.0).
enum class StoreDialect : std::uint8_t { legacy, modern };

// Fields the schema leaves free text, so that a verdict written by a newer ncclsmoke (a new
// launcher, a new torch era) is still read: each is an Open<> value (below), which keeps a
// spelling this build does not know as text, as AnyCode does for codes. `unknown` is last and
// spelled "" (never written for a known value).
// World::source: the launcher the world was read from (harness/world/launchers.cpp, one entry each):
// "flags", "torchrun", "openmpi", "slurm", "k8s-indexed-job", "pytorchjob" (a Kubeflow
// PyTorchJob pod without torchrun), "trainer-v2" (a Kubeflow Trainer v2 TrainJob pod),
// "leaderworkerset", "jobset", "launch" (`ncclsmoke launch` on its own, no launcher around it).
enum class WorldSource : std::uint8_t {
  flags,
  torchrun,
  openmpi,
  slurm,
  k8s_indexed_job,
  pytorchjob,
  trainer_v2,
  leaderworkerset,
  jobset,
  launch,
  unknown
};
// StoreInfo::hosted_by: "rank 0", "torchelastic agent", "external (--store)".
enum class StoreHostedBy : std::uint8_t { rank0, torchelastic_agent, external, unknown };
// StoreInfo::era: the server's era as negotiated, "torch<=2.0", "torch2.1-2.4", "torch>=2.5"
// (rendezvous/dialect_probe.h's StoreEra, same spelling), or "ncclsmoke" when the client was told
// the dialect instead of negotiating it.
enum class ServerEra : std::uint8_t { torch_le_2_0, torch_2_1_to_2_4, torch_ge_2_5, ncclsmoke, unknown };
// Which observer or rule made a finding, so that another rule recognises it by type, never by its
// evidence or subject text. `none`: any other (and any spelling this version does not know).
enum class FindingOrigin : std::uint8_t {
  none,
  liveness_watch,    // the watch saw the peer die, or heard it alive to the end
  lossy_path,        // the watch heard silence while its connection retransmitted, and its rule
  nccl_net_check,    // nccl_judge.h: the network NCCL reported against the expected one
  profile_identity,  // judge.h: a transport's identity against the profile's
  store_port,        // rank 0 could not listen on the store's port (taken, or not allowed)
};

// Every verdict value, in the schema's (and the enum's) order: the order reports and metrics list
// them in. Ranking them (which one is worse) is ordering.h's verdict_rank().
inline constexpr Outcome kAllOutcomes[] = {Outcome::pass, Outcome::degraded, Outcome::fail,
                                           Outcome::inconclusive};
inline constexpr PhaseStatus kAllPhaseStatuses[] = {
    PhaseStatus::pass,     PhaseStatus::fail,         PhaseStatus::skipped,
    PhaseStatus::degraded, PhaseStatus::inconclusive, PhaseStatus::not_run};
inline constexpr RankStatus kAllRankStatuses[] = {RankStatus::joined, RankStatus::missing,
                                                  RankStatus::lost, RankStatus::failed};

// Every code of the finding table (finding_codes.def), in its order. `unknown` is last and never
// in the table: a code read from JSON that this build does not know.
enum class Code : std::uint8_t {
#define NCCLSMOKE_CODE(name, ...) name,
#include "results/verdict/finding_codes.def"
#undef NCCLSMOKE_CODE
  unknown
};

// The schema's spelling. to_string(Code::unknown) is "" (an AnyCode keeps the real text).
std::string_view name(Severity s);
std::string_view name(Layer l);
std::string_view name(PhaseStatus s);
std::string_view name(Outcome o);
std::string_view name(RankStatus s);
std::string_view name(Code c);
std::string_view name(Scope s);
std::string_view name(StoreDialect d);
std::string_view name(WorldSource s);    // unknown: ""
std::string_view name(StoreHostedBy h);  // unknown: ""
std::string_view name(ServerEra e);      // unknown: ""
std::string_view name(FindingOrigin o);  // none: ""
inline std::string to_string(Severity s) { return std::string(name(s)); }
inline std::string to_string(Layer l) { return std::string(name(l)); }
inline std::string to_string(PhaseStatus s) { return std::string(name(s)); }
inline std::string to_string(Outcome o) { return std::string(name(o)); }
inline std::string to_string(RankStatus s) { return std::string(name(s)); }
inline std::string to_string(Code c) { return std::string(name(c)); }
inline std::string to_string(Scope s) { return std::string(name(s)); }
inline std::string to_string(StoreDialect d) { return std::string(name(d)); }
inline std::string to_string(WorldSource s) { return std::string(name(s)); }
inline std::string to_string(StoreHostedBy h) { return std::string(name(h)); }
inline std::string to_string(ServerEra e) { return std::string(name(e)); }
inline std::string to_string(FindingOrigin o) { return std::string(name(o)); }

// The inverse of to_string(); nullopt for any other spelling (case matters, as in the schema).
std::optional<Severity> parse_severity(std::string_view s);
std::optional<Layer> parse_layer(std::string_view s);
std::optional<PhaseStatus> parse_phase_status(std::string_view s);
std::optional<Outcome> parse_outcome(std::string_view s);
std::optional<RankStatus> parse_rank_status(std::string_view s);
// A code of the table; nullopt for anything else (including "unknown").
std::optional<Code> parse_code(std::string_view s);
std::optional<Scope> parse_scope(std::string_view s);
std::optional<StoreDialect> parse_store_dialect(std::string_view s);
// The open lists: a known spelling only (nullopt for any other, "" included).
std::optional<WorldSource> parse_world_source(std::string_view s);
std::optional<StoreHostedBy> parse_store_hosted_by(std::string_view s);
std::optional<ServerEra> parse_server_era(std::string_view s);
std::optional<FindingOrigin> parse_finding_origin(std::string_view s);  // not ""

// True when `s` matches the schema's code pattern ^[A-Z][A-Z0-9_]*$.
bool is_code_shape(std::string_view s);

// A finding's code: a known Code, or an unknown one that keeps its text (see the top).
class AnyCode {
 public:
  AnyCode() = default;  // unknown, empty text: not valid in a verdict (the schema rejects "")
  AnyCode(Code c) : code_(c) {}  // NOLINT(google-explicit-constructor): Code::X reads as a code
  // A known code, or an unknown one with the schema's shape; nullopt for a bad shape.
  static std::optional<AnyCode> parse(std::string_view text);
  // parse(), but a bad shape is kept too (for readers that already validated, or must not throw).
  static AnyCode from_text(std::string_view text);

  Code code() const { return code_; }
  bool known() const { return code_ != Code::unknown; }
  std::string_view str() const { return known() ? name(code_) : std::string_view(text_); }

  friend bool operator==(const AnyCode& a, const AnyCode& b) { return a.str() == b.str(); }
  friend bool operator==(const AnyCode& a, Code c) { return c != Code::unknown && a.code_ == c; }
  friend std::strong_ordering operator<=>(const AnyCode& a, const AnyCode& b) {
    return a.str().compare(b.str()) <=> 0;
  }

 private:
  Code code_ = Code::unknown;
  std::string text_;  // only for an unknown code
};
inline std::string_view name(const AnyCode& c) { return c.str(); }
inline std::string to_string(const AnyCode& c) { return std::string(c.str()); }

// A value of an open list (see WorldSource above): a known E, or E::unknown plus the text read,
// kept so it round-trips JSON -> model -> JSON unchanged. Any text is accepted (the schema's
// "type": "string"); the default is unknown with empty text (e.g. the world was never
// discovered: World::source ""). Compare with `w.source == WorldSource::slurm` (false for every
// unknown value).
template <typename E, std::optional<E> (*Parse)(std::string_view)>
class Open {
 public:
  Open() = default;
  Open(E e) : value_(e) {}  // NOLINT(google-explicit-constructor): E::x reads as the value
  static Open from_text(std::string_view text) {
    if (auto e = Parse(text)) return Open(*e);
    Open o;
    o.text_ = std::string(text);
    return o;
  }

  E value() const { return value_; }
  bool known() const { return value_ != E::unknown; }
  std::string_view str() const { return known() ? name(value_) : std::string_view(text_); }

  friend bool operator==(const Open& a, const Open& b) { return a.str() == b.str(); }
  friend bool operator==(const Open& a, E e) { return e != E::unknown && a.value_ == e; }

 private:
  E value_ = E::unknown;
  std::string text_;  // only for an unknown value
};
using AnyWorldSource = Open<WorldSource, parse_world_source>;
using AnyStoreHostedBy = Open<StoreHostedBy, parse_store_hosted_by>;
using AnyServerEra = Open<ServerEra, parse_server_era>;
template <typename E, std::optional<E> (*P)(std::string_view)>
std::string_view name(const Open<E, P>& v) {
  return v.str();
}
template <typename E, std::optional<E> (*P)(std::string_view)>
std::string to_string(const Open<E, P>& v) {
  return std::string(v.str());
}

// For gtest and logs: the schema's spelling.
std::ostream& operator<<(std::ostream& os, Severity s);
std::ostream& operator<<(std::ostream& os, Layer l);
std::ostream& operator<<(std::ostream& os, PhaseStatus s);
std::ostream& operator<<(std::ostream& os, Outcome o);
std::ostream& operator<<(std::ostream& os, RankStatus s);
std::ostream& operator<<(std::ostream& os, Code c);
std::ostream& operator<<(std::ostream& os, const AnyCode& c);
std::ostream& operator<<(std::ostream& os, Scope s);
std::ostream& operator<<(std::ostream& os, StoreDialect d);
std::ostream& operator<<(std::ostream& os, WorldSource s);    // unknown: "<unknown>"
std::ostream& operator<<(std::ostream& os, StoreHostedBy h);  // unknown: "<unknown>"
std::ostream& operator<<(std::ostream& os, ServerEra e);      // unknown: "<unknown>"
std::ostream& operator<<(std::ostream& os, const AnyWorldSource& s);  // the text, as written
std::ostream& operator<<(std::ostream& os, const AnyStoreHostedBy& h);
std::ostream& operator<<(std::ostream& os, const AnyServerEra& e);

void to_json(nlohmann::json& j, Severity s);
void to_json(nlohmann::json& j, Layer l);
void to_json(nlohmann::json& j, PhaseStatus s);
void to_json(nlohmann::json& j, Outcome o);
void to_json(nlohmann::json& j, RankStatus s);
void to_json(nlohmann::json& j, Code c);
void to_json(nlohmann::json& j, const AnyCode& c);
void to_json(nlohmann::json& j, Scope s);
void to_json(nlohmann::json& j, StoreDialect d);
void to_json(nlohmann::json& j, WorldSource s);
void to_json(nlohmann::json& j, StoreHostedBy h);
void to_json(nlohmann::json& j, ServerEra e);
void to_json(nlohmann::json& j, const AnyWorldSource& s);
void to_json(nlohmann::json& j, const AnyStoreHostedBy& h);
void to_json(nlohmann::json& j, const AnyServerEra& e);
void from_json(const nlohmann::json& j, Severity& s);
void from_json(const nlohmann::json& j, Layer& l);
void from_json(const nlohmann::json& j, PhaseStatus& s);
void from_json(const nlohmann::json& j, Outcome& o);
void from_json(const nlohmann::json& j, RankStatus& s);
void from_json(const nlohmann::json& j, Code& c);  // a code of the table only
void from_json(const nlohmann::json& j, AnyCode& c);
void from_json(const nlohmann::json& j, Scope& s);
void from_json(const nlohmann::json& j, StoreDialect& d);
void from_json(const nlohmann::json& j, WorldSource& s);    // a known spelling only
void from_json(const nlohmann::json& j, StoreHostedBy& h);  // a known spelling only
void from_json(const nlohmann::json& j, ServerEra& e);      // a known spelling only
// Any string (an unknown one keeps its text); throws only for a non-string.
void from_json(const nlohmann::json& j, AnyWorldSource& s);
void from_json(const nlohmann::json& j, AnyStoreHostedBy& h);
void from_json(const nlohmann::json& j, AnyServerEra& e);

}  // namespace ncclsmoke::results

// fmt::format("{}", x) writes the schema's spelling, as operator<< does.
#define NCCLSMOKE_RESULTS_FORMATTER(T)                                               \
  template <>                                                                        \
  struct fmt::formatter<T> : fmt::formatter<std::string_view> {                      \
    template <typename FormatContext>                                                \
    auto format(const T& v, FormatContext& ctx) const {                              \
      return fmt::formatter<std::string_view>::format(ncclsmoke::results::name(v), ctx); \
    }                                                                                \
  };
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::Severity)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::Layer)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::PhaseStatus)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::Outcome)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::RankStatus)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::Code)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::AnyCode)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::Scope)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::StoreDialect)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::WorldSource)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::StoreHostedBy)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::ServerEra)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::AnyWorldSource)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::AnyStoreHostedBy)
NCCLSMOKE_RESULTS_FORMATTER(ncclsmoke::results::AnyServerEra)
#undef NCCLSMOKE_RESULTS_FORMATTER
