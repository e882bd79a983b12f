#pragma once
// In-process store for tests and for one-thread-per-rank simulations (gloo's HashStore).
// Thread-safe; wait() blocks on a condition variable until the keys exist or the deadline passes.
#include <condition_variable>
#include <map>
#include <mutex>

#include "rendezvous/store.h"

namespace ncclsmoke::rendezvous {

class MemoryStore final : public Store {
 public:
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
  bool all_present_locked(const std::vector<std::string>& keys) const;
  void wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                   Deadline deadline);

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
};

}  // namespace ncclsmoke::rendezvous
