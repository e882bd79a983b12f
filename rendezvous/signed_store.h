#pragma once
// Decorator that authenticates every value ncclsmoke puts in the store with the job token (a
// shared secret: NCCLSMOKE_JOB_TOKEN): each value it writes carries an HMAC-SHA256 over the key
// and the value, and each value it reads must carry a valid one. The store stays torch's open
// TCPStore (no protocol change, any era of torch's agent store works); a stranger who can reach
// it can still read keys, delete them and bump counters, but cannot make a rank read a claim, a
// roster, an address, a sweep figure or a verdict that no holder of the token wrote.
//
// It must sit BELOW the prefix decorators (it sees the key as the server does), so a signed value
// replayed under another key, or another job's namespace, fails verification.
//
// What is and is not signed:
//   set, multi_set, compare_set (desired and expected): signed; get, multi_get, compare_set's
//   answer: verified. add() counters cannot be signed (the server adds integers), check / wait /
//   delete_key / num_keys see only key existence: all pass through. append() is refused while a
//   token is set (a value is signed whole; ncclsmoke never appends).
// A value that fails verification is treated as not there: get/multi_get keep waiting for a
// verified value until their deadline, then throw StoreError(timed_out) saying the key held a
// value that failed verification. compare_set returns "" when the stored value fails. Each such
// key is recorded once in the TamperSink (results/judging turns it into STORE_TAMPERED).
// With an empty token the decorator passes everything through unchanged.
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "facts/store.h"
#include "rendezvous/store.h"

namespace ncclsmoke::rendezvous {

// One key whose value failed verification, as the server names it ("ncclsmoke/<job>/0/verdict/1").
using facts::TamperedValue;  // facts/store.h: judging reads the same type

// Thread-safe, once per key: the transports' threads and the liveness watch read the store too.
class TamperSink {
 public:
  // True the first time `key` is recorded.
  bool record(const std::string& key, const std::string& why);
  std::vector<TamperedValue> snapshot() const;

 private:
  mutable std::mutex mu_;
  std::set<std::string> seen_;
  std::vector<TamperedValue> values_;
};

// The signed form of `value` under `key` (what SignedStore writes). Deterministic, so an
// `expected` of compare_set can be signed too.
std::string sign_store_value(const std::string& token, const std::string& key,
                             const std::string& value);
// The value inside `stored` when its signature under `key` is valid; otherwise nullopt and `why`.
std::optional<std::string> verify_store_value(const std::string& token, const std::string& key,
                                              const std::string& stored, std::string* why = nullptr);

// A fresh job token: 32 bytes from OpenSSL's RAND_bytes, as 64 hex digits (`ncclsmoke launch`
// makes one per launch). Throws std::runtime_error when the generator fails.
std::string make_job_token();

class SignedStore final : public Store {
 public:
  SignedStore(std::shared_ptr<Store> inner, std::string token, std::shared_ptr<TamperSink> sink);
  // Wraps a store the caller keeps alive for the decorator's whole life (not owned).
  SignedStore(Store& inner, std::string token, std::shared_ptr<TamperSink> sink);

  bool authenticated() const { return !token_.empty(); }
  const std::shared_ptr<TamperSink>& sink() const { return sink_; }

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Deadline deadline) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Deadline deadline) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  void append(const std::string& key, const std::string& value) override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                     Deadline deadline) override;
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::string>& values) override;

 private:
  std::string sign(const std::string& key, const std::string& value) const {
    return sign_store_value(token_, key, value);
  }
  // The value, or nullopt after recording the key in the sink.
  std::optional<std::string> open(const std::string& key, const std::string& stored);

  std::shared_ptr<Store> inner_;
  std::string token_;
  std::shared_ptr<TamperSink> sink_;
};

}  // namespace ncclsmoke::rendezvous
