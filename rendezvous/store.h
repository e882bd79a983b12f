#pragma once
// The key-value store every rank rendezvouses through. The contract follows c10d's Store (and
// gloo's rendezvous/store.h): keys and values are binary-safe strings; counters written by add()
// are ASCII decimal, as torch stores them, so get() of a counter returns e.g. "3".
//
// Every operation that can block takes a deadline; implementations that talk to a network also
// bound the non-blocking operations by their own per-operation timeout (see TcpStoreOptions).
// Failures throw StoreError with a class (store_error.h).
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/deadline.h"
#include "rendezvous/store_error.h"

namespace ncclsmoke::rendezvous {

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until `key` exists (torch's GET does the same), then returns its value.
  virtual std::string get(const std::string& key, Deadline deadline) = 0;
  // Adds `delta` to the counter (a missing key counts as 0) and returns the new value. A key that
  // holds a non-numeric value is a StoreError(invalid).
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // True when every key exists. Never blocks on the keys.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Blocks until every key exists; StoreError(timed_out) at the deadline, naming missing keys.
  virtual void wait(const std::vector<std::string>& keys, Deadline deadline) = 0;
  // c10d semantics: missing key and empty `expected` creates it with `desired`; otherwise swaps
  // only when the current value equals `expected`. Returns the value now stored (for a missing
  // key with non-empty `expected`, returns `expected`, as torch does).
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;
  // True when the key existed.
  virtual bool delete_key(const std::string& key) = 0;
  // Number of keys in the whole store (torch counts every key, prefixed or not).
  virtual int64_t num_keys() = 0;
  // Appends to the value, creating the key when missing.
  virtual void append(const std::string& key, const std::string& value) = 0;
  // Waits until every key exists, then returns their values in order.
  virtual std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                             Deadline deadline) = 0;
  virtual void multi_set(const std::vector<std::string>& keys,
                         const std::vector<std::string>& values) = 0;
};

}  // namespace ncclsmoke::rendezvous
