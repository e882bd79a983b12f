#pragma once
// One exception type for every store failure, carrying a class the rendezvous probe maps to a
// finding code (DNS vs refused vs timed out ...). Messages are full sentences that name the peer,
// the attempts and the time waited, in the style of c10d's DistNetworkError.
#include <stdexcept>
#include <string>

#include "facts/store.h"

namespace ncclsmoke::rendezvous {

// The classes and their spelling are facts/store.h's: judging reads the same type.
using facts::ErrorClass;
using facts::to_string;

class StoreError : public std::runtime_error {
 public:
  StoreError(ErrorClass cls, const std::string& message) : std::runtime_error(message), cls_(cls) {}
  ErrorClass error_class() const { return cls_; }
  // As judging reads it: the class and the whole message.
  facts::StoreFailure failure() const { return {cls_, what()}; }

 private:
  ErrorClass cls_;
};

}  // namespace ncclsmoke::rendezvous
