// Every row of the Hopper family's tile table, and its cluster split, on the small cases of the shape
// set: by name, wgmma_sm90 runs the row its selection function picks, so a row that is picked only
// for some grids (split_keys for grids of less than a wave, the persistent rows for larger ones) would
// otherwise miss the small cases' edges (tails, Lk = 0, causal alignments, grouped heads, strides).
// The row is forced through the family's launch entry point, after the public supports() has accepted
// the arguments (alignment, strides).
#include <gtest/gtest.h>

#include <string>

#include "common/cases.hpp"
#include "dispatch.hpp"
#include "gpu/gpu_harness.hpp"
#include "host/accuracy_check.hpp"
#include "kernels/mma/mma_config.hpp"
#include "kernels/mma/mma_dispatch.hpp"
#include "kernels/wgmma/wgmma_config.hpp"
#include "kernels/wgmma/wgmma_dispatch.hpp"

using namespace evosdpa::host;
using namespace gpu_test;
using namespace test_cases;
namespace wg = evosdpa::detail::wgmma_sm90;

namespace {

struct RowCase {
  KCase c;
  wg::Choice choice;
};

std::string name_of(const RowCase& r) {
  const wg::TileConfig& t = wg::kConfigs[r.choice.row];
  return describe(r.c) + "_m" + std::to_string(t.block_m()) + (t.split_keys ? "splitkeys" : "") + (t.fp8 ? "fp8" : "") + "_x" +
         std::to_string(r.choice.splits);
}

void PrintTo(const RowCase& r, std::ostream* os) { *os << name_of(r); }

// The cases up to 2,048 queries, each with every row of its head size, and with clusters of 2 where an
// item has at least two tiles (a split_keys CTA's run may then leave a consumer without a tile). The
// "biggrid" ones give each CTA of a persistent row several items of different tile counts, whose
// boundaries the consumers cross with the next item's first tile (consume_item).
std::vector<RowCase> row_cases() {
  std::vector<RowCase> out;
  for (const KCase& c : all_cases()) {
    if (c.name == "big" || c.s.seqlen_q > 2048) continue;
    for (int row = 0; row < wg::kConfigCount; ++row) {
      const wg::TileConfig& t = wg::kConfigs[row];
      if (t.head_dim != static_cast<int>(c.s.head_dim) || t.fp8 != (c.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3)) continue;
      out.push_back({c, {row, 1}});
      if (!t.fp8 && c.s.seqlen_k > t.block_n) out.push_back({c, {row, 2}});
    }
  }
  return out;
}

class WgmmaRow : public ::testing::TestWithParam<RowCase> {};

TEST_P(WgmmaRow, MatchesFloat64Reference) {
  const RowCase& rc = GetParam();
  const KCase& c = rc.c;
  const Expected& e = expected_for(c);
  DeviceProblem prob(c.s, c.dtype, c.layout, e.in, c.lse, e.o_dtype);
  const auto params = prob.params();
  const evosdpa::Result ok = evosdpa::supports(params, "wgmma_sm90");
  if (!ok.ok()) GTEST_SKIP() << ok.message;
  const cudaError_t err = wg::launch_variant(evosdpa::detail::make_kernel_params(params), params.dtype,
                                             rc.choice.variant(), nullptr);
  ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> out = prob.output();
  const std::vector<float> lse = c.lse ? prob.lse() : std::vector<float>{};
  const Verdict v = check_attention(c.s, c.dtype, e, out, c.lse ? &lse : nullptr);
  EXPECT_TRUE(v.pass) << v.message << " (EVOSDPA_TEST_SEED=" << run_seed() << ")";
}

INSTANTIATE_TEST_SUITE_P(Rows, WgmmaRow, ::testing::ValuesIn(row_cases()),
                         [](const auto& info) { return name_of(info.param) + "_" + std::to_string(info.index); });

}  // namespace

namespace {

// ALiBi with a softcap (or a window) has no kernel (score_mods.cuh) and supports() refuses it; forced
// through a family's launch entry point it is refused again, with O untouched, rather than run without
// the cap (score_mods_instantiated).
TEST(Masks, LaunchersRefuseCombinationsWithoutTheirKernel) {
  namespace mma = evosdpa::detail::mma_sm80;
  const Shape s = with_alibi(
      with_mods(with_mask(shape(1, 2, 2, 100, 130, 128, EVOSDPA_CAUSAL_NONE), EVOSDPA_MASK_ADDITIVE, true, false), -1,
                -1, 30),
      true);
  const KCase c{"alibicap", s, EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, 4.0};
  const Expected& e = expected_for(c);
  DeviceProblem prob(c.s, c.dtype, c.layout, e.in, c.lse, e.o_dtype);
  prob.poison();
  const std::vector<uint16_t> poisoned = prob.raw_output();
  const auto params = prob.params();
  EXPECT_EQ(evosdpa::attention_forward(params, nullptr, "wgmma_sm90").status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(evosdpa::attention_forward(params, nullptr, "mma_sm80").status, EVOSDPA_ERROR_NOT_SUPPORTED);
  const auto kp = evosdpa::detail::make_kernel_params(params);
  int refused = 0;
  for (int row = 0; row < wg::kConfigCount; ++row) {
    const wg::TileConfig& t = wg::kConfigs[row];
    if (t.head_dim != 128 || t.fp8) continue;
    EXPECT_EQ(wg::launch_variant(kp, params.dtype, wg::Choice{row, 1}.variant(), nullptr), cudaErrorInvalidValue)
        << "wgmma row " << row;
    ++refused;
  }
  for (int row = 0; row < mma::kConfigCount; ++row) {
    if (mma::kConfigs[row].head_dim != 128) continue;
    EXPECT_EQ(mma::launch_variant(kp, params.dtype, row, nullptr), cudaErrorInvalidValue) << "mma row " << row;
    ++refused;
  }
  EXPECT_GT(refused, 0);
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(prob.raw_output() == poisoned) << "O was written";
}

}  // namespace
