// Every reader of outside verdict and profile text, fed documents past the limits of
// rendezvous/bounded_json.h (100,000 levels of [ and of {"a":, inside a verdict's evidence too),
// wide and long ones within them, and truncated ones: a clean error naming the problem, never a
// crash. What passes is nested at most 64 levels, so the write path (to_json, dump, the schema,
// the atomic writer) is safe on it. And a history path that is not a regular file is refused.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "cronjob/publish.h"
#include "rendezvous/bounded_json.h"
#include "results/history/history.h"
#include "results/judging/profile.h"
#include "results/verdict/verdict.h"
#include "results/verdict/write.h"
#include "tests/results/sample.h"

namespace ncclsmoke::results {
namespace {

namespace fs = std::filesystem;
using rendezvous::kMaxJsonDepth;

class BoundedTempDir {
 public:
  BoundedTempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ncclsmoke-bounded-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~BoundedTempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

std::string arrays(std::size_t n) { return std::string(n, '[') + std::string(n, ']'); }
std::string objects(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += "{\"a\":";
  return s + "1" + std::string(n, '}');
}

// A valid verdict (the shared sample) whose first finding's evidence is {"deep": <value>}: the
// value's first bracket is at level 5 (root, findings, the finding, evidence).
constexpr int kEvidenceValueLevel = 5;
std::string verdict_with_evidence(const std::string& value) {
  Verdict v = testing::full_sample();
  v.findings.at(0).evidence = {{"deep", "@@VALUE@@"}};
  std::string text = to_json(v).dump();
  const std::string mark = "\"@@VALUE@@\"";
  text.replace(text.find(mark), mark.size(), value);
  return text;
}

struct Doc {
  std::string name;
  std::string text;
  bool verdict;       // a valid verdict: every reader accepts it
  std::string names;  // for a bad one, what the error must say ("" any)
};

std::vector<Doc> corpus() {
  const std::string good = to_json(testing::full_sample()).dump();
  std::string wide = "[";
  for (int i = 0; i < 1'000'000; ++i) wide += i ? ",1" : "1";
  wide += "]";
  const std::string depth = fmt::format("nested deeper than {} levels", kMaxJsonDepth);
  std::vector<Doc> docs = {
      {"bare arrays 100,000 deep", arrays(100'000), false, depth},
      {"bare objects 100,000 deep", objects(100'000), false, depth},
      {"evidence arrays 100,000 deep", verdict_with_evidence(arrays(100'000)), false, depth},
      {"evidence objects 100,000 deep", verdict_with_evidence(objects(100'000)), false, depth},
      {"evidence at the depth limit",
       verdict_with_evidence(arrays(kMaxJsonDepth - kEvidenceValueLevel + 1)), true, ""},
      {"evidence one level past it",
       verdict_with_evidence(arrays(kMaxJsonDepth - kEvidenceValueLevel + 2)), false, depth},
      {"bare array of 1,000,000", wide, false, ""},
      {"evidence of 1,000,000 elements", verdict_with_evidence(wide), true, ""},
      {"evidence string of 8 MiB", verdict_with_evidence("\"" + std::string(8 << 20, 's') + "\""),
       true, ""},
      {"string over the size limit",
       "\"" + std::string(rendezvous::kMaxVerdictJsonBytes, 's') + "\"", false,
       "more than the 64.0 MiB limit"},
      {"the sample", good, true, ""},
  };
  std::mt19937 rng(7);  // deterministic
  for (int i = 0; i < 40; ++i) {
    const std::size_t at = rng() % good.size();
    docs.push_back({fmt::format("the sample cut at byte {}", at), good.substr(0, at), false, ""});
  }
  return docs;
}

TEST(BoundedReaders, VerdictTextReadersGiveCleanErrors) {
  for (const auto& d : corpus()) {
    SCOPED_TRACE(d.name);
    const auto fast = verdict_from_text_fast(d.text);
    if (!d.verdict) {
      EXPECT_FALSE(fast);
    }
    try {
      Verdict v = verdict_from_text(d.text);
      EXPECT_TRUE(d.verdict) << "accepted";
      if (fast) {
        EXPECT_EQ(to_json(*fast), to_json(v));  // the fast path agrees with the full one
      }
    } catch (const VerdictFormatError& e) {
      EXPECT_FALSE(d.verdict) << e.what();
      EXPECT_NE(std::string(e.what()).find(d.names), std::string::npos) << e.what();
    }
  }
}

TEST(BoundedReaders, PublishReaderNamesTheFile) {
  BoundedTempDir dir;
  int n = 0;
  for (const auto& d : corpus()) {
    SCOPED_TRACE(d.name);
    const std::string path = dir / fmt::format("doc{}.json", n++);
    std::ofstream(path, std::ios::binary) << d.text;
    try {
      cronjob::load_verdict(path);
      EXPECT_TRUE(d.verdict) << "accepted";
    } catch (const cronjob::PublishUsageError& e) {
      EXPECT_FALSE(d.verdict) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(d.names), std::string::npos) << e.what();
    }
    fs::remove(path);
  }
}

// A tree built elsewhere (not from text) deeper than the limit is refused before the validator,
// which would recurse once per level.
TEST(BoundedReaders, ADeepTreeIsRefusedBeforeValidation) {
  nlohmann::json deep = 1;
  for (int i = 0; i < 5000; ++i) deep = nlohmann::json::array({std::move(deep)});
  nlohmann::json j = to_json(testing::full_sample());
  j["findings"][0]["evidence"] = {{"deep", std::move(deep)}};
  try {
    verdict_from_json(j);
    ADD_FAILURE() << "a 5000-level tree was accepted";
  } catch (const VerdictFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels"), std::string::npos)
        << e.what();
  }
}

// What rank 0 does with a post that passed: its evidence goes into the global verdict, which is
// serialised, checked against the schema and written. At the depth limit all of it works, and the
// file reads back the same.
TEST(BoundedReaders, AtTheDepthLimitThePostIsWrittenAndReadsBack) {
  const std::string text = verdict_with_evidence(arrays(kMaxJsonDepth - kEvidenceValueLevel + 1));
  Verdict posted = verdict_from_text(text);
  const nlohmann::json doc = to_json(posted);
  EXPECT_FALSE(rendezvous::json_deeper_than(doc));
  EXPECT_TRUE(rendezvous::json_deeper_than(doc, kMaxJsonDepth - 1));  // it is at the limit
  EXPECT_EQ(to_json(verdict_from_json(doc)), doc);                    // the schema check
  BoundedTempDir dir;
  write_json_atomically(dir / "verdict.json", doc);
  std::ifstream in(dir / "verdict.json", std::ios::binary);
  std::stringstream back;
  back << in.rdbuf();
  EXPECT_EQ(to_json(verdict_from_text(back.str())), doc);
}

TEST(BoundedReaders, ProfileLoaderGivesCleanErrors) {
  const std::string good =
      "profiles:\n  - name: p\n    transports:\n      - transport: socket\n"
      "        baselines:\n          - {world_size: 2, busbw_gbps: 1, gate_bytes: 1048576, "
      "source: measured}\n";
  ASSERT_NO_THROW(load_profiles(good));
  for (const auto& text : {arrays(100'000), objects(100'000), "profiles: " + arrays(100'000),
                           "profiles:\n  - name: " + std::string(100'000, '[')}) {
    SCOPED_TRACE(text.substr(0, 60));
    EXPECT_THROW(load_profiles(text), ProfileError);
  }
  // Cut anywhere, a profiles file loads (a prefix can still be a valid file) or is a ProfileError.
  std::mt19937 rng(11);
  int refused = 0;
  for (int i = 0; i < 40; ++i) {
    const std::string cut = good.substr(0, rng() % good.size());
    SCOPED_TRACE(cut);
    try {
      load_profiles(cut);
    } catch (const ProfileError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

// ---- a history is a regular file or a URL ------------------------------------------------------

void expect_not_a_file(const std::string& path, const std::string& type) {
  SCOPED_TRACE(path);
  try {
    check_history_path(path);
    ADD_FAILURE() << "accepted";
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.problem(), HistoryProblem::not_a_file);
    EXPECT_NE(std::string(e.what()).find("history " + path + " is " + type), std::string::npos)
        << e.what();
  }
  // The History itself refuses it before SQLite opens (and never writes) it.
  EXPECT_THROW(History(path, true), HistoryError);
}

TEST(HistoryPath, DevicesFifosSocketsAndDirectoriesAreRefused) {
  BoundedTempDir dir;
  expect_not_a_file("/dev/null", "a character device");
  expect_not_a_file("/dev/zero", "a character device");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  expect_not_a_file(dir / "fifo", "a FIFO");
  fs::create_directory(dir / "d");
  expect_not_a_file(dir / "d", "a directory");
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = dir / "sock";
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  expect_not_a_file(sock, "a socket");
  ::close(s);
  // Absent (created) and a regular file are histories; a URL is not a path.
  EXPECT_NO_THROW(check_history_path(dir / "absent.db"));
  EXPECT_NO_THROW(History(dir / "h.db", true));
  EXPECT_NO_THROW(check_history_path(dir / "h.db"));
  EXPECT_NO_THROW(check_history_path("postgresql://u@127.0.0.1:1/db"));
}

TEST(HistoryPath, PublishExits7AndSpoolsNothingNextToIt) {
  BoundedTempDir dir;
  const std::string verdict = dir / "verdict.json";
  write_json_atomically(verdict, to_json(testing::full_sample()));
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  fs::create_directory(dir / "d");
  for (const auto& [history, type] : {std::pair{dir / "fifo", std::string("a FIFO")},
                                      std::pair{dir / "d", std::string("a directory")}}) {
    SCOPED_TRACE(history);
    cronjob::PublishOptions o;
    o.verdict_path = verdict;
    o.history_path = history;
    o.quiet = true;
    std::ostringstream out, err;
    EXPECT_EQ(cronjob::publish(o, out, err), kExitHistoryUnusable);
    EXPECT_NE(err.str().find(history + " is " + type), std::string::npos) << err.str();
    EXPECT_FALSE(fs::exists(history + ".spool"));
    EXPECT_EQ(out.str(), "");  // nothing published
  }
}

}  // namespace
}  // namespace ncclsmoke::results
