// The resource gate: every kernel the build produced has no spills and no stack frame, and its shared
// memory fits the per-block limit of its arch. Reads the ptxas output captured during this build.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "host/ptxas_report.hpp"
#include "kernels/mma/mma_config.hpp"

using namespace evosdpa::host;

namespace {

TEST(ResourceGate, EveryKernelOfTheBuildPasses) {
  const auto kernels = load_ptxas_logs(EVOSDPA_PTXAS_LOG_DIR);
  ASSERT_FALSE(kernels.empty()) << "no ptxas output in " << EVOSDPA_PTXAS_LOG_DIR;
  std::set<std::string> mma;
  for (const auto& k : kernels)
    if (k.function.find("mma_sm80") != std::string::npos) mma.insert(k.function);
  EXPECT_EQ(mma.size(), 2u * evosdpa::detail::mma_sm80::kConfigCount)
      << "expected fp16 and bf16 instantiations of every tile-table row";
  for (const auto& v : gate_violations(kernels)) ADD_FAILURE() << v;
  std::cout << report_table(kernels);
}

TEST(ResourceGate, ParsesPtxasOutput) {
  std::istringstream log(
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_ZN7evosdpa6detail8mma_sm8016attention_kernelI6__halfLi0EEEvNS0_12KernelParamsE' for 'sm_90'\n"
      "ptxas info    : Function properties for _ZN7evosdpa6detail8mma_sm8016attention_kernelI6__halfLi0EEEvNS0_12KernelParamsE\n"
      "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 127 registers, used 1 barriers, 16 bytes smem, 472 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_80'\n"
      "ptxas info    : Function properties for _Z3fooPf\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 300 registers, used 0 barriers, 200000 bytes smem, 360 bytes cmem[0]\n");
  const auto ks = parse_ptxas_log(log);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].arch, "sm_90");
  EXPECT_EQ(ks[0].registers, 127);
  EXPECT_EQ(ks[0].stack_bytes, 8);
  EXPECT_EQ(ks[0].spill_store_bytes, 4);
  EXPECT_EQ(ks[0].spill_load_bytes, 12);
  EXPECT_EQ(ks[0].static_smem_bytes, 16);
  EXPECT_EQ(ks[0].threads_per_block, evosdpa::detail::mma_sm80::kConfigs[0].threads());
  EXPECT_GT(ks[0].dynamic_smem_bytes, 0);
  EXPECT_EQ(ks[1].static_smem_bytes, 200000);
  const auto bad = gate_violations(ks);
  EXPECT_EQ(bad.size(), 3u);  // spills and stack of the first, shared memory of the second
}

TEST(ResourceGate, OccupancyArithmetic) {
  KernelResources k;
  k.threads_per_block = 256;
  k.registers = 128;
  k.dynamic_smem_bytes = 48 * 1024;
  EXPECT_EQ(occupancy_blocks(k, *arch_limits("sm_90")), 2);  // 64K registers / (256 * 128)
  k.registers = 64;
  EXPECT_EQ(occupancy_blocks(k, *arch_limits("sm_90")), 4);  // 228 KiB / 49 KiB
  EXPECT_EQ(occupancy_blocks(k, *arch_limits("sm_89")), 2);  // 100 KiB / 49 KiB
  EXPECT_EQ(arch_limits("sm_70"), nullptr);
}

}  // namespace
