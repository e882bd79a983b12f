// publish(): exit-code policy, verdict loading errors, textfile, history and a Pushgateway that is
// not there (connection refused on a free loopback port).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cronjob/metrics.h"
#include "cronjob/publish.h"
#include "cronjob/pushgateway.h"
#include "cronjob/textfile.h"
#include "results/history/history.h"
#include "results/verdict/write.h"
#include "tests/cronjob/sample_verdicts.h"

namespace ncclsmoke::cronjob {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ncclsmoke-publish-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (fs::path(path_) / name).string(); }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

std::string write_verdict(const TempDir& d, const results::Verdict& v, const std::string& name) {
  std::string path = d / name;
  results::write_json_atomically(path, results::to_json(v));
  return path;
}

// A loopback port nobody listens on: bound then closed (connection refused, not a timeout).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(PublishFailOn, ParsesAndRejects) {
  EXPECT_EQ(parse_fail_on("fail,degraded,inconclusive"),
            (std::vector<std::string>{"fail", "degraded", "inconclusive"}));
  EXPECT_EQ(parse_fail_on(" fail , fail"), (std::vector<std::string>{"fail"}));
  EXPECT_TRUE(parse_fail_on("none").empty());
  EXPECT_TRUE(parse_fail_on("").empty());
  try {
    parse_fail_on("fail,pass");
    FAIL() << "pass accepted";
  } catch (const PublishUsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'pass'"), std::string::npos) << e.what();
  }
}

TEST(PublishFailOn, PolicyPicksTheVerdictsOwnCode) {
  const std::vector<std::string> all = {"fail", "degraded", "inconclusive"};
  EXPECT_EQ(policy_exit_code(results::Outcome::pass, all), 0);
  EXPECT_EQ(policy_exit_code(results::Outcome::fail, all), 1);
  EXPECT_EQ(policy_exit_code(results::Outcome::degraded, all), 3);
  EXPECT_EQ(policy_exit_code(results::Outcome::inconclusive, all), 4);
  EXPECT_EQ(policy_exit_code(results::Outcome::degraded, {"fail"}), 0);
  EXPECT_EQ(policy_exit_code(results::Outcome::inconclusive, {"fail", "degraded"}), 0);
  EXPECT_EQ(policy_exit_code(results::Outcome::fail, {}), 0);
}

TEST(PublishFailOn, DeliveryProblemsOnlyShowWhenTheVerdictCodeIsZero) {
  EXPECT_EQ(exit_code(0, true, true), 0);
  EXPECT_EQ(exit_code(0, false, true), kExitMetricsNotDelivered);
  EXPECT_EQ(exit_code(0, true, false), kExitHistoryFailed);
  EXPECT_EQ(exit_code(0, false, false), kExitHistoryFailed);
  EXPECT_EQ(exit_code(1, false, false), 1);
  EXPECT_EQ(exit_code(3, false, true), 3);
}

