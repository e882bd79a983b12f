#include "rendezvous/memory_store.h"

#include "rendezvous/store_util.h"

namespace ncclsmoke::rendezvous {

bool MemoryStore::all_present_locked(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (!data_.count(k)) return false;
  return true;
}

void MemoryStore::wait_locked(std::unique_lock<std::mutex>& lock,
                              const std::vector<std::string>& keys, Deadline deadline) {
  auto start = Clock::now();
  if (!changed_.wait_until(lock, deadline, [&] { return all_present_locked(keys); })) {
    std::vector<std::string> missing;
    for (const auto& k : keys)
      if (!data_.count(k)) missing.push_back(k);
    throw StoreError(ErrorClass::timed_out,
                     "memory store: wait timed out after " +
                         std::to_string(static_cast<long long>(seconds_since(start) * 1000)) +
                         "ms; keys still missing: " + describe_keys(missing));
  }
}

void MemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard lock(mu_);
    data_[key] = value;
  }
  changed_.notify_all();
}

std::string MemoryStore::get(const std::string& key, Deadline deadline) {
  std::unique_lock lock(mu_);
  wait_locked(lock, {key}, deadline);
  return data_.at(key);
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  int64_t value;
  {
    std::lock_guard lock(mu_);
    auto& slot = data_[key];
    auto current = parse_counter(slot);
    if (!current) {
      throw StoreError(ErrorClass::invalid, "memory store: add on key " + printable(key) +
                                                " whose value " + printable(slot) +
                                                " is not a decimal integer");
    }
    value = *current + delta;
    slot = std::to_string(value);
  }
  changed_.notify_all();
  return value;
}

bool MemoryStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mu_);
  return all_present_locked(keys);
}

void MemoryStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  std::unique_lock lock(mu_);
  wait_locked(lock, keys, deadline);
}

std::string MemoryStore::compare_set(const std::string& key, const std::string& expected,
                                     const std::string& desired) {
  std::string result;
  {
    std::lock_guard lock(mu_);
    auto it = data_.find(key);
    if (it == data_.end()) {
      if (!expected.empty()) return expected;
      data_[key] = desired;
      result = desired;
    } else {
      if (it->second == expected) it->second = desired;
      result = it->second;
    }
  }
  changed_.notify_all();
  return result;
}

bool MemoryStore::delete_key(const std::string& key) {
  std::lock_guard lock(mu_);
  return data_.erase(key) > 0;
}

int64_t MemoryStore::num_keys() {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(data_.size());
}

void MemoryStore::append(const std::string& key, const std::string& value) {
  {
    std::lock_guard lock(mu_);
    data_[key] += value;
  }
  changed_.notify_all();
}

std::vector<std::string> MemoryStore::multi_get(const std::vector<std::string>& keys,
                                                Deadline deadline) {
  std::unique_lock lock(mu_);
  wait_locked(lock, keys, deadline);
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(data_.at(k));
  return out;
}

void MemoryStore::multi_set(const std::vector<std::string>& keys,
                            const std::vector<std::string>& values) {
  if (keys.size() != values.size())
    throw StoreError(ErrorClass::invalid, "memory store: multi_set with " +
                                              std::to_string(keys.size()) + " keys but " +
                                              std::to_string(values.size()) + " values");
  {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < keys.size(); ++i) data_[keys[i]] = values[i];
  }
  changed_.notify_all();
}

}  // namespace ncclsmoke::rendezvous
