#include "rendezvous/prefix_store.h"

namespace ncclsmoke::rendezvous {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
    : prefix_(std::move(prefix)), inner_(std::move(inner)) {}

PrefixStore::PrefixStore(std::string prefix, Store& inner)
    : PrefixStore(std::move(prefix), std::shared_ptr<Store>(&inner, [](Store*) {})) {}

std::vector<std::string> PrefixStore::join(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(join(k));
  return out;
}

void PrefixStore::set(const std::string& key, const std::string& value) {
  inner_->set(join(key), value);
}
std::string PrefixStore::get(const std::string& key, Deadline deadline) {
  return inner_->get(join(key), deadline);
}
int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return inner_->add(join(key), delta);
}
bool PrefixStore::check(const std::vector<std::string>& keys) { return inner_->check(join(keys)); }
void PrefixStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  inner_->wait(join(keys), deadline);
}
std::string PrefixStore::compare_set(const std::string& key, const std::string& expected,
                                     const std::string& desired) {
  return inner_->compare_set(join(key), expected, desired);
}
bool PrefixStore::delete_key(const std::string& key) { return inner_->delete_key(join(key)); }
int64_t PrefixStore::num_keys() { return inner_->num_keys(); }
void PrefixStore::append(const std::string& key, const std::string& value) {
  inner_->append(join(key), value);
}
std::vector<std::string> PrefixStore::multi_get(const std::vector<std::string>& keys,
                                                Deadline deadline) {
  return inner_->multi_get(join(keys), deadline);
}
void PrefixStore::multi_set(const std::vector<std::string>& keys,
                            const std::vector<std::string>& values) {
  inner_->multi_set(join(keys), values);
}

}  // namespace ncclsmoke::rendezvous
