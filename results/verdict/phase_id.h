#pragma once
// A phase's identity: the step it belongs to and, for a transport's sweep and its pairwise rounds,
// the transport. Its name in the verdict ("world", "mesh", "transport:socket",
// "pairwise:socket") is built and read here and nowhere else, so no caller concatenates or splits
// phase names.
#include <string>
#include <string_view>

namespace ncclsmoke::results {

enum class PhaseKind {
  other,       // "world", "rendezvous", "mesh", "pairwise" (the summaries), "run" ...: by name
  transport,   // one transport's sweep: "transport:<t>"
  pairwise,    // one transport's pairwise rounds: "pairwise:<t>"
};

struct PhaseId {
  PhaseKind kind = PhaseKind::other;
  std::string transport;  // kind transport or pairwise; "" otherwise
  std::string other;      // kind other: the phase's name

  static PhaseId of_transport(std::string_view t) { return {PhaseKind::transport, std::string(t), {}}; }
  static PhaseId of_pairwise(std::string_view t) { return {PhaseKind::pairwise, std::string(t), {}}; }
  static PhaseId named(std::string_view name) { return {PhaseKind::other, {}, std::string(name)}; }

  // The verdict's spelling.
  std::string name() const {
    switch (kind) {
      case PhaseKind::transport: return std::string(kTransportPrefix) + transport;
      case PhaseKind::pairwise: return std::string(kPairwisePrefix) + transport;
      case PhaseKind::other: break;
    }
    return other;
  }
  // Any phase name; one that is neither a transport's nor a pairwise one is kind other.
  static PhaseId parse(std::string_view name) {
    if (name.substr(0, kTransportPrefix.size()) == kTransportPrefix && name.size() > kTransportPrefix.size())
      return of_transport(name.substr(kTransportPrefix.size()));
    if (name.substr(0, kPairwisePrefix.size()) == kPairwisePrefix && name.size() > kPairwisePrefix.size())
      return of_pairwise(name.substr(kPairwisePrefix.size()));
    return named(name);
  }
  bool is_transport(std::string_view t) const { return kind == PhaseKind::transport && transport == t; }
  friend bool operator==(const PhaseId&, const PhaseId&) = default;

 private:
  static constexpr std::string_view kTransportPrefix = "transport:";
  static constexpr std::string_view kPairwisePrefix = "pairwise:";
};

// Shorthands for the two names built most: "transport:<t>" and "pairwise:<t>".
inline std::string transport_phase_name(std::string_view t) { return PhaseId::of_transport(t).name(); }
inline std::string pairwise_phase_name(std::string_view t) { return PhaseId::of_pairwise(t).name(); }

}  // namespace ncclsmoke::results
