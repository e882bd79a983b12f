// NVML's reader (node/gpu_health.h) against the stand-in library tests/node/fake_nvml.cpp: a
// healthy node, a faulty GPU, a lost one, NVML that does not start, and no library at all.
#include "node/gpu_health.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace ncclsmoke::node {
namespace {

facts::GpuHealthFacts read_as(const char* scenario, const char* gpus = "2") {
  ::setenv("FAKE_NVML", scenario, 1);
  ::setenv("FAKE_NVML_GPUS", gpus, 1);
  return read_gpu_health(FAKE_NVML_LIBRARY);
}

TEST(GpuHealth, AHealthyNodeReadsEveryGpu) {
  auto h = read_as("healthy");
  ASSERT_TRUE(h.read) << h.why_not;
  EXPECT_EQ(h.driver_version, "550.54.15");
  ASSERT_EQ(h.gpus.size(), 2u);
  const auto& g = h.gpus[1];
  EXPECT_EQ(g.index, 1);
  EXPECT_EQ(g.uuid, "GPU-00000001-fake-uuid");
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.pci_bus_id, "00000000:28:00.0");
  EXPECT_EQ(g.ecc_uncorrected_volatile, 0);
  EXPECT_EQ(g.remap_pending, 0);
  EXPECT_EQ(g.remap_failed, 0);
  EXPECT_EQ(g.retired_pages_dbe, -1) << "not supported: unknown, not zero";
  EXPECT_EQ(g.retired_pages_pending, -1);
  EXPECT_EQ(g.pcie_width, 16);
  EXPECT_EQ(g.pcie_width_max, 16);
  EXPECT_EQ(g.pcie_gen, 1);
  EXPECT_EQ(g.pcie_gen_max, 5);
  EXPECT_EQ(g.clock_event_reasons, 0x1);
  EXPECT_TRUE(g.error.empty());
}

TEST(GpuHealth, AFaultyGpuIsReadAsItIs) {
  auto h = read_as("faulty");
  ASSERT_TRUE(h.read);
  const auto& g = h.gpus.at(1);
  EXPECT_EQ(g.ecc_uncorrected_volatile, 2);
  EXPECT_EQ(g.ecc_uncorrected_aggregate, 5);
  EXPECT_EQ(g.remapped_rows_uncorrectable, 1);
  EXPECT_EQ(g.remap_pending, 1);
  EXPECT_EQ(g.pcie_width, 8);
  EXPECT_EQ(g.clock_event_reasons, 0x8);
  EXPECT_EQ(h.gpus.at(0).ecc_uncorrected_volatile, 0);
}

TEST(GpuHealth, ALostGpuSaysWhyAndTheOthersAreRead) {
  auto h = read_as("lost", "3");
  ASSERT_TRUE(h.read);
  ASSERT_EQ(h.gpus.size(), 3u);
  EXPECT_EQ(h.gpus[1].error, "GPU is lost");
  EXPECT_TRUE(h.gpus[1].uuid.empty());
  EXPECT_EQ(h.gpus[2].uuid, "GPU-00000002-fake-uuid");
}

TEST(GpuHealth, NvmlThatDoesNotStartOrIsNotThereIsNotRead) {
  auto m = read_as("mismatch");
  EXPECT_FALSE(m.read);
  EXPECT_EQ(m.init_error, 18);
  EXPECT_EQ(m.why_not, "nvmlInit: Driver/library version mismatch");
  auto d = read_as("nodriver");
  EXPECT_FALSE(d.read);
  EXPECT_EQ(d.init_error, facts::kNvmlDriverNotLoaded);
  auto none = read_gpu_health("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(none.read);
  EXPECT_EQ(none.init_error, -1);
  EXPECT_NE(none.why_not.find("cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << none.why_not;
  EXPECT_TRUE(none.gpus.empty());
}

}  // namespace
}  // namespace ncclsmoke::node
