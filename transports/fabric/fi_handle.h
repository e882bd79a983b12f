#pragma once
// Owners for libfabric objects, so no code path frees one by hand. FiHandle<T> holds any fid-based
// object (fid_fabric, fid_domain, fid_ep, fid_cq, fid_av, fid_mr ...) and fi_close()s it when it
// goes or is reset; FiInfo owns an fi_info list (fi_freeinfo). Closing order matters to libfabric
// (an endpoint before the cq/av bound to it, those before their domain, the domain before its
// fabric), so an owner of several declares them fabric first and resets them in reverse where the
// order must not depend on member layout.
#include <rdma/fabric.h>

#include <memory>
#include <utility>

#include "transports/fabric/fi_lib.h"

namespace ncclsmoke::transports::fabric {

template <class T>
class FiHandle {
 public:
  FiHandle() = default;
  explicit FiHandle(T* p) : p_(p) {}
  FiHandle(const FiHandle&) = delete;
  FiHandle& operator=(const FiHandle&) = delete;
  FiHandle(FiHandle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  FiHandle& operator=(FiHandle&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  ~FiHandle() { reset(); }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }
  // For the fi_* calls that open an object into a T**: closes what was held first.
  T** out() {
    reset();
    return &p_;
  }
  void reset() {
    if (p_) fi_close(&std::exchange(p_, nullptr)->fid);
  }

 private:
  T* p_ = nullptr;
};

struct FiInfoFree {
  void operator()(fi_info* i) const { loaded_fi_lib().freeinfo(i); }
};
using FiInfo = std::unique_ptr<fi_info, FiInfoFree>;

}  // namespace ncclsmoke::transports::fabric
