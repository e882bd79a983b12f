#pragma once
// libfabric, opened at run time (transports/shared_library.h) the first time the fabric transport
// runs, so a node without libfabric1 still runs every other transport, and a process that never
// runs this one never pays libfabric's load (its PSM provider's constructor sleeps for about 0.2 s).
//
// Only the functions libfabric exports are here. The rest of the API this transport uses
// (fi_domain, fi_endpoint, fi_cq_open, fi_tsend, fi_cq_read, fi_close, fi_av_straddr ...) are
// static inline functions of <rdma/fi_*.h> that call through the ops tables of the objects these
// return, so they need no symbol. fi_allocinfo() is inline too but calls the exported fi_dupinfo:
// use dupinfo(nullptr). The header types are the build's libfabric-dev; the library opened is the
// node's libfabric.so.1 (the ABI the soname promises).
#include <rdma/fabric.h>

#include <string>

namespace ncclsmoke::transports::fabric {

struct FiLib {
  std::string path;  // what was opened
  decltype(&::fi_getinfo) getinfo = nullptr;
  decltype(&::fi_freeinfo) freeinfo = nullptr;
  decltype(&::fi_dupinfo) dupinfo = nullptr;
  decltype(&::fi_fabric) fabric = nullptr;
  decltype(&::fi_strerror) strerror = nullptr;
  decltype(&::fi_version) version = nullptr;
};

// The process's libfabric, opened on the first call (thread-safe) and kept for the life of the
// process. Null when it cannot be opened or lacks an entry point: `why` then says which paths
// were tried and what the loader said (the same text on every later call).
const FiLib* fi_lib(std::string& why);

// The library fi_lib() opened; only for code that holds an object it returned (an fi_info).
const FiLib& loaded_fi_lib();

}  // namespace ncclsmoke::transports::fabric
