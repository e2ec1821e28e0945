// The backward pass of every kernel that has one, in both modes, against the float64 CPU gradients on
// fresh random inputs (host/backward_check.hpp), outputs and workspace poisoned before the run: every
// 16-bit case of the shape set, FP8 inputs refused, bitwise repeatability, empty sequences, and the C
// ABI's argument errors with evosdpa_supports_backward agreeing with the call.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>

#include "common/cases.hpp"
#include "gpu/backward_harness.hpp"
#include "gpu/gpu_harness.hpp"

using namespace evosdpa::host;
using namespace gpu_test;
using namespace test_cases;

namespace {

constexpr const char* kBackwardKernels[] = {"reference", "mma_sm80", "wgmma_sm90"};

// wgmma_sm90 runs on Hopper only; elsewhere its cases skip (its refusal there is test_backward_selection's).
bool runs_here(const std::string& kernel) {
  if (kernel != "wgmma_sm90") return true;
  int device = 0, major = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major == 9;
}
constexpr evosdpa_backward_mode_t kModes[] = {EVOSDPA_BACKWARD_DETERMINISTIC, EVOSDPA_BACKWARD_FAST};

const char* mode_name(evosdpa_backward_mode_t m) { return m == EVOSDPA_BACKWARD_FAST ? "fast" : "deterministic"; }

// One run from poisoned outputs and workspace, judged against float64; with the Padded layout, nothing
// written outside the gradients.
void expect_correct(const KCase& c, const BackwardExpected& e, const std::string& kernel,
                    evosdpa_backward_mode_t mode) {
  if (!runs_here(kernel)) GTEST_SKIP() << kernel << " needs a Hopper GPU";
  DeviceBackwardProblem prob(c.s, c.dtype, c.layout, e.in, mode, kernel);
  ASSERT_TRUE(prob.workspace_query().ok()) << prob.workspace_query().message;
  const evosdpa::Result r = prob.run(kernel);
  ASSERT_TRUE(r.ok()) << r.message;
  CUDA_OK(cudaDeviceSynchronize());
  const BackwardVerdict v = check_backward(c.s, c.dtype, e, prob.gradients());
  // In --gtest_output=xml reports: how close each kernel comes to the allowed error.
  for (Grad g : kGrads) {
    ::testing::Test::RecordProperty(std::string(grad_name(g)) + "_error",
                                    std::to_string(v.grad[static_cast<size_t>(g)].error));
    ::testing::Test::RecordProperty(std::string(grad_name(g)) + "_tolerance",
                                    std::to_string(v.grad[static_cast<size_t>(g)].tolerance));
  }
  EXPECT_TRUE(v.pass) << v.message << " (EVOSDPA_TEST_SEED=" << run_seed() << ")";
  if (c.layout == Layout::Padded)
    for (Grad g : kGrads) {
      const int64_t heads = g == Grad::dQ ? c.s.heads_q : c.s.heads_kv;
      EXPECT_EQ(padding_written(prob.raw(g), c.layout, c.s.batch, heads, gradient_length(c.s, g), c.s.head_dim), "")
          << grad_name(g);
    }
}

using BackwardParam = std::tuple<std::string, evosdpa_backward_mode_t, KCase>;

class BackwardVsCpu : public ::testing::TestWithParam<BackwardParam> {};

TEST_P(BackwardVsCpu, MatchesFloat64Gradients) {
  const auto& [kernel, mode, c] = GetParam();
  expect_correct(c, backward_expected_for(c), kernel, mode);
}

std::vector<BackwardParam> backward_params(bool fp8) {
  std::vector<BackwardParam> out;
  for (const auto& c : all_cases())
    if ((c.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3) == fp8)
      for (const char* k : kBackwardKernels)
        for (auto m : kModes) out.emplace_back(k, m, c);
  return out;
}

std::string param_name(const ::testing::TestParamInfo<BackwardParam>& info) {
  return std::get<0>(info.param) + "_" + mode_name(std::get<1>(info.param)) + "_" + describe(std::get<2>(info.param)) +
         "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(All, BackwardVsCpu, ::testing::ValuesIn(backward_params(false)), param_name);

// FP8 inputs have no backward: refused with NOT_SUPPORTED by the call, its supports_backward and its
// workspace query, whatever the kernel.
class BackwardFp8 : public ::testing::TestWithParam<BackwardParam> {};

TEST_P(BackwardFp8, IsNotSupported) {
  const auto& [kernel, mode, c] = GetParam();
  const Inputs in = random_inputs(c.s, c.dtype, 1.0, 1, c.fp8);
  DeviceProblem fwd(c.s, c.dtype, Layout::BHSD, in, true, c.fp8.o_dtype);
  const size_t grad_bytes = 2 * static_cast<size_t>(std::max(c.s.q_elems(), c.s.kv_elems())) + 16;
  DeviceBuffer dout(grad_bytes), dq(grad_bytes), dk(grad_bytes), dv(grad_bytes);
  evosdpa_params_t p = fwd.params();
  p.dout = dout.ptr, p.dq = dq.ptr, p.dk = dk.ptr, p.dv = dv.ptr;
  p.backward_mode = mode;
  evosdpa_params_set_bhsd_strides(&p);
  size_t bytes = 0;
  EXPECT_EQ(evosdpa_backward_workspace_size(&p, kernel.c_str(), &bytes), EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(evosdpa_supports_backward(&p, kernel.c_str(), nullptr), EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(evosdpa_attention_backward(&p, kernel.c_str(), nullptr), EVOSDPA_ERROR_NOT_SUPPORTED)
      << evosdpa_last_error_message();
}

INSTANTIATE_TEST_SUITE_P(All, BackwardFp8, ::testing::ValuesIn(backward_params(true)), param_name);

// Runs from poisoned outputs and workspace: the gradients the first run wrote come back bitwise each time.
void expect_repeatable(DeviceBackwardProblem& prob, const std::string& kernel, int runs, std::vector<Grad> grads) {
  ASSERT_TRUE(prob.run(kernel).ok());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::vector<uint16_t>> first;
  for (Grad g : grads) first.push_back(prob.raw(g));
  for (int run = 1; run < runs; ++run) {
    prob.poison();
    ASSERT_TRUE(prob.run(kernel).ok());
    CUDA_OK(cudaDeviceSynchronize());
    for (size_t i = 0; i < grads.size(); ++i)
      ASSERT_EQ(prob.raw(grads[i]), first[i]) << kernel << ": " << grad_name(grads[i]) << ", run " << run << " differs";
  }
}

// A causal MHA shape and a grouped-heads one (dK and dV summed over 4 query heads) with tails.
std::vector<Shape> repeatability_shapes() {
  return {shape(2, 8, 8, 1000, 1000, 128, EVOSDPA_CAUSAL_TOP_LEFT),
          shape(2, 8, 2, 777, 1000, 64, EVOSDPA_CAUSAL_BOTTOM_RIGHT)};
}

TEST(BackwardDeterminism, DeterministicModeIsBitwiseRepeatable) {
  for (const Shape& s : repeatability_shapes()) {
    const BackwardExpected e =
        make_backward_expected(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 97, case_seed(run_seed(), "bwd_determinism"));
    for (const char* kernel : kBackwardKernels) {
      if (!runs_here(kernel)) continue;
      DeviceBackwardProblem prob(s, EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, e.in, EVOSDPA_BACKWARD_DETERMINISTIC, kernel);
      ASSERT_TRUE(prob.workspace_query().ok()) << prob.workspace_query().message;
      ASSERT_NO_FATAL_FAILURE(expect_repeatable(prob, kernel, 100, {Grad::dQ, Grad::dK, Grad::dV}));
    }
  }
}

TEST(BackwardDeterminism, FastModeKeyAndValueGradientsAreBitwiseRepeatable) {
  for (const Shape& s : repeatability_shapes()) {
    const BackwardExpected e =
        make_backward_expected(s, EVOSDPA_DTYPE_BFLOAT16, 1.0, 97, case_seed(run_seed(), "bwd_fast"));
    for (const char* kernel : kBackwardKernels) {
      if (!runs_here(kernel)) continue;
      DeviceBackwardProblem prob(s, EVOSDPA_DTYPE_BFLOAT16, Layout::BHSD, e.in, EVOSDPA_BACKWARD_FAST, kernel);
      ASSERT_TRUE(prob.workspace_query().ok()) << prob.workspace_query().message;
      ASSERT_NO_FATAL_FAILURE(expect_repeatable(prob, kernel, 10, {Grad::dK, Grad::dV}));
    }
  }
}

// Empty sequences and keys or queries that nothing pairs with: the gradients there are exact zeros
// written over the poison (check_backward's rule), the rest within the tolerance.
class BackwardEdges : public ::testing::TestWithParam<std::tuple<std::string, evosdpa_backward_mode_t>> {};

TEST_P(BackwardEdges, UnpairedRowsAndKeysGetExactZeros) {
  const auto& [kernel, mode] = GetParam();
  const auto BR = EVOSDPA_CAUSAL_BOTTOM_RIGHT, TL = EVOSDPA_CAUSAL_TOP_LEFT;
  for (const auto& [name, s] :
       {std::pair{"no queries: dK = dV = 0", shape(2, 4, 2, 0, 100, 64, EVOSDPA_CAUSAL_NONE)},
        std::pair{"no keys: dQ = 0", shape(2, 4, 4, 50, 0, 128, TL)},
        std::pair{"Lq > Lk bottom-right: rows 0-199 see no key", shape(1, 4, 2, 300, 100, 64, BR)},
        std::pair{"Lq < Lk top-left: keys 100-299 seen by none", shape(1, 2, 2, 100, 300, 128, TL)}}) {
    SCOPED_TRACE(name);
    const KCase c{"edge", s, EVOSDPA_DTYPE_FLOAT16};
    const BackwardExpected e = make_backward_expected(s, c.dtype, 1.0, 1, case_seed(run_seed(), "bwd_" + describe(c)));
    ASSERT_NO_FATAL_FAILURE(expect_correct(c, e, kernel, mode));
  }
}

std::vector<std::tuple<std::string, evosdpa_backward_mode_t>> kernels_and_modes() {
  std::vector<std::tuple<std::string, evosdpa_backward_mode_t>> out;
  for (const char* k : kBackwardKernels)
    for (auto m : kModes) out.emplace_back(k, m);
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, BackwardEdges, ::testing::ValuesIn(kernels_and_modes()), [](const auto& info) {
  return std::get<0>(info.param) + "_" + mode_name(std::get<1>(info.param));
});

// The status of a backward call through the C ABI, after checking that evosdpa_supports_backward gives
// the same for the same arguments.
evosdpa_status_t call(const evosdpa_params_t& p, const char* kernel) {
  const evosdpa_status_t supported = evosdpa_supports_backward(&p, kernel, nullptr);
  const std::string why = evosdpa_last_error_message();
  const evosdpa_status_t ran = evosdpa_attention_backward(&p, kernel, nullptr);
  EXPECT_EQ(supported, ran) << "supports_backward: " << why << "; attention_backward: " << evosdpa_last_error_message();
  return ran;
}

class BackwardErrors : public ::testing::TestWithParam<std::tuple<std::string, evosdpa_backward_mode_t>> {};

TEST_P(BackwardErrors, AreRefusedAndWriteNothing) {
  const auto& [kernel_name, mode] = GetParam();
  const char* kernel = kernel_name.c_str();
  if (!runs_here(kernel_name)) GTEST_SKIP() << kernel << " needs a Hopper GPU";
  const Shape s = shape(2, 4, 2, 300, 200, 64, EVOSDPA_CAUSAL_BOTTOM_RIGHT);
  const BackwardExpected e = make_backward_expected(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 50, 5);
  DeviceBackwardProblem prob(s, EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, e.in, mode, kernel);
  ASSERT_TRUE(prob.workspace_query().ok()) << prob.workspace_query().message;
  const evosdpa_params_t good = prob.params();
  const char* selected = nullptr;
  ASSERT_EQ(evosdpa_supports_backward(&good, kernel, &selected), EVOSDPA_SUCCESS) << evosdpa_last_error_message();
  EXPECT_STREQ(selected, kernel);
  ASSERT_EQ(call(good, kernel), EVOSDPA_SUCCESS) << evosdpa_last_error_message();
  CUDA_OK(cudaDeviceSynchronize());
  prob.poison();

  auto expect_refused = [&](evosdpa_params_t p, const char* k, evosdpa_status_t want, const char* what) {
    EXPECT_EQ(call(p, k), want) << what << ": " << evosdpa_last_error_message();
  };
  evosdpa_params_t p = good;
  p.lse = nullptr;
  expect_refused(p, kernel, EVOSDPA_ERROR_INVALID_ARGUMENT, "null lse");
  p = good;
  p.dout = nullptr;
  expect_refused(p, kernel, EVOSDPA_ERROR_INVALID_ARGUMENT, "null dout");
  // FAST sums dQ in a float32 workspace (evosdpa.h), so it needs one.
  if (mode == EVOSDPA_BACKWARD_FAST) {
    EXPECT_GT(prob.workspace_bytes(), 0u);
  }
  DeviceBuffer roomy(prob.workspace_bytes() + 16);
  if (prob.workspace_bytes() > 0) {
    p = good;
    p.workspace_size = good.workspace_size - 1;
    expect_refused(p, kernel, EVOSDPA_ERROR_INVALID_ARGUMENT, "workspace one byte short");
    p = good;
    p.workspace = static_cast<char*>(roomy.ptr) + 8;  // room enough, but 8-byte aligned only
    expect_refused(p, kernel, EVOSDPA_ERROR_INVALID_ARGUMENT, "misaligned workspace");
  }
  p = good;
  p.dq = const_cast<void*>(good.q);
  expect_refused(p, kernel, EVOSDPA_ERROR_INVALID_ARGUMENT, "dq aliasing q");
  p = good;
  p.dk = good.dv;
  expect_refused(p, kernel, EVOSDPA_ERROR_INVALID_ARGUMENT, "dk aliasing dv");
  expect_refused(good, "no_such_kernel", EVOSDPA_ERROR_INVALID_ARGUMENT, "unknown kernel");
  expect_refused(good, "splitkv_sm80", EVOSDPA_ERROR_NOT_SUPPORTED, "a kernel with no backward");
  CUDA_OK(cudaDeviceSynchronize());
  for (Grad g : kGrads)
    for (uint16_t bits : prob.raw(g)) ASSERT_EQ(bits, 0xffff) << grad_name(g) << " written by a refused call";
}

INSTANTIATE_TEST_SUITE_P(All, BackwardErrors, ::testing::ValuesIn(kernels_and_modes()), [](const auto& info) {
  return std::get<0>(info.param) + "_" + mode_name(std::get<1>(info.param));
});

}  // namespace
