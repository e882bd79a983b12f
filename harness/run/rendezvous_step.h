#pragma once
// The rendezvous step of `ncclsmoke run`: rank 0 serves the store (unless one is given), every
// rank connects, makes sure the store is its own job's, adopts rank 0's run id and joins the
// world. Its findings are made by results/judging (probe_rules for the store errors and the
// roster, run_rules for STORE_FOREIGN_JOB and the busy port); this file only measures and
// records.
#include <atomic>
#include <memory>

#include "harness/run/run_context.h"
#include "rendezvous/join.h"
#include "rendezvous/signed_store.h"
#include "rendezvous/store.h"
#include "rendezvous/tcp_client.h"
#include "rendezvous/tcp_server.h"

namespace ncclsmoke::harness {

// The store connection and what the join gave; the later steps read it.
struct StoreSession {
  std::unique_ptr<rendezvous::TcpStoreServer> server;  // rank 0 hosting the store
  std::unique_ptr<rendezvous::TcpStore> client;
  // "ncclsmoke/": the owner key, unsigned, so a job with another token is still named
  // (STORE_FOREIGN_JOB); it is advisory and only ever stops a rank.
  std::shared_ptr<rendezvous::Store> raw_store;
  // "ncclsmoke/<job>/<restart>/": every run key, over the job token's SignedStore (which sees
  // the full key) when there is a token.
  std::shared_ptr<rendezvous::Store> store;
  // The keys whose values failed verification (STORE_TAMPERED); read by the judge.
  std::shared_ptr<rendezvous::TamperSink> tampered = std::make_shared<rendezvous::TamperSink>();
  rendezvous::Identity self;
  rendezvous::JoinResult join;
  // The roster read once per node (rendezvous/join.h): a leader's files stay until the run ends.
  rendezvous::RosterCopy roster_copy;
  std::atomic<bool> frozen{false};  // a probe found the store accepting but silent
};

// Records the rendezvous phase: the roster (RosterSeen) and what the join gave (JoinSeen), which
// next_step reads back out of the records. Whether the run goes on is results::next_step's
// (results/judging/next_step.h):
// missing ranks don't stop the others (the mesh among those present is still worth knowing), a
// roster that never came, another world size, a taken rank or a host set aside do.
void rendezvous_step(RunContext& ctx, StoreSession& s);

// The host this rank reaches its own store on: rank 0 over loopback (following --store-bind),
// anyone else the store's host.
std::string store_dial_host(const RunContext& ctx);

}  // namespace ncclsmoke::harness
