// What the NCCL transport accepts (transports/options.h): one declaration per option, read in
// nccl_transport.cpp with ctx.options.get_*("nccl.<name>"). The defaults here are the only ones:
// --help shows them and the backend applies them; the per-rank ones (the GPU, the log file) are
// computed for each rank from its facts (options.h: rank_default).
#include "transports/options.h"

#include <fmt/format.h>

#include <filesystem>
#include <string>

namespace ncclsmoke::transports {

std::vector<OptionSpec> nccl_options() {
  return {
      string_option("nccl", "net",
                    "Network NCCL is expected to use: IB, Socket, Libfabric (aws-ofi-nccl) ...")
          .expectation(),
      choice_option("nccl", "policy",
                    "pin: set NCCL_NET so a missing plugin fails init; observe: let NCCL choose "
                    "and report SILENT_FALLBACK when it differs from --nccl-net",
                    "observe", {"pin", "observe"})
          .under_gate("pin", "a gate pins NCCL's network"),
      bool_option("nccl", "share_gpu",
                  "Synthetic mode: several ranks share one GPU (NET transport forced; rows "
                  "labelled synthetic, never compared with baselines)"),
      int_option("nccl", "gpu", "GPU index for this rank", "", 0, 1023)
          .alias("--gpu")
          .shown_default("LOCAL_RANK; 0 with --nccl-share-gpu")
          // One GPU per rank on a node, unless the ranks share one on purpose.
          .rank_default([](const RankFacts& r, const BackendOptions& given) {
            return std::to_string(given.raw("nccl.share_gpu") == "true" ? 0 : r.local_rank);
          }),
      string_option("nccl", "lib", "Path of libnccl.so.2")
          .shown_default("the library search path"),
      string_option("nccl", "cudart", "Path of libcudart.so")
          .alias("--cudart-lib")
          .shown_default("the library search path"),
      string_option("nccl", "debug_file",
                    "This rank's NCCL log (NCCL_DEBUG_FILE); %r is replaced by the rank, %h and "
                    "%p as NCCL does. A user's own NCCL_DEBUG_FILE wins")
          .shown_default("OUT_DIR/nccl-debug.rank<N>.log")
          .rank_default([](const RankFacts& r, const BackendOptions&) {
            return (std::filesystem::path(r.out_dir) / fmt::format("nccl-debug.rank{}.log", r.rank))
                .string();
          }),
  };
}

}  // namespace ncclsmoke::transports
