// What the fabric transport accepts (transports/options.h): one declaration per option, read in
// fabric_transport.cpp with ctx.options.get_*("fabric.<name>"). Compiled into every binary, also
// one built without libfabric, so the flags are the same everywhere.
#include "transports/options.h"

namespace ncclsmoke::transports {

std::vector<OptionSpec> fabric_options() {
  return {
      string_option("fabric", "provider",
                    "libfabric provider for the fabric transport: efa, verbs, tcp, udp, shm ...",
                    "tcp"),
      string_option("fabric", "domain",
                    "libfabric domain for the fabric transport (e.g. lo, eth0, rdmap0s6-rdm)")
          .shown_default("the domain bound to the address used to reach the store"),
      size_option("fabric", "chunk_bytes",
                  "Pipeline chunk of the fabric transport (capped by the provider's max_msg_size)",
                  "1M", 1, std::uint64_t{1} << 30),
      int_option("fabric", "window", "Sends and receives in flight each way (fabric transport)",
                 "4", 1, 256),
      choice_option("fabric", "hw_counters",
                    "Read EFA/IB hardware counters around the sweep: auto (efa only), always, never",
                    "auto", {"auto", "always", "never"}),
      string_option("fabric", "hw_counters_root",
                    "Where EFA/IB hardware counters live", "/sys/class/infiniband"),
  };
}

}  // namespace ncclsmoke::transports
