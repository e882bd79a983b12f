// A finding's message rendered from its data (results/verdict/finding_text.h): the same text each
// time, "{reporter}" and "{peer}" from the subject, every other character literal, and a rule's
// later word (wrap_message) kept through a merge.
#include "results/verdict/finding_text.h"

#include <gtest/gtest.h>

#include "results/judging/merge.h"
#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {
namespace {

Finding lost_peer(int reporter) {
  Subject about = reported_by({reporter, "node-a"}, "transport:socket", "sweep/peer_lost", "socket");
  about.peer = 5;
  about.peer_host = "node-b";
  return make_finding_about(Code::PEER_LOST, about,
                            "transport socket on {reporter} lost {peer}: {\"errno\": 104}", {5},
                            {"node-b"});
}

TEST(FindingText, RenderingTwiceGivesTheSameText) {
  Finding f = lost_peer(3);
  const std::string once = render_message(f);
  EXPECT_EQ(render_message(f), once);
  render(f);
  render(f);
  EXPECT_EQ(f.message, once);
  EXPECT_EQ(once, "transport socket on rank 3 (host node-a) lost rank 5 (host node-b): "
                  "{\"errno\": 104}");
}

TEST(FindingText, ReportersReadAsOneRankOrAList) {
  Subject s;
  EXPECT_EQ(reporters_text(s), "no rank");
  s.reporters = {2};
  EXPECT_EQ(reporters_text(s), "rank 2");
  s.reporter_host = "h";
  EXPECT_EQ(reporters_text(s), "rank 2 (host h)");
  s.reporters = {7, 0, 1, 2, 3, 5};
  EXPECT_EQ(reporters_text(s), "ranks 0-3, 5, 7 (host h)");
  EXPECT_EQ(rank_list({4, 5}), "4, 5");
}

// Any number of ranks is one readable line: runs, at most 16 of them, then a count.
TEST(FindingText, RankRunsStayOneLineAtAnyWorldSize) {
  std::vector<int> all(999'999);
  for (int i = 0; i < 999'999; ++i) all[i] = i + 1;
  EXPECT_EQ(rank_runs(all), "1-999999");
  std::vector<int> odd;
  for (int r = 1; r < 2000; r += 2) odd.push_back(r);
  const std::string t = rank_runs(odd);
  EXPECT_EQ(t.rfind("1, 3, 5, ", 0), 0u) << t;
  EXPECT_NE(t.find(", ... and 984 more ranks"), std::string::npos) << t;
  EXPECT_EQ(rank_runs({5, 3, 4, 3}), "3-5");
}

TEST(FindingText, WithoutATemplateTheMessageIsKept) {
  Finding f = make_finding(Code::RANKS_MISSING, "rank {reporter} text from an older verdict", {3});
  EXPECT_EQ(render_message(f), "rank {reporter} text from an older verdict");
}

TEST(FindingText, ALaterWordSurvivesTheMergeThatRendersAgain) {
  std::vector<Finding> fs = {lost_peer(3), lost_peer(4)};
  wrap_message(fs[0], "a consequence of rank 5 stopping: ", "; wait chain: 3 -> 5");
  EXPECT_EQ(fs[0].message.rfind("a consequence of rank 5 stopping: transport socket on rank 3 ", 0),
            0u)
      << fs[0].message;
  dedupe_findings(fs);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].message,
            "a consequence of rank 5 stopping: transport socket on ranks 3, 4 (host node-a) lost "
            "rank 5 (host node-b): {\"errno\": 104}; wait chain: 3 -> 5");
  // A finding without a template takes the words in its message.
  Finding old = make_finding(Code::PEER_LOST, "rank 5 closed", {5});
  wrap_message(old, "a consequence: ", "");
  EXPECT_EQ(old.message, "a consequence: rank 5 closed");
}

}  // namespace
}  // namespace ncclsmoke::results
