#pragma once
// How a store operation or a rank-to-rank connection failed, and the store values the job token
// refused: produced by rendezvous/ (store_error.h, signed_store.h), read by results/judging/
// (probe_rules.h, run_rules.h), one type each.
#include <string>

namespace ncclsmoke::facts {

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

// The one spelling: in error messages, and in findings' evidence ("error_class").
inline const char* to_string(ErrorClass c) {
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

// A store failure as data (rendezvous::StoreError::failure()): its class and its full message
// (a finding's evidence "detail").
struct StoreFailure {
  ErrorClass error_class = ErrorClass::other;
  std::string detail;
};

// A store value refused because it failed the job token's verification: STORE_TAMPERED.
struct TamperedValue {
  std::string key;
  std::string why;  // "not signed", "signed with another token or under another key"
};

}  // namespace ncclsmoke::facts
