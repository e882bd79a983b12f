#pragma once
// What a step saw, as judging's facts: the one place the rendezvous' and the transports' own
// types become the plain facts results/judging/ reads (its facts_*.h and observations.h), so
// judging links no network, transport or history code. Pure copies: no rule, no finding, no
// status; a field judging does not read is not copied.
#include <vector>

#include "rendezvous/join.h"
#include "rendezvous/mesh.h"
#include "rendezvous/peer_watch.h"
#include "rendezvous/signed_store.h"
#include "rendezvous/store_error.h"
#include "results/judging/facts_liveness.h"
#include "results/judging/facts_rendezvous.h"
#include "results/judging/facts_transport.h"
#include "transports/sweep.h"

namespace ncclsmoke::harness {

// ---- the store, the join, the mesh (facts_rendezvous.h) ---------------------------------------

results::StoreErrorClass store_error_class_fact(rendezvous::ErrorClass cls);
results::StoreFailure store_failure(const rendezvous::StoreError& e);
results::JoinFacts join_facts(const rendezvous::JoinResult& join);
results::MeshFacts mesh_facts(const rendezvous::MeshResult& mesh);
std::vector<results::TamperedValueFact> tampered_facts(
    const std::vector<rendezvous::TamperedValue>& values);

// ---- the liveness watch (facts_liveness.h) ----------------------------------------------------

results::LostPeerFact lost_peer_fact(const rendezvous::LostPeer& lost);
results::SilentPeerFact silent_peer_fact(const rendezvous::SilentPeer& silent);
results::WaitChainFact wait_chain_fact(const rendezvous::WaitChain& chain);

// ---- transports --------------------------------------------------------------------------------

results::TransportFailureKind failure_kind_fact(transports::ErrorKind kind);
results::LinkFacts link_facts(const transports::LinkStats& stats);
// One backend's outcome (harness/transport_phase.h measure_transports) for judge_transports.
results::TransportFacts transport_facts(const transports::TransportOutcome& outcome);
std::vector<results::TransportFacts> transport_facts(
    const std::vector<transports::TransportOutcome>& outcomes);

}  // namespace ncclsmoke::harness
