#include "rendezvous/store_owner.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

#include "rendezvous/bounded_json.h"

namespace ncclsmoke::rendezvous {
namespace {
constexpr const char* kOwnerKey = "owner";
}  // namespace

std::string StoreOwner::to_json() const {
  return nlohmann::json{{"job_id", job_id},
                        {"world_size", world_size},
                        {"host", host},
                        {"pid", pid},
                        {"key_prefix", key_prefix}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<StoreOwner> StoreOwner::from_json(const std::string& text) {
  auto j = parse_bounded_or_discarded(text, kMaxSmallJsonBytes);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  StoreOwner o;
  try {
    o.job_id = j.value("job_id", "");
    o.world_size = j.value("world_size", 0);
    o.host = j.value("host", "");
    o.pid = j.value("pid", 0);
    o.key_prefix = j.value("key_prefix", "");
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  return o;
}

void claim_store(Store& store, const StoreOwner& owner) { store.set(kOwnerKey, owner.to_json()); }

OwnJobWait wait_for_own_job(Store& store, Store& job_store, const std::string& own_key,
                            const std::string& own_job_id, Deadline deadline, Millis poll) {
  auto start = Clock::now();
  OwnJobWait out;
  for (;;) {
    if (job_store.check({own_key})) {
      out.own_job_seen = true;
      break;
    }
    if (store.check({kOwnerKey})) {
      auto owner = StoreOwner::from_json(store.get(kOwnerKey, deadline_after(Millis{1000})));
      if (owner && owner->job_id != own_job_id) {
        // Our own rank 0 may still publish: a last look before naming the stranger.
        if (job_store.check({own_key})) {
          out.own_job_seen = true;
          break;
        }
        out.other_owner = owner;
        break;
      }
    }
    if (expired(deadline)) break;
    std::this_thread::sleep_for(std::min(poll, remaining(deadline)));
  }
  out.waited_s = seconds_since(start);
  return out;
}

}  // namespace ncclsmoke::rendezvous
