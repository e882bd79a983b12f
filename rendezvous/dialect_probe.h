#pragma once
// Finds out which era of TCPStore server listens at host:port, so a client can join a store
// hosted by someone else (torchrun's agent store, `--store HOST:PORT`) without breaking it.
//
// Eras (LAUNCHERS.md "Store dialects by torch version"):
//   torch_legacy      torch <= 2.0 (Debian's 1.13): legacy opcodes, no handshake.
//   validate_no_ping  torch 2.1-2.4: VALIDATE first, but PING (13, torch 2.5) closes the connection.
//   validate_ping     torch >= 2.5 and ncclsmoke's own server: VALIDATE + PING (nonce echoed).
//
// Procedure, on one connection (connect_tcp, so DNS / refused / dropped-SYN failures keep their
// StoreError classes and messages):
//   1. send VALIDATE + GETNUMKEYS x4 (modern opcodes; 9 bytes) and read the four counts.
//      Why four: a torch 1.13 server reads byte 0 as SET and the next 8 bytes as the key length.
//      With VALIDATE + one GETNUMKEYS (6 bytes) it blocks in its single daemon thread waiting for
//      the rest of that length and stalls the WHOLE store (seen here with 1.13). With 9 bytes the
//      length is complete and absurd (~5e17), its allocation fails, and 1.13 resets just this
//      connection at once and keeps serving everyone else (seen here too).
//   2. EOF / reset before any reply: legacy. Confirmed on a second connection by a legacy
//      GETNUMKEYS (opcode 6), which a modern server would refuse (no VALIDATE first).
//   3. The counts came back: a VALIDATE-era server. Send PING + nonce: echo => validate_ping,
//      EOF / reset => validate_no_ping.
// Every step is bounded by `deadline`; a server that accepts but never answers gives
// StoreError(timed_out) saying so. The probe's connections are closed before it returns.
//
// The answer is cached per process, keyed by "host:port" (thread-safe; concurrent callers for one
// endpoint wait for the first probe, bounded by their own deadline). Failures are not cached.
#include <cstdint>
#include <string>

#include "rendezvous/connect.h"
#include "rendezvous/deadline.h"
#include "rendezvous/wire.h"

namespace ncclsmoke::rendezvous {

enum class StoreEra { torch_legacy, validate_no_ping, validate_ping };

struct DialectProbe {
  wire::Dialect dialect;   // legacy for torch_legacy, modern otherwise
  StoreEra era;
  bool ping = false;       // whether the handshake may send PING
  std::string era_text;    // e.g. "torch <= 2.0 (legacy dialect: the server reset VALIDATE)",
                           // "torch 2.1-2.4 (VALIDATE, no PING)", "torch >= 2.5 or ncclsmoke (VALIDATE + PING)"
  double probe_s = 0;      // time the probe took
  bool cached = false;     // answered from the per-endpoint cache
};

const char* to_string(StoreEra);  // "torch<=2.0", "torch2.1-2.4", "torch>=2.5"

// Probes host:port once per process (cache keyed by host:port, thread-safe); later calls return
// the cached answer (cached = true, no connection made). Throws StoreError: the connect_tcp
// classes for connect failures; timed_out when the server accepted but did not answer in time;
// reset when it closed both the modern and the legacy probe; protocol for a wrong PING echo.
DialectProbe probe_dialect(const std::string& host, uint16_t port, Deadline deadline,
                           const Backoff& backoff);

// Drops every cached answer (tests reuse ports across servers of different eras).
void forget_dialect_probes();

}  // namespace ncclsmoke::rendezvous
