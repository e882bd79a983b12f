#include "rendezvous/store_error.h"

namespace ncclsmoke::rendezvous {

const char* to_string(ErrorClass c) {
  switch (c) {
    case ErrorClass::dns: return "dns";
    case ErrorClass::refused: return "refused";
    case ErrorClass::timed_out: return "timed_out";
    case ErrorClass::stalled: return "stalled";
    case ErrorClass::unreachable: return "unreachable";
    case ErrorClass::reset: return "reset";
    case ErrorClass::protocol: return "protocol";
    case ErrorClass::limit: return "limit";
    case ErrorClass::invalid: return "invalid";
    case ErrorClass::not_found: return "not_found";
    case ErrorClass::other: return "other";
  }
  return "other";
}

}  // namespace ncclsmoke::rendezvous
