// Backend options declared once (transports/options.h): the one size parser's accepted and
// refused spellings; every declared option is reachable as a generated --<backend>-<option> flag
// (and its older spelling), checked at the door with a message naming the flag; launch forwards
// what was given; the typed getters a backend reads with apply the declared default and reject
// what the door would reject; backend_options_for_run adds the per-rank values.
#include "transports/options.h"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/run/run_options.h"
#include "rendezvous/memory_store.h"
#include "tests/harness/run_args.h"
#include "transports/registry.h"

namespace ncclsmoke::transports {
namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(SizeParser, AcceptsBinarySuffixesAsNcclTestsReadsThem) {
  const std::pair<const char*, std::uint64_t> ok[] = {
      {"0", 0},           {"1", 1},           {"4096", 4096},      {"7B", 7},
      {"512K", 512 << 10}, {"512k", 512 << 10}, {"512KiB", 512 << 10}, {"4M", 4 << 20},
      {"4m", 4 << 20},     {"4MiB", 4 << 20},   {"1G", 1 << 30},     {"1g", 1 << 30},
      {"1GiB", 1 << 30},   {"1024G", kMaxSize}, {"1099511627776", kMaxSize}};
  for (auto [text, bytes] : ok) {
    auto v = parse_size(std::string_view(text));
    ASSERT_TRUE(v.has_value()) << text;
    EXPECT_EQ(*v, bytes) << text;
    std::size_t b = 0;
    EXPECT_TRUE(parse_size(std::string(text), b)) << text;
    EXPECT_EQ(b, bytes) << text;
  }
}

TEST(SizeParser, RefusesAmbiguousFractionalSignedAndHugeSpellings) {
  for (const char* bad : {"", "1MB", "1KB", "1GB", "1mb", "1.5M", "1e6", "-1", "+1", " 1", "1 ",
                          "1T", "1TiB", "x", "M", "0x10", "1M1", "1025G", "1099511627777",
                          "99999999999999999999999"}) {
    EXPECT_FALSE(parse_size(std::string_view(bad)).has_value()) << "'" << bad << "'";
    std::size_t b = 12345;
    EXPECT_FALSE(parse_size(std::string(bad), b)) << bad;
    EXPECT_EQ(b, 12345u) << "a refused size leaves the output alone: " << bad;
  }
}

TEST(SizeParser, SizeTextIsTheShortestExactSpellingAndReadsBack) {
  EXPECT_EQ(size_text(0), "0");
  EXPECT_EQ(size_text(1536), "1536");
  EXPECT_EQ(size_text(1 << 10), "1K");
  EXPECT_EQ(size_text(256u << 20), "256M");
  EXPECT_EQ(size_text(std::uint64_t{3} << 30), "3G");
  for (std::uint64_t b : std::vector<std::uint64_t>{0, 1, 1000, 1536, 1ull << 20, 3ull << 30, kMaxSize})
    EXPECT_EQ(parse_size(std::string_view(size_text(b))).value_or(~0ull), b) << b;
  EXPECT_EQ(check_size("4K", 1024, 4096), "");
  EXPECT_TRUE(has(check_size("8K", 1024, 4096), "is not a size (accepted: a size from 1K to 4K"));
  EXPECT_TRUE(has(check_size("1MB", 1, kMaxSize), "is not a size"));
}

// ---- the declarations --------------------------------------------------------------------

TEST(OptionDeclarations, AreUniqueFollowThePatternAndHaveValidDefaults) {
  std::set<std::string> keys, flags;
  for (const auto* s : all_options()) {
    EXPECT_TRUE(find_backend(s->backend)) << s->key();
    EXPECT_TRUE(keys.insert(s->key()).second) << "declared twice: " << s->key();
    for (const auto& f : s->flags()) EXPECT_TRUE(flags.insert(f).second) << "flag twice: " << f;
    EXPECT_FALSE(s->help.empty()) << s->key();
    EXPECT_EQ(s->flag().find('_'), std::string::npos) << s->flag();
    EXPECT_EQ(s->flags().back(), s->flag()) << s->key();
    if (!s->default_text.empty()) {
      EXPECT_EQ(s->check(s->default_text), "") << s->key();
    }
    if (s->kind == OptionKind::boolean) {
      EXPECT_EQ(s->default_text, "false") << s->key();
    }
    if (s->kind == OptionKind::integer || s->kind == OptionKind::size) {
      EXPECT_LE(s->min, s->max) << s->key();
    }
  }
  EXPECT_EQ(find_option("fabric.hw_counters_root")->flag(), "--fabric-hw-counters-root");
  EXPECT_EQ(find_option("socket.chunk")->flag(), "--socket-chunk");
  EXPECT_EQ(find_option("nosuch.option"), nullptr);
}

TEST(OptionDeclarations, EveryOptionThatExistsTodayIsDeclared) {
  for (const char* key :
       {"socket.ifname", "socket.nconn", "socket.chunk", "socket.bufsize", "fabric.provider",
        "fabric.domain", "fabric.chunk_bytes", "fabric.window", "fabric.hw_counters",
        "fabric.hw_counters_root", "mpi.collective", "nccl.net", "nccl.policy", "nccl.share_gpu",
        "nccl.gpu", "nccl.lib", "nccl.cudart", "nccl.debug_file"})
    EXPECT_NE(find_option(key), nullptr) << key;
}

// The user-facing default of nccl.policy is the backend's default: one declaration.
TEST(OptionDeclarations, NcclPolicyDefaultsToObserveEverywhere) {
  EXPECT_EQ(find_option("nccl.policy")->default_text, "observe");
  BackendOptions none;
  EXPECT_EQ(none.get_string("nccl.policy"), "observe");
  // RunOptions holds no copy of it: an option not given is absent, and its default applies.
  harness::RunOptions o;
  EXPECT_EQ(o.backend_options.count("nccl.policy"), 0u);
}

// ---- the typed getters a backend reads with ----------------------------------------------

TEST(BackendOptions, GettersApplyTheDeclaredDefaultAndTheGivenValue) {
  BackendOptions none;
  EXPECT_EQ(none.get_int("socket.nconn"), 1);
  EXPECT_EQ(none.get_size("socket.chunk"), 1u << 20);
  EXPECT_EQ(none.get_size("socket.bufsize"), 0u);
  EXPECT_EQ(none.get_string("fabric.provider"), "tcp");
  EXPECT_EQ(none.get_int("fabric.window"), 4);
  EXPECT_EQ(none.get_string("fabric.hw_counters"), "auto");
  EXPECT_EQ(none.get_string("mpi.collective"), "allreduce");
  EXPECT_FALSE(none.get_bool("nccl.share_gpu"));
  EXPECT_FALSE(none.find_int("nccl.gpu").has_value());  // LOCAL_RANK: the backend decides
  EXPECT_FALSE(none.given("socket.chunk"));

  BackendOptions given(std::map<std::string, std::string>{
      {"socket.chunk", "512K"}, {"socket.nconn", "4"}, {"nccl.share_gpu", "true"},
      {"nccl.gpu", "3"}, {"fabric.window", "256"}});
  EXPECT_EQ(given.get_size("socket.chunk"), 512u << 10);
  EXPECT_EQ(given.get_int("socket.nconn"), 4);
  EXPECT_TRUE(given.get_bool("nccl.share_gpu"));
  EXPECT_EQ(given.find_int("nccl.gpu").value_or(-1), 3);
  EXPECT_EQ(given.get_int("fabric.window"), 256);
  EXPECT_NO_THROW(given.validate("socket"));
  given["socket.bufsize"] = "2G";
  EXPECT_NO_THROW(given.validate("fabric"));  // only that backend's keys
  EXPECT_THROW(given.validate("socket"), OptionError);
}

TEST(BackendOptions, ABadValueNamesTheKeyTheValueAndWhatIsAccepted) {
  auto error = [](const std::string& key, const std::string& value) -> std::string {
    BackendOptions o;
    o[key] = value;
    try {
      o.validate(key.substr(0, key.find('.')));
    } catch (const OptionError& e) {
      return e.what();
    }
    return "";
  };
  auto e = error("socket.nconn", "two");
  EXPECT_TRUE(has(e, "socket.nconn=\"two\" is not an integer (accepted: an integer from 1 to 16)"))
      << e;
  e = error("socket.nconn", "17");
  EXPECT_TRUE(has(e, "socket.nconn=\"17\" is out of range")) << e;
  e = error("socket.chunk", "12");
  EXPECT_TRUE(has(e, "socket.chunk=\"12\" is not a size (accepted: a size from 1K to 256M")) << e;
  e = error("fabric.window", "0");
  EXPECT_TRUE(has(e, "fabric.window=\"0\"")) << e;
  e = error("nccl.policy", "sometimes");
  EXPECT_TRUE(has(e, "nccl.policy=\"sometimes\" is not accepted (accepted: pin or observe)")) << e;
  e = error("fabric.hw_counters", "maybe");
  EXPECT_TRUE(has(e, "auto, always or never")) << e;
  e = error("socket.nosuch", "1");
  EXPECT_TRUE(has(e, "socket.nosuch is not declared")) << e;
  EXPECT_EQ(error("socket.ifname", "^docker"), "");
}

// ---- the CLI generated from the declarations ---------------------------------------------

struct Parsed {
  std::string error;
  harness::RunOptions options;
  std::size_t gpu_count = 0;  // what launch reads: get_option("--gpu")->count()
};

Parsed parse(std::vector<std::string> args) {
  CLI::App app("run");
  Parsed p;
  p.error = testing::parse_run_args(app, std::move(args), p.options);
  p.gpu_count = app.get_option("--gpu")->count();
  return p;
}

// A value each kind accepts, other than the default, so the flag visibly did something.
std::string sample(const OptionSpec& s) {
  switch (s.kind) {
    case OptionKind::size: return size_text(static_cast<std::uint64_t>(s.max));
    case OptionKind::integer: return std::to_string(s.max);
    case OptionKind::choice: return s.choices.back() == s.default_text ? s.choices.front()
                                                                       : s.choices.back();
    default: return "value-of-" + s.name;
  }
}

TEST(GeneratedFlags, EveryDeclaredOptionIsReachableUnderEverySpelling) {
  for (const auto* s : all_options()) {
    for (const auto& flag : s->flags()) {
      auto args = s->kind == OptionKind::boolean ? std::vector<std::string>{flag}
                                                 : std::vector<std::string>{flag, sample(*s)};
      auto p = parse(args);
      ASSERT_EQ(p.error, "") << flag;
      auto it = p.options.backend_options.find(s->key());
      ASSERT_NE(it, p.options.backend_options.end()) << flag;
      EXPECT_EQ(it->second, s->kind == OptionKind::boolean ? "true" : sample(*s)) << flag;
      EXPECT_EQ(p.options.backend_options.size(), 1u) << flag;
    }
  }
  // The ones no flag reached before.
  auto p = parse({"--fabric-window", "8", "--fabric-chunk-bytes", "256K", "--fabric-domain", "lo",
                  "--fabric-hw-counters", "never", "--socket-bufsize", "4M", "--mpi-collective",
                  "iallreduce"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.options.backend_options,
            (std::map<std::string, std::string>{{"fabric.window", "8"},
                                                {"fabric.chunk_bytes", "256K"},
                                                {"fabric.domain", "lo"},
                                                {"fabric.hw_counters", "never"},
                                                {"socket.bufsize", "4M"},
                                                {"mpi.collective", "iallreduce"}}));
}

TEST(GeneratedFlags, ABadValueIsRefusedAtTheDoorNamingTheFlag) {
  for (const auto* s : all_options()) {
    if (s->kind == OptionKind::string || s->kind == OptionKind::boolean) continue;
    for (const char* bad : {"bogus", "", "1.5"}) {
      auto p = parse({s->flags().front(), bad});
      EXPECT_TRUE(has(p.error, s->flags().front() + ": '" + bad + "'")) << s->key() << ": " << p.error;
      EXPECT_TRUE(has(p.error, "accepted: " + s->accepted())) << s->key() << ": " << p.error;
    }
  }
  auto p = parse({"--socket-chunk", "12X"});
  EXPECT_TRUE(has(p.error, "--socket-chunk: '12X' is not a size (accepted: a size from 1K to 256M"))
      << p.error;
  p = parse({"--socket-nconn", "17"});
  EXPECT_TRUE(has(p.error, "--socket-nconn: '17' is out of range (accepted: an integer from 1 to 16)"))
      << p.error;
  p = parse({"--gpu", "-1"});
  EXPECT_TRUE(has(p.error, "--gpu: '-1' is out of range (accepted: an integer from 0 to 1023)"))
      << p.error;
  p = parse({"--nccl-policy", "sometimes"});
  EXPECT_TRUE(has(p.error, "--nccl-policy: 'sometimes' is not accepted (accepted: pin or observe)"))
      << p.error;
}

// launch forwards the run flags: every given backend option comes out, and parses back the same.
TEST(GeneratedFlags, ForwardedArgumentsCarryEveryGivenBackendOption) {
  auto p = parse({"--socket-ifname", "^docker", "--socket-nconn", "2", "--socket-chunk", "512K",
                  "--fabric-provider", "efa", "--fabric-hw-counters-root", "/tmp/c",
                  "--fabric-window", "16", "--nccl-net", "IB", "--nccl-policy", "pin",
                  "--nccl-share-gpu", "--gpu", "1", "--nccl-lib", "/x/libnccl.so.2",
                  "--cudart-lib", "/x/libcudart.so", "--mpi-collective", "iallreduce"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.gpu_count, 1u);
  // Every flag lands under its option key.
  EXPECT_EQ(p.options.backend_option("socket.ifname"), "^docker");
  EXPECT_EQ(p.options.backend_option("socket.nconn"), "2");
  EXPECT_EQ(p.options.backend_option("socket.chunk"), "512K");
  EXPECT_EQ(p.options.backend_option("fabric.provider"), "efa");
  EXPECT_EQ(p.options.backend_option("fabric.hw_counters_root"), "/tmp/c");
  EXPECT_EQ(p.options.backend_option("nccl.net"), "IB");
  EXPECT_EQ(p.options.backend_option("nccl.policy"), "pin");
  EXPECT_EQ(p.options.backend_option("nccl.share_gpu"), "true");
  EXPECT_EQ(p.options.backend_option("nccl.gpu"), "1");
  EXPECT_EQ(p.options.backend_option("nccl.lib"), "/x/libnccl.so.2");
  EXPECT_EQ(p.options.backend_option("nccl.cudart"), "/x/libcudart.so");

  auto args = harness::run_option_args(p.options);
  auto back = parse(args);
  ASSERT_EQ(back.error, "");
  EXPECT_EQ(back.options.backend_options, p.options.backend_options);
  EXPECT_EQ(back.gpu_count, 1u);
  // Old spellings are what goes out, so a rank of an older binary still parses them.
  auto at = [&](const std::string& flag) {
    for (std::size_t i = 0; i < args.size(); ++i)
      if (args[i] == flag) return static_cast<int>(i);
    return -1;
  };
  EXPECT_GE(at("--gpu"), 0);
  EXPECT_GE(at("--cudart-lib"), 0);
  EXPECT_GE(at("--nccl-share-gpu"), 0);
  EXPECT_LT(at("--nccl-gpu"), 0);
  // Nothing given: no backend flag is forwarded (each rank applies the declared defaults).
  auto plain = harness::run_option_args(parse({}).options);
  for (const auto* s : all_options())
    for (const auto& f : s->flags())
      EXPECT_EQ(std::count(plain.begin(), plain.end(), f), 0) << f;
}

TEST(GeneratedFlags, GatePinsNcclPolicyInTheBackendOptions) {
  auto p = parse({"--gate", "--nccl-net", "IB"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.options.backend_options["nccl.policy"], "pin");
  EXPECT_EQ(p.options.backend_option("nccl.policy"), "pin");
  auto back = parse(harness::run_option_args(p.options));
  ASSERT_EQ(back.error, "");
  EXPECT_EQ(back.options.backend_options["nccl.policy"], "pin");
}

// What --gate does to a backend comes from the declarations: every gate_value is applied, an
// explicit other value is refused naming the flag, and every declared expectation satisfies it.
TEST(GeneratedFlags, GateSettingsAndExpectationsComeFromTheDeclarations) {
  std::size_t gated = 0, expectations = 0;
  for (const auto* s : all_options()) {
    if (!s->gate_value.empty()) {
      ++gated;
      EXPECT_EQ(s->check(s->gate_value), "") << s->key();
      EXPECT_FALSE(s->gate_reason.empty()) << s->key();
      auto p = parse({"--gate", "--nccl-net", "IB"});
      ASSERT_EQ(p.error, "");
      EXPECT_EQ(p.options.backend_option(s->key()), s->gate_value) << s->key();
      if (s->kind == OptionKind::choice) {
        for (const auto& other : s->choices) {
          if (other == s->gate_value) continue;
          auto e = parse({"--gate", "--nccl-net", "IB", s->flags().front(), other}).error;
          EXPECT_TRUE(has(e, "--gate: " + s->gate_reason + ": drop " + s->flags().front() + " " +
                                 other))
              << e;
        }
      }
    }
    if (s->gate_expectation) {
      ++expectations;
      EXPECT_EQ(parse({"--gate", s->flags().front(), "x"}).error, "") << s->key();
    }
  }
  EXPECT_GE(gated, 1u);
  EXPECT_GE(expectations, 1u);
  auto e = parse({"--gate"}).error;
  EXPECT_TRUE(has(e, "--gate: needs --profile or --nccl-net: without an expectation")) << e;
}

// The per-rank values come only from declarations (rank_default): exactly the declared keys are
// added, and a given value is never replaced.
TEST(RankDefaults, OnlyDeclaredOptionsGetAPerRankValue) {
  std::set<std::string> declared;
  for (const auto* s : all_options())
    if (s->per_rank_default) declared.insert(s->key());
  EXPECT_EQ(declared, (std::set<std::string>{"nccl.debug_file", "nccl.gpu"}));
  auto m = with_rank_defaults({{"socket.chunk", "64K"}}, RankFacts{4, 2, "/o"});
  std::set<std::string> added;
  for (const auto& [k, v] : m)
    if (k != "socket.chunk") added.insert(k);
  EXPECT_EQ(added, declared);
  EXPECT_EQ(m.at("nccl.gpu"), "2");
  EXPECT_EQ(m.at("nccl.debug_file"), "/o/nccl-debug.rank4.log");
  std::map<std::string, std::string> given;
  for (const auto& k : declared) given[k] = "7";
  EXPECT_EQ(with_rank_defaults(given, RankFacts{1, 1, "/o"}), given);
}

// ---- what one rank's transports get --------------------------------------------------------

TEST(BackendOptionsForRun, AddsTheRankDependentValues) {
  auto p = parse({"--socket-chunk", "64K", "--out-dir", "/tmp/run1"});
  ASSERT_EQ(p.error, "");
  auto m = harness::backend_options_for_run(p.options, 5, 1);
  EXPECT_EQ(m["socket.chunk"], "64K");
  EXPECT_EQ(m["nccl.gpu"], "1");  // the local rank
  EXPECT_EQ(m["nccl.debug_file"], "/tmp/run1/nccl-debug.rank5.log");
  EXPECT_FALSE(m.count("nccl.policy"));  // the declared default, observe, applies
  BackendOptions typed(m);
  EXPECT_EQ(typed.get_size("socket.chunk"), 64u << 10);
  EXPECT_EQ(typed.get_string("nccl.policy"), "observe");

  m = harness::backend_options_for_run(parse({"--nccl-share-gpu"}).options, 3, 3);
  EXPECT_EQ(m["nccl.gpu"], "0");  // ranks share one GPU on purpose
  EXPECT_EQ(m["nccl.share_gpu"], "true");
  EXPECT_EQ(m["nccl.debug_file"], "./nccl-debug.rank3.log");

  m = harness::backend_options_for_run(
      parse({"--gpu", "7", "--nccl-share-gpu", "--nccl-debug-file", "/l/n.%r.log"}).options, 2, 2);
  EXPECT_EQ(m["nccl.gpu"], "7");  // a named device wins
  EXPECT_EQ(m["nccl.debug_file"], "/l/n.%r.log");
}

// From the flag to the backend: what the command line gave is what the transport used (a world
// of one on loopback, so nothing but this rank is needed).
nlohmann::json opened_identity(const std::string& backend, const std::vector<std::string>& flags) {
  auto p = parse(flags);
  EXPECT_EQ(p.error, "");
  rendezvous::MemoryStore store;
  TransportContext ctx;
  ctx.rank = 0;
  ctx.world_size = 1;
  ctx.local_address = "127.0.0.1";
  ctx.store = &store;
  ctx.hosts[0] = "host-0";
  ctx.options = harness::backend_options_for_run(p.options, 0, 0);
  auto t = find_backend(backend)->make();
  t->open(ctx, rendezvous::deadline_after(std::chrono::seconds(10)));
  auto id = t->identify();
  t->close();
  return id;
}

TEST(GeneratedFlags, ReachTheSocketBackend) {
  auto id = opened_identity("socket", {"--socket-nconn", "3", "--socket-chunk", "4K",
                                       "--socket-ifname", "lo"});
  EXPECT_EQ(id["nconn"], 3) << id.dump();
  EXPECT_EQ(id["chunk_bytes"], 4096) << id.dump();
  EXPECT_EQ(id["interface"], "lo") << id.dump();
  id = opened_identity("socket", {});
  EXPECT_EQ(id["nconn"], 1) << id.dump();            // the declared defaults
  EXPECT_EQ(id["chunk_bytes"], 1 << 20) << id.dump();
}

TEST(GeneratedFlags, ReachTheFabricBackend) {
  if (!find_backend("fabric")->make) GTEST_SKIP() << find_backend("fabric")->why_missing;
  auto id = opened_identity("fabric", {"--fabric-provider", "tcp", "--fabric-window", "7",
                                       "--fabric-chunk-bytes", "64K"});
  EXPECT_EQ(id["window"], 7) << id.dump();
  EXPECT_EQ(id["chunk_bytes"], 64 << 10) << id.dump();
}

}  // namespace
}  // namespace ncclsmoke::transports
