#pragma once
// Which job a store belongs to. Two jobs can meet at one store: two Slurm jobs on one node on the
// same MASTER_PORT, or a leftover run. Every key of a run lives under its own job namespace, so a
// stranger never reads or writes the owner's keys; this file lets the stranger notice, and say so,
// instead of waiting for a rank 0 that will never come.
//
// Key (under the caller's store, normally PrefixStore("ncclsmoke")): "owner" -> JSON
// {"job_id","world_size","host","pid","key_prefix"}, set by the rank 0 that hosts the store
// right after it starts serving. Stores hosted by someone else (torch's elastic agent, --store)
// have no owner: any number of jobs may share those, each in its own namespace.
#include <optional>
#include <string>

#include "rendezvous/store.h"

namespace ncclsmoke::rendezvous {

struct StoreOwner {
  std::string job_id;
  int world_size = 0;
  std::string host;
  int pid = 0;
  std::string key_prefix;

  std::string to_json() const;
  static std::optional<StoreOwner> from_json(const std::string& text);
};

// Sets the owner key (rank 0 of the job that hosts the store).
void claim_store(Store& store, const StoreOwner& owner);

struct OwnJobWait {
  bool own_job_seen = false;               // `own_key` appeared: our rank 0 is here
  std::optional<StoreOwner> other_owner;   // the store belongs to another job
  double waited_s = 0;
};

// Waits until `own_key` exists in `job_store` (our rank 0 published it) or the owner key in
// `store` names another job, whichever comes first, until `deadline`. Polls both (WAIT can't
// await "either key"); each poll is bounded by the store's own op timeout. Store errors (the
// connection broke) propagate as StoreError.
OwnJobWait wait_for_own_job(Store& store, Store& job_store, const std::string& own_key,
                            const std::string& own_job_id, Deadline deadline,
                            Millis poll = Millis{50});

}  // namespace ncclsmoke::rendezvous
