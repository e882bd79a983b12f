#pragma once
// Backend options, declared once. Each backend lists what it accepts (name, help, default, kind
// and range) in its own folder (<backend>/<backend>_options.cpp); the registry (registry.h) carries
// the list; the CLI turns every declaration into a --<backend>-<option> flag (harness/
// run_options.cpp) and checks the value at the door with the same check the backend reads it
// with. Adding an option is therefore one edit in the backend's folder, plus the line that reads
// it. Values travel as text under the key "<backend>.<name>" (TransportContext::options); a
// backend reads them typed (get_size, get_int, get_bool, get_string) and never parses text.
// A value that depends on the rank (nccl.gpu from the local rank) is the declaration's
// per-rank default (rank_default below), so the harness names no backend and no key.
//
// Dependencies point one way: registry.h includes this header, never the reverse. The lookup of
// the declarations (all_options, find_option) is declared here, because BackendOptions needs it,
// and defined by the registry, which owns the list of backends.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ncclsmoke::transports {

// The one size parser, behind every size flag and option (--min-bytes, --max-bytes,
// --gate-bytes, --socket-chunk, socket.bufsize, fabric.chunk_bytes ...): a plain decimal integer
// with an optional binary suffix, as nccl-tests reads -b/-e: K, k, KiB = 2^10; M, m, MiB = 2^20;
// G, g, GiB = 2^30; B or nothing = bytes. "KB", "MB", "GB" are refused, not guessed: nccl-tests
// reads 1MB as 2^20 but most tools as 10^6, so the user writes M or MiB and means one thing. No
// sign, fraction, exponent or spaces; at most kMaxSize (1 TiB: more is a typo, not a message).
inline constexpr std::uint64_t kMaxSize = std::uint64_t{1} << 40;
std::optional<std::uint64_t> parse_size(std::string_view text);
// The same parser in the out-parameter form the sweep code uses; false (bytes untouched) when
// `text` is not a size.
bool parse_size(const std::string& text, std::size_t& bytes);
// 1048576 -> "1M", 1536 -> "1536", 0 -> "0": the shortest exact spelling parse_size reads back.
std::string size_text(std::uint64_t bytes);
// "" when `text` is a size in [min, max], else the reason, to follow the quoted value:
// "is not a size (accepted: a size from 1K to 256M; bytes or K/KiB, M/MiB, G/GiB, e.g. ...)".
std::string check_size(const std::string& text, std::uint64_t min, std::uint64_t max);

enum class OptionKind { string, size, integer, boolean, choice };

class BackendOptions;

// What a per-rank default may depend on: known once the world is, in every rank.
struct RankFacts {
  int rank = 0;
  int local_rank = 0;     // rank on this node
  std::string out_dir;    // the run's output folder (--out-dir)
};
// The value one rank gets for an option it was not given; `given` is what was given, so one
// option's default may follow another (nccl.gpu is 0 when nccl.share_gpu is set).
using RankDefault = std::function<std::string(const RankFacts&, const BackendOptions& given)>;

// One option of one backend. Build it with the *_option functions below.
struct OptionSpec {
  std::string backend;  // "socket"
  std::string name;     // "chunk": key "socket.chunk", flag --socket-chunk (underscores -> dashes)
  std::string help;     // one sentence for --help
  OptionKind kind = OptionKind::string;
  // The value when none is given; "" = unset, the backend then decides (default_help says how).
  std::string default_text;
  std::string default_help;          // --help's default when default_text is "" (e.g. LOCAL_RANK)
  std::int64_t min = 0, max = 0;     // size / integer: the accepted range, inclusive
  std::vector<std::string> choices;  // choice: the accepted words
  // Earlier spellings that do not follow the pattern (e.g. "--gpu" for nccl.gpu). They stay
  // accepted; the first one is the name --help and error messages use.
  std::vector<std::string> aliases;
  RankDefault per_rank_default;  // when set: the value of a rank that was not given one
  // --gate (harness/run/run_options.cpp): the value this option takes under a gate (nccl.policy:
  // pin), and why, for the refusal of another explicit value ("a gate pins NCCL's network").
  std::string gate_value, gate_reason;
  // The option states what the run must observe (nccl.net): a gate needs --profile or one of
  // these, so there is an expectation to fail closed on.
  bool gate_expectation = false;

