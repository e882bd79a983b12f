// Two jobs at one store: the stranger sees the owner and stops; its own rank 0 wins when both
// could be read; a store without an owner (torch's agent store) only waits for our own rank 0.
#include "rendezvous/store_owner.h"

#include <gtest/gtest.h>

#include <thread>

#include "rendezvous/memory_store.h"
#include "rendezvous/prefix_store.h"
#include "tests/wait_until.h"

namespace ncclsmoke::rendezvous {
namespace {

StoreOwner owner(const std::string& job, int world) {
  StoreOwner o;
  o.job_id = job;
  o.world_size = world;
  o.host = "node-a";
  o.pid = 42;
  o.key_prefix = "ncclsmoke/" + job + "/0/";
  return o;
}

TEST(StoreOwner, JsonRoundTrip) {
  auto o = StoreOwner::from_json(owner("1234.0", 4).to_json());
  ASSERT_TRUE(o);
  EXPECT_EQ(o->job_id, "1234.0");
  EXPECT_EQ(o->world_size, 4);
  EXPECT_EQ(o->host, "node-a");
  EXPECT_FALSE(StoreOwner::from_json("not json"));
  EXPECT_FALSE(StoreOwner::from_json("[1,2]"));
}

TEST(StoreOwner, StrangerSeesTheOtherJob) {
  MemoryStore mem;
  PrefixStore raw("ncclsmoke", mem);
  PrefixStore job_a("A/0", mem), job_b("B/0", mem);
  claim_store(raw, owner("A", 4));
  job_a.set("join/world_size", "4");
  auto met = wait_for_own_job(raw, job_b, "join/world_size", "B", deadline_after(Millis{2000}));
  EXPECT_FALSE(met.own_job_seen);
  ASSERT_TRUE(met.other_owner);
  EXPECT_EQ(met.other_owner->job_id, "A");
  EXPECT_EQ(met.other_owner->world_size, 4);
  // The stranger wrote nothing into job A's namespace.
  EXPECT_FALSE(job_a.check({"join/rank/1"}));
}

TEST(StoreOwner, OwnJobIsFound) {
  MemoryStore mem;
  PrefixStore raw("ncclsmoke", mem);
  PrefixStore job("A/0", mem);
  std::thread rank0([&] {
    ncclsmoke::testing::pause_for(Millis{100});  // late on purpose: the wait must wait for it
    claim_store(raw, owner("A", 2));
    job.set("join/world_size", "2");
  });
  auto met = wait_for_own_job(raw, job, "join/world_size", "A", deadline_after(Millis{5000}));
  rank0.join();
  EXPECT_TRUE(met.own_job_seen);
  EXPECT_FALSE(met.other_owner);
}

TEST(StoreOwner, NoOwnerTimesOutWithoutBlame) {
  MemoryStore mem;
  PrefixStore raw("ncclsmoke", mem);
  PrefixStore job("A/0", mem);
  auto met = wait_for_own_job(raw, job, "join/world_size", "A", deadline_after(Millis{200}));
  EXPECT_FALSE(met.own_job_seen);
  EXPECT_FALSE(met.other_owner);
  EXPECT_GE(met.waited_s, 0.15);
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
