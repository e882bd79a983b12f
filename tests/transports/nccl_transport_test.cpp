// The NCCL transport on a machine without a GPU: it must say why it cannot run (unavailable),
// never pass. Holds whether or not CUDA/NCCL are installed: with /usr/local/cuda and no driver
// the reason is CUDA's own ("driver version is insufficient" / "no CUDA-capable device"); without
// the libraries it is the list of paths tried. Where a CUDA device exists (the GPU check machine)
// a 1-rank communicator opens, so that test skips; a GPU run is bench/gpu's job.
#include <gtest/gtest.h>

#include <iostream>

#include "rendezvous/memory_store.h"
#include "transports/nccl/nccl_api.h"
#include "transports/nccl/nccl_transport.h"
#include "transports/registry.h"

namespace ncclsmoke::transports {
namespace {

TransportContext context(rendezvous::Store* store) {
  TransportContext ctx;
  ctx.rank = 0;
  ctx.world_size = 1;
  ctx.hosts[0] = "testhost";
  ctx.store = store;
  return ctx;
}

// Runs open() and returns the error it must throw.
TransportError open_error(Transport& t, const TransportContext& ctx) {
  try {
    t.open(ctx, rendezvous::deadline_after(Millis{20000}));
  } catch (const TransportError& e) {
    std::cerr << "open(): " << to_string(e.kind()) << ": " << e.what() << "\n";
    return e;
  }
  ADD_FAILURE() << "open() succeeded on a machine the test expects to have no GPU";
  return TransportError(ErrorKind::other, "no error");
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Whether the transport would find a CUDA device: the libraries loaded as open() loads them
// (NcclApi::load with no pinned path, each runtime candidate in turn, as open() retries older
// runtimes on cudaErrorInsufficientDriver). Returns a description of the device when found.
std::string cuda_device_present() {
  for (const auto& cudart : nccl::NcclApi::cudart_candidates("")) {
    std::string why;
    auto api = nccl::NcclApi::load(cudart, "", why);
    if (!api) continue;
    int n = 0;
    if (api->cudaGetDeviceCount(&n) == nccl::cudaSuccess && n > 0)
      return std::to_string(n) + " CUDA device(s) through " + api->cudart_path + " and " +
             api->nccl_path;
  }
  return "";
}

TEST(NcclTransport, NameAndRegistry) {
  auto t = make_nccl_transport();
  EXPECT_EQ(t->name(), "nccl");
  EXPECT_EQ(nccl_debug_file_path(*t), "");
  const BackendInfo* b = find_backend("nccl");
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->make) << b->why_missing;
  EXPECT_EQ(b->make()->name(), "nccl");
}

TEST(NcclTransport, NoGpuIsUnavailableNamingCuda) {
  if (std::string dev = cuda_device_present(); !dev.empty())
    GTEST_SKIP() << "this machine has a GPU (" << dev << "): the no-GPU path cannot be shown here";
  rendezvous::MemoryStore store;
  auto t = make_nccl_transport();
  auto ctx = context(&store);
  TransportError e = open_error(*t, ctx);
  EXPECT_EQ(e.kind(), ErrorKind::unavailable) << e.what();
  EXPECT_TRUE(has(e.what(), "CUDA")) << e.what();
  EXPECT_TRUE(has(e.what(), "rank 0 (host testhost)")) << e.what();
  // Either no device / old driver, or libraries that did not load: both say which.
  EXPECT_TRUE(has(e.what(), "no CUDA device") || has(e.what(), "not loadable")) << e.what();
  // Nothing was published: rank 0 never got as far as the unique id.
  EXPECT_FALSE(store.check({"unique_id"}));
  nlohmann::json id = t->identify();
  EXPECT_EQ(id["synthetic"], false);
  EXPECT_TRUE(id["debug_file"].is_null());
  t->close();
  t->close();  // idempotent
}

TEST(NcclTransport, MissingNcclLibraryIsUnavailableNamingThePath) {
  rendezvous::MemoryStore store;
  auto t = make_nccl_transport();
  auto ctx = context(&store);
  ctx.options["nccl.lib"] = "/nonexistent/libnccl.so";
  TransportError e = open_error(*t, ctx);
  EXPECT_EQ(e.kind(), ErrorKind::unavailable) << e.what();
  EXPECT_TRUE(has(e.what(), "/nonexistent/libnccl.so")) << e.what();
  EXPECT_TRUE(has(e.what(), "cannot load NCCL")) << e.what();
}

TEST(NcclTransport, MissingCudaRuntimeIsUnavailableNamingThePath) {
  auto t = make_nccl_transport();
  auto ctx = context(nullptr);
  ctx.options["nccl.cudart"] = "/nonexistent/libcudart.so.13";
  TransportError e = open_error(*t, ctx);
  EXPECT_EQ(e.kind(), ErrorKind::unavailable) << e.what();
  EXPECT_TRUE(has(e.what(), "/nonexistent/libcudart.so.13")) << e.what();
}

TEST(NcclTransport, BadOptionsAreRejectedBeforeLoading) {
  auto t = make_nccl_transport();
  auto ctx = context(nullptr);
  ctx.options["nccl.policy"] = "sometimes";
  TransportError e = open_error(*t, ctx);
  EXPECT_EQ(e.kind(), ErrorKind::other);
  EXPECT_TRUE(has(e.what(), "sometimes")) << e.what();

  auto t2 = make_nccl_transport();
  auto ctx2 = context(nullptr);
  ctx2.options["nccl.gpu"] = "first";
  TransportError e2 = open_error(*t2, ctx2);
  EXPECT_EQ(e2.kind(), ErrorKind::other);
  EXPECT_TRUE(has(e2.what(), "\"first\"")) << e2.what();
}

TEST(NcclTransport, UseBeforeOpenThrows) {
  auto t = make_nccl_transport();
  float x = 1;
  EXPECT_THROW(t->allreduce(&x, &x, 1, DType::float32, ReduceOp::sum,
                            rendezvous::deadline_after(Millis{1000})),
               TransportError);
  EXPECT_THROW(t->copy_in(&x, &x, sizeof x), TransportError);
}

}  // namespace
}  // namespace ncclsmoke::transports
