#include "rendezvous/signed_store.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fmt/format.h>

#include <stdexcept>
#include <thread>

namespace ncclsmoke::rendezvous {
namespace {

// "<magic><32-byte MAC><value>". The magic names the format, so a later one can coexist.
constexpr std::string_view kSignedMagic = "ncs1:";
constexpr std::size_t kMacBytes = 32;  // SHA-256
// How often a get re-reads a key that held an unverified value (until its deadline).
constexpr Millis kReverifyEvery{50};

// HMAC-SHA256(token, "ncclsmoke-store-v1" NUL <key length, 8 bytes big-endian> key value): the
// key's length keeps (key "a/b", value "c") and (key "a", value "/bc") apart.
std::string store_mac(const std::string& token, const std::string& key, const std::string& value) {
  std::string msg = "ncclsmoke-store-v1";
  msg.push_back('\0');
  std::uint64_t n = key.size();
  for (int i = 7; i >= 0; --i) msg.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  msg += key;
  msg += value;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
            reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len) ||
      len != kMacBytes)
    throw StoreError(ErrorClass::other, fmt::format("signing the store key '{}' failed (OpenSSL "
                                                    "HMAC-SHA256)", key));
  return std::string(reinterpret_cast<const char*>(mac), len);
}

std::string unverified_message(const std::string& key, const std::string& why) {
  return fmt::format("the store key '{}' held a value that failed verification ({}) until the "
                     "deadline: it was not written by a holder of this job's token "
                     "(NCCLSMOKE_JOB_TOKEN); someone else writes to the store, or the ranks were "
                     "given different tokens",
                     key, why);
}

}  // namespace

bool TamperSink::record(const std::string& key, const std::string& why) {
  std::lock_guard lock(mu_);
  if (!seen_.insert(key).second) return false;
  values_.push_back({key, why});
  return true;
}

std::vector<TamperedValue> TamperSink::snapshot() const {
  std::lock_guard lock(mu_);
  return values_;
}

std::string sign_store_value(const std::string& token, const std::string& key,
                             const std::string& value) {
  std::string out(kSignedMagic);
  out += store_mac(token, key, value);
  out += value;
  return out;
}

std::optional<std::string> verify_store_value(const std::string& token, const std::string& key,
                                              const std::string& stored, std::string* why) {
  auto fail = [why](const char* reason) -> std::optional<std::string> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (stored.size() < kSignedMagic.size() + kMacBytes ||
      stored.compare(0, kSignedMagic.size(), kSignedMagic) != 0)
    return fail("not signed");
  std::string value = stored.substr(kSignedMagic.size() + kMacBytes);
  const std::string want = store_mac(token, key, value);
  if (CRYPTO_memcmp(want.data(), stored.data() + kSignedMagic.size(), kMacBytes) != 0)
    return fail("signed with another token or under another key");
  return value;
}

std::string make_job_token() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    throw std::runtime_error("cannot make a job token: OpenSSL's RAND_bytes failed (no entropy?); "
                             "set NCCLSMOKE_JOB_TOKEN yourself");
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

SignedStore::SignedStore(std::shared_ptr<Store> inner, std::string token,
                         std::shared_ptr<TamperSink> sink)
    : inner_(std::move(inner)), token_(std::move(token)), sink_(std::move(sink)) {
  if (!sink_) sink_ = std::make_shared<TamperSink>();
}

SignedStore::SignedStore(Store& inner, std::string token, std::shared_ptr<TamperSink> sink)
    : SignedStore(std::shared_ptr<Store>(&inner, [](Store*) {}), std::move(token),
                  std::move(sink)) {}

std::optional<std::string> SignedStore::open(const std::string& key, const std::string& stored) {
  std::string why;
  auto value = verify_store_value(token_, key, stored, &why);
  if (!value) sink_->record(key, why);
  return value;
}

void SignedStore::set(const std::string& key, const std::string& value) {
  inner_->set(key, authenticated() ? sign(key, value) : value);
}

std::string SignedStore::get(const std::string& key, Deadline deadline) {
  if (!authenticated()) return inner_->get(key, deadline);
  std::string why;
  for (;;) {
    std::string stored;
    try {
      stored = inner_->get(key, deadline);
    } catch (const StoreError& e) {
      // The forged value was deleted and nothing verified came: still say what was seen.
      if (e.error_class() == ErrorClass::timed_out && !why.empty())
        throw StoreError(ErrorClass::timed_out, unverified_message(key, why));
      throw;
    }
    if (auto value = verify_store_value(token_, key, stored, &why)) return *value;
    sink_->record(key, why);
    if (expired(deadline)) throw StoreError(ErrorClass::timed_out, unverified_message(key, why));
    std::this_thread::sleep_for(std::min(kReverifyEvery, remaining(deadline)));
  }
}

int64_t SignedStore::add(const std::string& key, int64_t delta) { return inner_->add(key, delta); }

bool SignedStore::check(const std::vector<std::string>& keys) { return inner_->check(keys); }

void SignedStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  inner_->wait(keys, deadline);
}

std::string SignedStore::compare_set(const std::string& key, const std::string& expected,
                                     const std::string& desired) {
  if (!authenticated()) return inner_->compare_set(key, expected, desired);
  // An empty `expected` means "create when missing" on the wire: it stays empty.
  auto now = inner_->compare_set(key, expected.empty() ? expected : sign(key, expected),
                                 sign(key, desired));
  auto value = open(key, now);
  return value ? *value : std::string();
}

bool SignedStore::delete_key(const std::string& key) { return inner_->delete_key(key); }

int64_t SignedStore::num_keys() { return inner_->num_keys(); }

void SignedStore::append(const std::string& key, const std::string& value) {
  if (authenticated())
    throw StoreError(ErrorClass::invalid,
                     fmt::format("append to the store key '{}' cannot be signed: with a job token "
                                 "(NCCLSMOKE_JOB_TOKEN) values are written whole with set",
                                 key));
  inner_->append(key, value);
}

std::vector<std::string> SignedStore::multi_get(const std::vector<std::string>& keys,
                                                Deadline deadline) {
  if (!authenticated()) return inner_->multi_get(keys, deadline);
  for (;;) {
    auto stored = inner_->multi_get(keys, deadline);
    std::vector<std::string> out;
    out.reserve(stored.size());
    std::string bad_key, bad_why;
    for (std::size_t i = 0; i < stored.size() && i < keys.size(); ++i) {
      std::string why;
      auto value = verify_store_value(token_, keys[i], stored[i], &why);
      if (!value) {
        sink_->record(keys[i], why);
        if (bad_key.empty()) bad_key = keys[i], bad_why = why;
        continue;
      }
      out.push_back(std::move(*value));
    }
    if (bad_key.empty()) return out;
    if (expired(deadline)) throw StoreError(ErrorClass::timed_out, unverified_message(bad_key, bad_why));
    std::this_thread::sleep_for(std::min(kReverifyEvery, remaining(deadline)));
  }
}

void SignedStore::multi_set(const std::vector<std::string>& keys,
                            const std::vector<std::string>& values) {
  if (!authenticated()) return inner_->multi_set(keys, values);
  if (keys.size() != values.size())
    throw StoreError(ErrorClass::invalid,
                     fmt::format("multi_set got {} keys but {} values", keys.size(), values.size()));
  std::vector<std::string> signed_values;
  signed_values.reserve(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    signed_values.push_back(sign(keys[i], values[i]));
  inner_->multi_set(keys, signed_values);
}

}  // namespace ncclsmoke::rendezvous