TEST(PublishLoadVerdict, ErrorsNameTheFileAndThePath) {
  TempDir d;
  auto message = [](const std::string& path) {
    try {
      load_verdict(path);
    } catch (const PublishUsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string missing = d / "nope.json";
  EXPECT_NE(message(missing).find(missing), std::string::npos);

  std::string bad = d / "bad.json";
  std::ofstream(bad) << "{\"schema_version\": 1,";
  std::string m = message(bad);
  EXPECT_NE(m.find(bad + ": not JSON at byte"), std::string::npos) << m;

  auto j = results::to_json(testing::passing());
  j["verdict"] = "great";
  j["world"].erase("size");
  std::string wrong = d / "wrong.json";
  results::write_json_atomically(wrong, j);
  m = message(wrong);
  EXPECT_NE(m.find(wrong), std::string::npos) << m;
  EXPECT_NE(m.find("verdict"), std::string::npos) << m;
  EXPECT_NE(m.find("world"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;

  EXPECT_EQ(load_verdict(write_verdict(d, testing::failing(), "ok.json")).verdict, results::Outcome::fail);
}

TEST(PublishTextfile, WrittenAtomicallyAndReplaced) {
  TempDir d;
  EXPECT_EQ(write_textfile(d.str(), "first 1\n"), d / "ncclsmoke.prom");
  EXPECT_EQ(read_textfile(d.str()), "first 1\n");
  write_textfile(d.str(), "second 2\n");
  EXPECT_EQ(read_textfile(d.str()), "second 2\n");
  // Only the target remains: no temp file is left for the collector to trip over.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(d.str())) names.push_back(e.path().filename());
  EXPECT_EQ(names, (std::vector<std::string>{"ncclsmoke.prom"}));
  try {
    write_textfile(d / "missing-dir", "x 1\n");
    FAIL() << "wrote into a missing directory";
  } catch (const results::WriteError& e) {
    EXPECT_NE(std::string(e.what()).find(d / "missing-dir"), std::string::npos) << e.what();
  }
}

TEST(PublishPushgateway, GroupingUrlEscapesValues) {
  PushOptions o;
  o.url = "http://pgw:9091/";
  o.job = "nccl smoke";
  o.grouping = {{"cluster", "east/1"}, {"profile", "a b"}};
  EXPECT_EQ(grouping_url(o), "http://pgw:9091/metrics/job/nccl%20smoke/cluster@base64/ZWFzdC8x/profile/a%20b");
  o.grouping = {{"cluster", ""}};
  EXPECT_EQ(grouping_url(o), "http://pgw:9091/metrics/job/nccl%20smoke/cluster@base64/=");
  o.url = "pgw:9091";
  EXPECT_THROW(grouping_url(o), PushUrlError);
  o.url = "http://pgw:9091/?x=1";
  EXPECT_THROW(grouping_url(o), PushUrlError);
}

TEST(PublishPushgateway, RefusedConnectionIsReportedWithUrlAttemptsAndTime) {
  PushOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(free_port());
  o.retries = 2;
  o.backoff_base_s = 0.05;
  o.timeout_s = 5;
  o.grouping = {{"cluster", "c"}};
  PushResult r = push_metrics(o, "x 1\n");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.http_status, 0);
  EXPECT_GT(r.waited_s, 0);
  std::string d = r.describe();
  EXPECT_NE(d.find(o.url + "/metrics/job/ncclsmoke/cluster/c"), std::string::npos) << d;
  EXPECT_NE(d.find("3 attempts"), std::string::npos) << d;
  EXPECT_NE(d.find("refused"), std::string::npos) << d;
}

TEST(Publish, PushgatewayDownExitsFiveAndKeepsHistoryAndTextfile) {
  TempDir d;
  PublishOptions o;
  o.verdict_path = write_verdict(d, testing::passing(), "verdict.json");
  o.pushgateway_url = "http://127.0.0.1:" + std::to_string(free_port());
  o.history_path = d / "h.db";
  o.textfile_dir = d.str();
  o.retries = 1;
  o.backoff_base_s = 0.05;
  o.timeout_s = 5;
  std::ostringstream out, err;
  EXPECT_EQ(publish(o, out, err), kExitMetricsNotDelivered) << out.str() << err.str();
  EXPECT_NE(err.str().find("metrics not delivered"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find(o.pushgateway_url), std::string::npos) << err.str();
  EXPECT_EQ(results::History(o.history_path).count_runs(), 1);
  EXPECT_NE(read_textfile(d.str()).find("ncclsmoke_verdict{"), std::string::npos);

  // A failing verdict: its own code wins over the delivery problem; the history still grows.
  o.verdict_path = write_verdict(d, testing::failing(), "verdict2.json");
  std::ostringstream out2, err2;
  EXPECT_EQ(publish(o, out2, err2), 1) << err2.str();
  EXPECT_EQ(results::History(o.history_path).count_runs(), 2);
  // With --fail-on none the same failing run exits 5: metrics still not delivered.
  o.fail_on = {};
  std::ostringstream out3, err3;
  EXPECT_EQ(publish(o, out3, err3), kExitMetricsNotDelivered);
}

TEST(Publish, LastSuccessComesFromTheHistoryOrThePreviousTextfile) {
  TempDir d;
  PublishOptions o;
  o.textfile_dir = d.str();
  o.fail_on = {};
  std::ostringstream out, err;
  auto pass = testing::passing();
  pass.baseline = {{"profile", "p5.48xlarge-efa"}};
  o.verdict_path = write_verdict(d, pass, "pass.json");
  ASSERT_EQ(publish(o, out, err), 0) << err.str();
  o.verdict_path = write_verdict(d, testing::failing(), "fail.json");
  ASSERT_EQ(publish(o, out, err), 0) << err.str();
  std::string text = read_textfile(d.str());
  EXPECT_NE(text.find("verdict=\"fail\"} 1"), std::string::npos);
  EXPECT_EQ(last_success_from_text(text), 1796000404.5) << text;

  // From the history: a fresh textfile directory still gets the last pass.
  TempDir d2;
  o.textfile_dir = d2.str();
  o.history_path = d2 / "h.db";
  o.verdict_path = d / "pass.json";
  ASSERT_EQ(publish(o, out, err), 0) << err.str();
  fs::remove(d2 / "ncclsmoke.prom");
  o.verdict_path = d / "fail.json";
  ASSERT_EQ(publish(o, out, err), 0) << err.str();
  EXPECT_EQ(last_success_from_text(read_textfile(d2.str())), 1796000404.5);
}

TEST(Publish, HistoryFailureExitsSixUnlessTheVerdictCodeIsNonZero) {
  TempDir d;
  PublishOptions o;
  o.verdict_path = write_verdict(d, testing::passing(), "verdict.json");
  o.history_path = d / "no-such-dir/h.db";
  o.textfile_dir = d.str();
  std::ostringstream out, err;
  EXPECT_EQ(publish(o, out, err), kExitHistoryFailed);
  EXPECT_NE(err.str().find(o.history_path), std::string::npos) << err.str();
  // The spool lives next to the history: its missing directory is not created for it.
  EXPECT_NE(err.str().find("not spooled either"), std::string::npos) << err.str();
  EXPECT_FALSE(fs::exists(d / "no-such-dir"));
  // The metrics were still written.
  EXPECT_NE(read_textfile(d.str()).find("verdict=\"pass\"} 1"), std::string::npos);
  o.verdict_path = write_verdict(d, testing::failing(), "verdict2.json");
  std::ostringstream out2, err2;
  EXPECT_EQ(publish(o, out2, err2), 1);
  EXPECT_NE(err2.str().find(o.history_path), std::string::npos) << err2.str();
}

// A run whose history write fails is spooled next to the history and stored by the next publish
// that can write it.
TEST(PublishSpool, CorruptHistorySpoolsTheRunAndTheNextPublishStoresIt) {
  TempDir d;
  const std::string db = d / "h.db";
  std::ofstream(db) << std::string(4096, 'x');  // not a database
  PublishOptions o;
  o.verdict_path = write_verdict(d, testing::passing(), "verdict.json");
  o.history_path = db;
  o.textfile_dir = d.str();
  std::ostringstream out, err;
  EXPECT_EQ(publish(o, out, err), kExitHistoryFailed);
  const results::Verdict first = testing::passing();
  const std::string spooled = (fs::path(spool_dir(db)) / (first.run_id + ".json")).string();
  ASSERT_TRUE(fs::exists(spooled)) << err.str();
  EXPECT_NE(err.str().find("spooled to " + spooled), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("mv " + db + " " + db + ".corrupt"), std::string::npos) << err.str();
  {  // the spooled bytes are the verdict file's
    std::ifstream a(o.verdict_path), b(spooled);
    std::stringstream sa, sb;
    sa << a.rdbuf();
    sb << b.rdbuf();
    EXPECT_EQ(sa.str(), sb.str());
  }

  // The operator follows the hint; the next run publishes into a fresh history.
  fs::rename(db, db + ".corrupt");
  results::Verdict second = testing::failing();
  second.run_id = first.run_id + "-next";
  o.verdict_path = write_verdict(d, second, "verdict2.json");
  o.fail_on = {};
  std::ostringstream out2, err2;
  EXPECT_EQ(publish(o, out2, err2), 0) << err2.str();
  EXPECT_NE(out2.str().find("stored 1 spooled run"), std::string::npos) << out2.str();
  EXPECT_FALSE(fs::exists(spooled));
  EXPECT_TRUE(fs::is_empty(spool_dir(db)));
  results::History h(db, false);
  EXPECT_EQ(h.count_runs(), 2);
  EXPECT_TRUE(h.verdict_json(first.run_id).has_value());
  EXPECT_TRUE(h.verdict_json(second.run_id).has_value());
}

TEST(PublishSpool, UnopenableHistorySpoolsAndABadSpoolFileIsSetAside) {
  TempDir d;
  const std::string db = d / "h.db";
  std::ofstream(db) << "not an SQLite file";  // cannot be opened as a history
  PublishOptions o;
  o.verdict_path = write_verdict(d, testing::passing(), "verdict.json");
  o.history_path = db;
  o.textfile_dir = d.str();
  std::ostringstream out, err;
  EXPECT_EQ(publish(o, out, err), kExitHistoryFailed);
  EXPECT_EQ(std::distance(fs::directory_iterator(spool_dir(db)), fs::directory_iterator()), 1)
      << err.str();
  std::ofstream(fs::path(spool_dir(db)) / "zz-garbage.json") << "{not json";

  fs::remove(db);
  std::ostringstream out2, err2;
  EXPECT_EQ(publish(o, out2, err2), 0) << err2.str();
  EXPECT_NE(err2.str().find("zz-garbage.json.bad"), std::string::npos) << err2.str();
  EXPECT_TRUE(fs::exists(fs::path(spool_dir(db)) / "zz-garbage.json.bad"));
  results::History h(db, false);
  EXPECT_EQ(h.count_runs(), 1);  // the spooled run and this publish are the same run
  // Only the .bad file is left.
  EXPECT_EQ(std::distance(fs::directory_iterator(spool_dir(db)), fs::directory_iterator()), 1);
}

TEST(Publish, UsageErrorsComeBeforeAnyWrite) {
  TempDir d;
  PublishOptions o;
  o.verdict_path = write_verdict(d, testing::passing(), "verdict.json");
  o.history_path = d / "h.db";
  o.pushgateway_url = "ftp://x";
  std::ostringstream out, err;
  EXPECT_THROW(publish(o, out, err), PublishUsageError);
  o.pushgateway_url.clear();
  o.verdict_path = d / "missing.json";
  EXPECT_THROW(publish(o, out, err), PublishUsageError);
  EXPECT_FALSE(fs::exists(d / "h.db"));
}

TEST(Publish, WithoutSinksTheMetricsGoToStdout) {
  TempDir d;
  PublishOptions o;
  o.verdict_path = write_verdict(d, testing::failing(), "verdict.json");
  o.cluster = "c1";
  std::ostringstream out, err;
  EXPECT_EQ(publish(o, out, err), 1);
  EXPECT_EQ(out.str(), render_metrics(testing::failing(), MetricsOptions{"c1"}));
  EXPECT_NE(err.str().find("verdict fail"), std::string::npos) << err.str();
}

TEST(Publish, WarnsOnceWhenTheRunWasNotAuthenticated) {
  TempDir d;
  auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  for (bool authenticated : {false, true}) {
    auto v = testing::failing();
    v.world.store.host = "10.0.0.1";
    v.world.store.port = 29500;
    v.world.store.authenticated = authenticated;
    PublishOptions o;
    o.verdict_path = write_verdict(d, v, authenticated ? "signed.json" : "open.json");
    o.quiet = true;  // the warning is said even then
    std::ostringstream out, err;
    publish(o, out, err);
    EXPECT_EQ(count(err.str(), "was not authenticated"), authenticated ? 0u : 1u) << err.str();
  }
}

}  // namespace
}  // namespace ncclsmoke::cronjob
