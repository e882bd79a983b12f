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
// finding table, finding_codes.cpp) or, for a code this build does not know, Code::unknown plus
// the code's text, which it keeps so the code round-trips JSON -> model -> JSON unchanged.
// make_finding() takes a Code, so only known codes can be made here; AnyCode::parse() is for
// readers. Compare with `f.code == Code::PEER_LOST` (false for every unknown code).
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
enum class Layer : std::uint8_t { config, rendezvous, mesh, transport, data, run };
enum class PhaseStatus : std::uint8_t { pass, fail, skipped, degraded, inconclusive, not_run };
// The verdict of a run (Verdict::verdict), and what one finding or phase does to it
// (classify.h: finding_effect(), phase_effect(); `pass` there means "no effect").
enum class Outcome : std::uint8_t { pass, degraded, fail, inconclusive };
enum class RankStatus : std::uint8_t { joined, missing, lost, failed };

// Every code in the finding table (finding_codes.cpp), in the table's order. Add, never rename:
// dashboards and alert rules match on the text. A test checks that this list and the table agree.
#define NCCLSMOKE_FINDING_CODES(X) \
  X(CONFIG_INVALID)                \
  X(CONFIG_MISSING)                \
  X(RENDEZVOUS_DNS)                \
  X(RENDEZVOUS_REFUSED)            \
  X(RENDEZVOUS_TIMEOUT)            \
  X(RENDEZVOUS_STALLED)            \
  X(RENDEZVOUS_UNREACHABLE)        \
  X(RANKS_MISSING)                 \
  X(WORLD_MISMATCH)                \
  X(STORE_FOREIGN_JOB)             \
  X(RENDEZVOUS_LOST)               \
  X(MESH_BLOCKED)                  \
  X(MESH_INCOMPLETE)               \
  X(PEER_LOST)                     \
  X(PEER_STALLED)                  \
  X(RUN_TIMEOUT)                   \
  X(RUN_TERMINATED)                \
  X(RESULTS_MISSING)               \
  X(TRANSPORT_INIT_FAILED)         \
  X(TRANSPORT_UNAVAILABLE)         \
  X(TRANSPORT_TIMEOUT)             \
  X(SILENT_FALLBACK)               \
  X(BANDWIDTH_REGRESSION)          \
  X(STRAGGLER)                     \
  X(DATA_CORRUPTION)               \
  X(BASELINE_MISSING)

#define NCCLSMOKE_CODE_ENUMERATOR(name) name,
// `unknown` is last and never in the table: a code read from JSON that this build does not know.
enum class Code : std::uint8_t { NCCLSMOKE_FINDING_CODES(NCCLSMOKE_CODE_ENUMERATOR) unknown };
#undef NCCLSMOKE_CODE_ENUMERATOR

// The schema's spelling. to_string(Code::unknown) is "" (an AnyCode keeps the real text).
std::string_view name(Severity s);
std::string_view name(Layer l);
std::string_view name(PhaseStatus s);
std::string_view name(Outcome o);
std::string_view name(RankStatus s);
std::string_view name(Code c);
inline std::string to_string(Severity s) { return std::string(name(s)); }
inline std::string to_string(Layer l) { return std::string(name(l)); }
inline std::string to_string(PhaseStatus s) { return std::string(name(s)); }
inline std::string to_string(Outcome o) { return std::string(name(o)); }
inline std::string to_string(RankStatus s) { return std::string(name(s)); }
inline std::string to_string(Code c) { return std::string(name(c)); }

// The inverse of to_string(); nullopt for any other spelling (case matters, as in the schema).
std::optional<Severity> parse_severity(std::string_view s);
std::optional<Layer> parse_layer(std::string_view s);
std::optional<PhaseStatus> parse_phase_status(std::string_view s);
std::optional<Outcome> parse_outcome(std::string_view s);
std::optional<RankStatus> parse_rank_status(std::string_view s);
// A code of the table; nullopt for anything else (including "unknown").
std::optional<Code> parse_code(std::string_view s);

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

// For gtest and logs: the schema's spelling.
std::ostream& operator<<(std::ostream& os, Severity s);
std::ostream& operator<<(std::ostream& os, Layer l);
std::ostream& operator<<(std::ostream& os, PhaseStatus s);
std::ostream& operator<<(std::ostream& os, Outcome o);
std::ostream& operator<<(std::ostream& os, RankStatus s);
std::ostream& operator<<(std::ostream& os, Code c);
std::ostream& operator<<(std::ostream& os, const AnyCode& c);

void to_json(nlohmann::json& j, Severity s);
void to_json(nlohmann::json& j, Layer l);
void to_json(nlohmann::json& j, PhaseStatus s);
void to_json(nlohmann::json& j, Outcome o);
void to_json(nlohmann::json& j, RankStatus s);
void to_json(nlohmann::json& j, Code c);
void to_json(nlohmann::json& j, const AnyCode& c);
void from_json(const nlohmann::json& j, Severity& s);
void from_json(const nlohmann::json& j, Layer& l);
void from_json(const nlohmann::json& j, PhaseStatus& s);
void from_json(const nlohmann::json& j, Outcome& o);
void from_json(const nlohmann::json& j, RankStatus& s);
void from_json(const nlohmann::json& j, Code& c);  // a code of the table only
void from_json(const nlohmann::json& j, AnyCode& c);

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
#undef NCCLSMOKE_RESULTS_FORMATTER
