// evosdpa-tune's run-time candidates (tune/candidate.hpp), on the CPU (NVRTC needs no GPU): every row of
// mma_sm80's table compiled through NVRTC from the library's own source matches what the build's nvcc
// made of it (registers, spills, stack, from the resource gate's ptxas logs), and the gate the search
// applies refuses a row that spills.
#include <gtest/gtest.h>

#include <string>

#include "candidate.hpp"
#include "host/ptxas_report.hpp"

using namespace evosdpa::tune;
namespace mma = evosdpa::detail::mma_sm80;
namespace wg = evosdpa::detail::wgmma_sm90;

namespace {

TEST(TuneCandidate, NvrtcBuildsTheTableRowsAsTheBuildDid) {
  const auto built = evosdpa::host::load_ptxas_logs(EVOSDPA_PTXAS_LOG_DIR);
  int compared = 0;
  for (int row = 0; row < mma::kConfigCount; ++row)
    for (evosdpa_dtype_t dtype : {EVOSDPA_DTYPE_FLOAT16, EVOSDPA_DTYPE_BFLOAT16}) {
      // The build's kernel for this row: attention_kernel<T, row, NoMods>, at the first arch it was built for.
      const std::string type = dtype == EVOSDPA_DTYPE_BFLOAT16 ? "13__nv_bfloat16" : "6__half";
      const std::string mangled = "_ZN7evosdpa6detail8mma_sm8016attention_kernelI" + type + "Li" + std::to_string(row) +
                                  "ENS0_9ScoreModsILb0ELb0ELNS0_8MaskKindE0ELb0EEEEEvNS0_12KernelParamsE";
      const evosdpa::host::KernelResources* ref = nullptr;
      for (const auto& k : built)
        if (k.function == mangled) {
          ref = &k;
          break;
        }
      ASSERT_NE(ref, nullptr) << "no ptxas log of " << mangled;
      const CompiledCandidate c = compile_mma_sm80(mma::kConfigs[row], dtype, ref->arch);
      ASSERT_TRUE(c.ok) << c.error;
      EXPECT_EQ(c.gate(), "");
      EXPECT_EQ(c.resources.registers, ref->registers) << "row " << row << " " << ref->arch;
      EXPECT_EQ(c.resources.spill_store_bytes, ref->spill_store_bytes);
      EXPECT_EQ(c.resources.stack_bytes, ref->stack_bytes);
      EXPECT_GT(c.cubin.size(), 1000u);
      ++compared;
    }
  EXPECT_EQ(compared, 2 * mma::kConfigCount);
}

// The same for wgmma_sm90's 16-bit rows (fp16; bf16 compiles the same code): the candidate is row 0 of
// its own one-row table, so its name is the build's with every template row index 0.
TEST(TuneCandidate, NvrtcBuildsTheWgmmaRowsAsTheBuildDid) {
  const auto built = evosdpa::host::load_ptxas_logs(EVOSDPA_PTXAS_LOG_DIR);
  int compared = 0;
  for (int row = 0; row < wg::kConfigCount; ++row) {
    if (wg::kConfigs[row].fp8) continue;
    const CompiledCandidate c = compile_wgmma_sm90(wg::kConfigs[row], EVOSDPA_DTYPE_FLOAT16);
    ASSERT_TRUE(c.ok) << c.error;
    std::string name = c.kernel;
    for (size_t at = name.find("Li0E"); at != std::string::npos; at = name.find("Li0E", at + 1))
      name.replace(at, 4, "Li" + std::to_string(row) + "E");
    const evosdpa::host::KernelResources* ref = nullptr;
    for (const auto& k : built)
      if (k.function == name) ref = &k;
    ASSERT_NE(ref, nullptr) << "no ptxas log of " << name;
    EXPECT_EQ(ref->arch, "sm_90a");
    EXPECT_EQ(c.gate(), "");
    EXPECT_EQ(c.resources.registers, ref->registers) << "row " << row;
    EXPECT_EQ(c.resources.spill_store_bytes, ref->spill_store_bytes);
    EXPECT_EQ(c.resources.stack_bytes, ref->stack_bytes);
    EXPECT_EQ(c.resources.static_smem_bytes, ref->static_smem_bytes);
    EXPECT_GT(c.cubin.size(), 1000u);
    ++compared;
  }
  EXPECT_EQ(compared, 5);  // 64 (three and two consumers), 128, and the split_keys rows of both
}

TEST(TuneCandidate, TheGateRefusesARowThatSpills) {
  // D=128 with 4 m-tiles (64 rows) per warp: O alone is 64 x 128 / 32 = 256 floats per thread, past the
  // 255-register limit (a row the static rules accept: 32-key tiles keep it at 96 KiB of shared memory).
  const mma::TileConfig row{128, 4, 4, 32, 1, true, false};
  ASSERT_TRUE(mma::valid(row) && row.smem_bytes() <= 99 * 1024);
  const CompiledCandidate c = compile_mma_sm80(row, EVOSDPA_DTYPE_FLOAT16, "sm_90");
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_NE(c.gate().find("spills"), std::string::npos) << c.gate() << " (" << c.resources.registers << " registers)";
}

TEST(TuneCandidate, ACompileErrorIsReported) {
  const mma::TileConfig row{64, 4, 2, 64, 2, true, false};
  SourceTree tree = SourceTree::of_build();
  tree.src = "/nonexistent";
  const CompiledCandidate c = compile_mma_sm80(row, EVOSDPA_DTYPE_FLOAT16, "sm_90", tree);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.error.find("mma_kernel.cuh"), std::string::npos) << c.error;
  EXPECT_NE(c.gate(), "");
}

}  // namespace
