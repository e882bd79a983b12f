// What a step saw, as judging's facts (harness/observe.h): every value of the rendezvous' and the
// transports' enums maps to judging's, spelled the same (the words land in findings' evidence),
// and the conversions keep what the rules read.
#include "harness/observe.h"

#include <gtest/gtest.h>

#include <string>

namespace ncclsmoke::harness {
namespace {

TEST(ObserveFacts, EveryStoreErrorClassKeepsItsSpelling) {
  using rendezvous::ErrorClass;
  for (ErrorClass c : {ErrorClass::dns, ErrorClass::refused, ErrorClass::timed_out,
                       ErrorClass::stalled, ErrorClass::unreachable, ErrorClass::reset,
                       ErrorClass::protocol, ErrorClass::limit, ErrorClass::invalid,
                       ErrorClass::not_found, ErrorClass::other})
    EXPECT_STREQ(results::to_string(store_error_class_fact(c)), rendezvous::to_string(c));
}

TEST(ObserveFacts, EveryTransportErrorKindKeepsItsSpelling) {
  using transports::ErrorKind;
  for (ErrorKind k : {ErrorKind::unavailable, ErrorKind::init_failed, ErrorKind::timeout,
                      ErrorKind::peer_lost, ErrorKind::other})
    EXPECT_STREQ(results::to_string(failure_kind_fact(k)), transports::to_string(k));
}

TEST(ObserveFacts, StoreFailureAndJoinKeepWhatTheRulesRead) {
  auto f = store_failure(rendezvous::StoreError(rendezvous::ErrorClass::stalled, "no answer"));
  EXPECT_EQ(f.error_class, results::StoreErrorClass::stalled);
  EXPECT_EQ(f.detail, "no answer");

  rendezvous::JoinResult j;
  j.missing = {2};
  j.master_world_size = 8;
  rendezvous::Identity other;
  other.host = "host-x";
  other.pid = 77;
  j.rank_taken_by = other;
  j.waited_s = 1.5;
  auto jf = join_facts(j);
  EXPECT_EQ(jf.missing, std::vector<int>{2});
  EXPECT_EQ(jf.master_world_size, 8);
  ASSERT_TRUE(jf.rank_taken_by.has_value());
  EXPECT_EQ(jf.rank_taken_by->host, "host-x");
  EXPECT_EQ(jf.rank_taken_by->pid, 77);
  EXPECT_EQ(jf.complete(), j.complete());
  EXPECT_FALSE(jf.roster_received);
}

TEST(ObserveFacts, TransportOutcomeKeepsRowsStageAndFailure) {
  transports::TransportOutcome o;
  o.name = "socket";
  o.stage = transports::TransportStage::sweep;
  transports::SweepRow r;
  r.bytes = 1 << 20;
  r.count = r.bytes / 2;
  r.dtype = transports::DType::bfloat16;
  r.rank_time_us = {1, 2};
  o.sweep.rows = {r};
  transports::TransportFailure e;
  e.source = transports::TransportFailure::Source::store;
  e.message = "lost";
  e.peer = 1;
  o.error = e;
  transports::LinkStats ls;
  ls.next_rank = 1;
  ls.tx_retrans = 4;
  o.links = ls;
  auto f = transport_facts(o);
  EXPECT_EQ(f.stage, "sweep");
  ASSERT_EQ(f.rows.size(), 1u);
  EXPECT_EQ(f.rows[0].dtype, "bfloat16");
  EXPECT_EQ(f.rows[0].count, 1 << 19);
  EXPECT_EQ(f.rows[0].rank_time_us, (std::vector<double>{1, 2}));
  ASSERT_TRUE(f.error.has_value());
  EXPECT_EQ(f.error->source, results::TransportFailureFacts::Source::store);
  EXPECT_EQ(f.error->peer, 1);
  ASSERT_TRUE(f.links.has_value());
  EXPECT_EQ(f.links->tx_retrans, 4);
  EXPECT_FALSE(f.network.has_value());
}

}  // namespace
}  // namespace ncclsmoke::harness
