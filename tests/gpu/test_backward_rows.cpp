// Every row of mma_sm80's backward tile table on the shape set's small cases, in both modes: selection
// takes the first row the device runs, so on an H100 the rows made for sm_80-89 would otherwise never
// run. The row is forced through the family's launch entry point, with its own workspace, after the
// public supports_backward() has accepted the arguments; the row selection picks on this device is left
// to test_backward.cpp, and rows the device cannot run (architecture, shared memory) are skipped.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <tuple>

#include <cuda_runtime.h>

#include "common/cases.hpp"
#include "dispatch.hpp"
#include "kernels/cuda_archs.hpp"
#include "kernels/registry.hpp"
#include "selection.hpp"
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

// The current device as selection sees it.
evosdpa::detail::DeviceInfo this_device() {
  evosdpa::detail::DeviceInfo dev;
  int smem = 0;
  if (cudaGetDevice(&dev.ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&dev.cc_major, cudaDevAttrComputeCapabilityMajor, dev.ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&dev.cc_minor, cudaDevAttrComputeCapabilityMinor, dev.ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&dev.sm_count, cudaDevAttrMultiProcessorCount, dev.ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev.ordinal) != cudaSuccess)
    throw std::runtime_error("cannot query the device");
  dev.max_smem_per_block_optin = smem;
  return dev;
}

class BackwardRow : public ::testing::TestWithParam<RowParam> {};

TEST_P(BackwardRow, MatchesFloat64Gradients) {
  const auto& [row, mode, c] = GetParam();
  const m80::BwdConfig& cfg = m80::kBwdConfigs[row];
  const BackwardExpected& e = backward_expected_for(c);
  DeviceBackwardProblem prob(c.s, c.dtype, c.layout, e.in, mode, "mma_sm80");
  evosdpa_params_t params = prob.params();
  const evosdpa::Result ok = evosdpa::supports_backward(params, "mma_sm80");
  if (!ok.ok()) GTEST_SKIP() << ok.message;
  const evosdpa::detail::DeviceInfo dev = this_device();
  const evosdpa::detail::Selection chosen = evosdpa::detail::select_kernel(
      params, dev, "mma_sm80", evosdpa::detail::registry(), evosdpa::detail::Pass::kBackward);
  ASSERT_TRUE(chosen.check.ok()) << chosen.check.message;
  if (chosen.variant == row) GTEST_SKIP() << "selection's row here: test_backward.cpp";
  if (cfg.min_arch > evosdpa::detail::cuda_archs_code_level(chosen.family->cuda_archs, dev.cc_major, dev.cc_minor))
    GTEST_SKIP() << "the row's kernel is not compiled for the code this device runs";
  if (cfg.smem_bytes(2) > dev.max_smem_per_block_optin)
    GTEST_SKIP() << "the row needs more shared memory than this device allows";
  // The workspace of the forced row (its turn counters follow its query tiles), poisoned like the rest.
  DeviceBuffer workspace(chosen.family->backward->workspace_bytes(params, row));
  CUDA_OK(cudaMemset(workspace.ptr, 0xff, workspace.bytes));
  params.workspace = workspace.ptr;
  params.workspace_size = workspace.bytes;
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
