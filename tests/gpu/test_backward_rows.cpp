// Every row of mma_sm80's backward tile table on the shape set's small cases, in both modes: selection
// takes the first row a device's shared memory allows, so on an H100 the rows made for sm_86 and sm_89
// (99 KiB per block) would otherwise never run. The row is forced through the family's launch entry
// point after the public supports_backward() has accepted the arguments; rows that selection already
// picks on this device are left to test_backward.cpp.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include <cuda_runtime.h>

#include "common/cases.hpp"
#include "dispatch.hpp"
#include "gpu/backward_harness.hpp"
#include "gpu/gpu_harness.hpp"
#include "kernels/mma/bwd/bwd_config.hpp"
#include "kernels/mma/bwd/bwd_dispatch.hpp"

using namespace evosdpa::host;
using namespace gpu_test;
using namespace test_cases;
namespace m80 = evosdpa::detail::mma_sm80;

namespace {

using RowParam = std::tuple<int, evosdpa_backward_mode_t, KCase>;

std::vector<RowParam> row_cases() {
  std::vector<RowParam> out;
  for (const KCase& c : all_cases()) {
    if (c.name == "big" || c.name == "biggrid" || c.s.seqlen_q > 2048 || c.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ||
        c.s.seqlen_q == 0 || c.s.seqlen_k == 0)  // empty sequences are the API's (zero-filled before any kernel)
      continue;
    for (int row = 0; row < m80::kBwdConfigCount; ++row)
      if (m80::kBwdConfigs[row].head_dim == static_cast<int>(c.s.head_dim))
        for (auto mode : {EVOSDPA_BACKWARD_DETERMINISTIC, EVOSDPA_BACKWARD_FAST}) out.emplace_back(row, mode, c);
  }
  return out;
}

long long smem_optin() {
  int dev = 0, bytes = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
    return 0;
  return bytes;
}

class BackwardRow : public ::testing::TestWithParam<RowParam> {};

TEST_P(BackwardRow, MatchesFloat64Gradients) {
  const auto& [row, mode, c] = GetParam();
  const m80::BwdConfig& cfg = m80::kBwdConfigs[row];
  const long long smem = smem_optin();
  if (cfg.smem_bytes(2) > smem) GTEST_SKIP() << "the row needs more shared memory than this device allows";
  if (m80::bwd_config_index(cfg.head_dim, smem) == row) GTEST_SKIP() << "selection's row here: test_backward.cpp";
  const BackwardExpected& e = backward_expected_for(c);
  DeviceBackwardProblem prob(c.s, c.dtype, c.layout, e.in, mode, "mma_sm80");
  ASSERT_TRUE(prob.workspace_query().ok()) << prob.workspace_query().message;
  const evosdpa_params_t params = prob.params();
  const evosdpa::Result ok = evosdpa::supports_backward(params, "mma_sm80");
  if (!ok.ok()) GTEST_SKIP() << ok.message;
  const cudaError_t err =
      m80::launch_backward_variant(evosdpa::detail::make_backward_params(params), params.dtype, row, nullptr);
  ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  CUDA_OK(cudaDeviceSynchronize());
  const BackwardVerdict v = check_backward(c.s, c.dtype, e, prob.gradients());
  EXPECT_TRUE(v.pass) << v.message << " (EVOSDPA_TEST_SEED=" << run_seed() << ")";
}

std::string row_name(const ::testing::TestParamInfo<RowParam>& info) {
  const auto& [row, mode, c] = info.param;
  return "row" + std::to_string(row) + (mode == EVOSDPA_BACKWARD_FAST ? "_fast_" : "_deterministic_") + describe(c) +
         "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Rows, BackwardRow, ::testing::ValuesIn(row_cases()), row_name);

}  // namespace
