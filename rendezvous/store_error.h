#pragma once
// One exception type for every store failure, carrying a class the rendezvous probe maps to a
// finding code (DNS vs refused vs timed out ...). Messages are full sentences that name the peer,
// the attempts and the time waited, in the style of c10d's DistNetworkError.
#include <stdexcept>
#include <string>

namespace ncclsmoke::rendezvous {

enum class ErrorClass {
  dns,          // the name did not resolve (EAI_NONAME, EAI_AGAIN ...)
  refused,      // RST in answer to SYN: host up, nothing listening (or REJECT rule)
  timed_out,    // no answer within the deadline: SYN dropped, or the peer never replied
  stalled,      // the connection was accepted (the kernel completed the handshake) but the process
                // behind it never answered the first exchange: stopped (SIGSTOP, a debugger),
                // swapping or overloaded. Not a firewall: a DROP rule never lets connect() succeed.
  unreachable,  // EHOSTUNREACH / ENETUNREACH: no route
  reset,        // the connection was reset or closed by the peer mid-operation
  protocol,     // the peer sent bytes that do not follow the wire protocol
  limit,        // a key/value/count exceeds the configured limits
  invalid,      // caller error (bad argument, non-numeric value under ADD ...)
  not_found,    // GET of a missing key on a store that does not wait
  other,
};

const char* to_string(ErrorClass c);

class StoreError : public std::runtime_error {
 public:
  StoreError(ErrorClass cls, const std::string& message) : std::runtime_error(message), cls_(cls) {}
  ErrorClass error_class() const { return cls_; }

 private:
  ErrorClass cls_;
};

}  // namespace ncclsmoke::rendezvous
