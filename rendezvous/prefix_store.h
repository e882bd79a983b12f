#pragma once
// Decorator that namespaces every key as "<prefix>/<key>", exactly as c10d's PrefixStore joins
// keys, so a phase or a process group can share one store with others without collisions.
// num_keys() is the underlying store's count (torch behaves the same).
#include <memory>

#include "rendezvous/store.h"

namespace ncclsmoke::rendezvous {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner);
  // Wraps a store the caller keeps alive for the decorator's whole life (not owned).
  PrefixStore(std::string prefix, Store& inner);

  const std::string& prefix() const { return prefix_; }

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
  std::string join(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> join(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace ncclsmoke::rendezvous
