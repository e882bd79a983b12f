// What the socket transport accepts (transports/options.h): one declaration per option, read in
// socket_transport.cpp with ctx.options.get_*("socket.<name>"). Compiled into every binary.
#include "transports/options.h"

namespace ncclsmoke::transports {

std::vector<OptionSpec> socket_options() {
  return {
      string_option("socket", "ifname",
                    "Interfaces for the socket transport, NCCL_SOCKET_IFNAME syntax (prefixes, ^ "
                    "excludes, = exact); default NCCL_SOCKET_IFNAME, else the store's interface"),
      int_option("socket", "nconn", "Connections per peer for the socket transport", "1", 1, 16),
      size_option("socket", "chunk", "Pipeline chunk size of the socket transport", "1M",
                  std::uint64_t{1} << 10, std::uint64_t{256} << 20),
      size_option("socket", "bufsize",
                  "SO_SNDBUF/SO_RCVBUF asked for each socket connection; 0 leaves the kernel's "
                  "autotuning on (it beat every fixed size measured)",
                  "0", 0, std::uint64_t{1} << 30),
  };
}

}  // namespace ncclsmoke::transports
