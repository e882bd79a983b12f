#include "transports/transport.h"

namespace ncclsmoke::transports {

std::size_t dtype_size(DType d) { return d == DType::float32 ? 4 : 2; }

const char* to_string(DType d) { return d == DType::float32 ? "float32" : "bfloat16"; }

bool parse_dtype(const std::string& s, DType& out) {
  if (s == "float32" || s == "float" || s == "f32") out = DType::float32;
  else if (s == "bfloat16" || s == "bf16") out = DType::bfloat16;
  else return false;
  return true;
}

const char* to_string(ErrorKind k) {
  switch (k) {
    case ErrorKind::unavailable: return "unavailable";
    case ErrorKind::init_failed: return "init_failed";
    case ErrorKind::timeout: return "timeout";
    case ErrorKind::peer_lost: return "peer_lost";
    case ErrorKind::other: return "other";
  }
  return "other";
}

}  // namespace ncclsmoke::transports
