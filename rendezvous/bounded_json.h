#pragma once
// The one JSON parse for text from outside the process: a verdict file, a rank's posted verdict,
// a peer's store post, a history row, an MPI wire message. nlohmann parses iteratively, but what
// comes after recurses once per level (dump(), the schema validator, copying into evidence), so a
// document 100,000 levels deep crashes the reader long after it "parsed". Every reader therefore
// parses through here: the text is first scanned without recursion (its size, and the depth of
// `[` and `{` outside strings), and only text within both limits reaches nlohmann. A document that
// passed holds nothing deeper than kMaxJsonDepth, so everything later may recurse on it.
//
// Placement: a leaf library of its own (ncclsmoke_bounded_json: nlohmann and fmt, nothing else),
// in rendezvous/ because the store posts are read there, the lowest module that reads outside
// JSON; results/verdict, results/history, cronjob and transports link this target alone, so none
// of them depends on the network code of ncclsmoke_rendezvous.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ncclsmoke::rendezvous {

// Levels of `[`/`{`: a verdict uses 5, its free-form evidence a few more.
inline constexpr int kMaxJsonDepth = 64;

// Size limits, by what is read. A verdict of a 4096-rank world with every finding is a few MiB.
inline constexpr std::size_t kMaxVerdictJsonBytes = std::size_t{64} << 20;   // file, post, row
// One rank's store post (mesh result, sweep figures, abort record, identity, owner) and the
// roster rank 0 posts for the whole world.
inline constexpr std::size_t kMaxStorePostJsonBytes = std::size_t{16} << 20;
// A small record: one history column (ranks, hosts, subject), one MPI wire message.
inline constexpr std::size_t kMaxSmallJsonBytes = std::size_t{1} << 20;

// Why `text` is outside the limits, or nullopt: "nested deeper than 64 levels at byte 1234",
// "12.0 MiB, more than the 8.0 MiB limit". Linear, no recursion, no allocation; says nothing
// about whether the text is JSON.
std::optional<std::string> json_limit_problem(std::string_view text, std::size_t max_bytes,
                                              int max_depth = kMaxJsonDepth);

// A parse's result: the value, or the error (a limit exceeded, or "not JSON at byte 12: ...").
struct BoundedJson {
  nlohmann::json value;  // discarded when !ok()
  std::string error;
  bool ok() const { return error.empty(); }
};
BoundedJson parse_bounded_json(std::string_view text, std::size_t max_bytes,
                               int max_depth = kMaxJsonDepth);

// The drop-in for json::parse(text, nullptr, false): a discarded value on any problem.
nlohmann::json parse_bounded_or_discarded(std::string_view text, std::size_t max_bytes);

// Whether a tree already built (from anywhere) nests deeper than `max_depth`; iterative, and it
// stops at the first level too deep. The guard of readers handed a tree (verdict_from_json).
bool json_deeper_than(const nlohmann::json& j, int max_depth = kMaxJsonDepth);

// "812 bytes", "4.0 KiB", "12.0 MiB": for limit messages.
std::string json_size_text(std::size_t bytes);

}  // namespace ncclsmoke::rendezvous