  std::string key() const;                 // "socket.chunk"
  std::string flag() const;                // "--socket-chunk"
  std::vector<std::string> flags() const;  // aliases first, then flag()
  // What the option accepts, for messages: "an integer from 1 to 16", "pin or observe" ...
  std::string accepted() const;
  // "" when `value` is accepted, else the reason, worded to follow the quoted value, so the door
  // says "--socket-chunk: '12X' is not a size (accepted: ...)" and the backend says
  // "socket.chunk=\"12X\" is not a size (accepted: ...)" from the same text.
  std::string check(const std::string& value) const;

  OptionSpec& alias(std::string flag_spelling) {
    aliases.push_back(std::move(flag_spelling));
    return *this;
  }
  OptionSpec& shown_default(std::string text) {
    default_help = std::move(text);
    return *this;
  }
  OptionSpec& rank_default(RankDefault f) {
    per_rank_default = std::move(f);
    return *this;
  }
  OptionSpec& under_gate(std::string value, std::string why) {
    gate_value = std::move(value);
    gate_reason = std::move(why);
    return *this;
  }
  OptionSpec& expectation() {
    gate_expectation = true;
    return *this;
  }
};

OptionSpec string_option(std::string backend, std::string name, std::string help,
                         std::string default_text = "");
OptionSpec size_option(std::string backend, std::string name, std::string help,
                       std::string default_text, std::uint64_t min, std::uint64_t max);
OptionSpec int_option(std::string backend, std::string name, std::string help,
                      std::string default_text, std::int64_t min, std::int64_t max);
// A flag without a value (--nccl-share-gpu): false unless given. Text form "true" / "false"
// (also 1/0, yes/no, on/off when set programmatically).
OptionSpec bool_option(std::string backend, std::string name, std::string help);
OptionSpec choice_option(std::string backend, std::string name, std::string help,
                         std::string default_text, std::vector<std::string> choices);

// A value a backend cannot use (or a key nobody declared); what() names the key and the value,
// e.g. `socket.nconn="two" is not an integer (accepted: an integer from 1 to 16)`. A backend
// rethrows it as its TransportError with its own kind and who-prefix.
class OptionError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The option values one transport gets: text by key, as given on the command line (already
// checked at the door) or set by a test. The typed getters look the key up in the registry's
// declarations, take the given text or else the declared default, and check it with the
// declaration (so a value set by a test gets the door's message): they throw OptionError.
class BackendOptions {
 public:
  BackendOptions() = default;
  BackendOptions(std::map<std::string, std::string> values)  // NOLINT: implicit on purpose
      : values_(std::move(values)) {}
  std::string& operator[](const std::string& key) { return values_[key]; }
  const std::map<std::string, std::string>& values() const { return values_; }

  bool given(const std::string& key) const { return values_.count(key) > 0; }
  // The given text, else `fallback`; no declaration needed and nothing checked.
  std::string raw(const std::string& key, const std::string& fallback = "") const;

  std::string get_string(const std::string& key) const;  // string and choice options
  std::uint64_t get_size(const std::string& key) const;
  std::int64_t get_int(const std::string& key) const;
  // nullopt when neither given nor declared with a default (e.g. nccl.gpu: LOCAL_RANK then).
  std::optional<std::int64_t> find_int(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  // Checks every given value of `backend` ("socket") against its declaration, so a backend can
  // fail once at the start of open() and read without try blocks afterwards.
  void validate(const std::string& backend) const;

 private:
  std::string text(const std::string& key, const OptionSpec** spec) const;
  std::map<std::string, std::string> values_;
};

// Every backend's declarations, in registry order; the one of `key` ("socket.chunk") or nullptr.
// Defined in registry.cpp (see the top of this file).
std::vector<const OptionSpec*> all_options();
const OptionSpec* find_option(const std::string& key);

// The options one rank's transports get: `given`, plus each declared per-rank default of an
// option not given, computed for `rank`. An option without one stays absent (its declared
// default applies when the backend reads it).
std::map<std::string, std::string> with_rank_defaults(std::map<std::string, std::string> given,
                                                      const RankFacts& rank);

}  // namespace ncclsmoke::transports
