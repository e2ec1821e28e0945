// Every kernel against the float64 CPU reference on fresh random inputs, outputs poisoned before the
// run: the acceptance shapes, odd lengths, Lq != Lk with each causal alignment, both dtypes and head
// dims, strided layouts, grouped heads, large magnitudes, explicit scales, Lk = 0, and determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include "common/cases.hpp"
#include "gpu/gpu_harness.hpp"
#include "host/accuracy_check.hpp"

using namespace evosdpa::host;
using namespace gpu_test;
using namespace test_cases;

namespace {

class KernelVsCpu : public ::testing::TestWithParam<std::tuple<std::string, KCase>> {};

TEST_P(KernelVsCpu, MatchesFloat64Reference) {
  const auto& [kernel, c] = GetParam();
  const Expected& e = expected_for(c);
  DeviceProblem prob(c.s, c.dtype, c.layout, e.in, c.lse, e.o_dtype);
  const auto params = prob.params();
  const evosdpa::Result r = evosdpa::attention_forward(params, nullptr, kernel);
  ASSERT_TRUE(r.ok()) << r.message;
  CUDA_OK(cudaDeviceSynchronize());

  const std::vector<float> out = prob.output();
  const std::vector<float> lse = c.lse ? prob.lse() : std::vector<float>{};
  const Verdict v = check_attention(c.s, c.dtype, e, out, c.lse ? &lse : nullptr);
  // In --gtest_output=xml reports: how close each kernel comes to the allowed error.
  RecordProperty("error", std::to_string(v.error));
  RecordProperty("tolerance", std::to_string(v.tolerance));
  EXPECT_TRUE(v.pass) << v.message << " (EVOSDPA_TEST_SEED=" << run_seed() << ")";
  if (c.layout == Layout::Padded) {
    // Elements outside the tensor keep their poison: nothing was written past a row or a head.
    const auto raw = prob.raw_output();
    const Strides st = strides_for(c.layout, c.s.heads_q, c.s.seqlen_q, c.s.head_dim);
    std::vector<char> inside(raw.size(), 0);
    for (int64_t b = 0; b < c.s.batch; ++b)
      for (int64_t h = 0; h < c.s.heads_q; ++h)
        for (int64_t l = 0; l < c.s.seqlen_q; ++l)
          std::memset(&inside[b * st.batch + h * st.head + l * st.seq], 1, c.s.head_dim);
    for (size_t i = 0; i < raw.size(); ++i)
      if (!inside[i]) ASSERT_EQ(raw[i], 0xffff) << "padding element " << i << " was written";
  }
}

std::vector<std::tuple<std::string, KCase>> params_for_all_kernels() {
  std::vector<std::tuple<std::string, KCase>> out;
  for (const auto& c : all_cases())
    for (const char* k : {"splitkv_sm80", "mma_sm80", "wgmma_sm90", "mma_fp8_sm89", "reference"}) {
      // Each family on the inputs it takes: FP8 ones on mma_fp8_sm89, the reference and wgmma_sm90
      // (mma_sm80 refuses them by name, which tests/cpu/test_selection.cpp checks).
      const std::string name = k;
      const bool fp8 = c.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3, fp8_family = name == "mma_fp8_sm89";
      const bool takes_fp8 = name == "reference" || fp8_family || name == "wgmma_sm90";
      // splitkv_sm80 is made for decoding: the suite's long rows are many 16-row blocks each reading every
      // key, so it takes the shapes of up to 1024 queries.
      if (name == "splitkv_sm80" && c.s.seqlen_q > 1024) continue;
      if (fp8 ? takes_fp8 : !fp8_family) out.emplace_back(k, c);
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, KernelVsCpu, ::testing::ValuesIn(params_for_all_kernels()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + describe(std::get<1>(info.param)) + "_" +
                                  std::to_string(info.index);
                         });

// Sliding windows, softcaps, mask tensors and ALiBi on the kernels that have them, and on "auto". Not
// wgmma_sm90 with a bias (mask tensor, ALiBi) and a zero scale, which it refuses by design (it preloads
// the bias over the scale; Selection.MaskTensorsRunOnlyOnTheKernelsWithThem).
std::vector<std::tuple<std::string, KCase>> params_for_mask_kernels() {
  std::vector<std::tuple<std::string, KCase>> out;
  for (const auto& c : mask_cases())
    for (const std::string k : {"wgmma_sm90", "mma_sm80", "reference", "auto"}) {
      const bool bias = c.s.mask_type != EVOSDPA_MASK_NONE || c.s.alibi;
      if (k == "wgmma_sm90" && bias && c.s.scale == 0.0) continue;
      out.emplace_back(k, c);
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Masks, KernelVsCpu, ::testing::ValuesIn(params_for_mask_kernels()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + describe(std::get<1>(info.param)) + "_" +
                                  std::to_string(info.index);
                         });

// The first of mask_cases() with a mask tensor, and with ALiBi.
KCase first_mask_tensor_case() {
  for (const KCase& c : mask_cases())
    if (c.s.mask_type != EVOSDPA_MASK_NONE) return c;
  throw std::logic_error("mask_cases() has no mask tensor");
}
KCase first_alibi_case() {
  for (const KCase& c : mask_cases())
    if (c.s.alibi) return c;
  throw std::logic_error("mask_cases() has no ALiBi");
}

// The kernels without them refuse a window, a softcap, a mask tensor or ALiBi by name (never a result
// that ignores them), as does the backward pass; "auto" picks the Hopper kernel on Hopper, elsewhere
// mma_sm80.
TEST(Masks, KernelsWithoutThemRefuse) {
  // a window; a softcap; a mask; ALiBi
  for (const KCase& c : {mask_cases()[0], mask_cases()[8], first_mask_tensor_case(), first_alibi_case()}) {
    const Expected& e = expected_for(c);
    DeviceProblem prob(c.s, c.dtype, c.layout, e.in, c.lse, e.o_dtype);
    const auto params = prob.params();
    for (const char* k : {"splitkv_sm80", "mma_fp8_sm89"}) {
      const evosdpa::Result r = evosdpa::attention_forward(params, nullptr, k);
      EXPECT_EQ(r.status, EVOSDPA_ERROR_NOT_SUPPORTED) << k << " on " << describe(c) << ": " << r.message;
    }
    const char* selected = nullptr;
    ASSERT_EQ(evosdpa_supports(&params, nullptr, &selected), EVOSDPA_SUCCESS) << evosdpa_last_error_message();
    int device = 0, major = 0;
    CUDA_OK(cudaGetDevice(&device));
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    EXPECT_STREQ(selected, major == 9 ? "wgmma_sm90" : "mma_sm80") << describe(c);
    EXPECT_EQ(evosdpa_supports_backward(&params, nullptr, nullptr), EVOSDPA_ERROR_NOT_SUPPORTED)
        << evosdpa_last_error_message();
  }
}

// What wgmma_sm90 does not take, "auto" gives to the reference kernel (a mask tensor whose pointer is not
// aligned to an element pair, ALiBi with a mask, window and softcap); a mask tensor with a window and a
// softcap (Gemma 2's local layers on a padded batch) runs on wgmma_sm90 on Hopper, mma_sm80 elsewhere.
TEST(Masks, WhatWgmmaRefusesGoesToMmaOrTheReference) {
  int device = 0, major = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  {
    const KCase c = first_mask_tensor_case();
    const Expected& e = expected_for(c);
    DeviceProblem prob(c.s, c.dtype, c.layout, e.in, c.lse, e.o_dtype);
    auto params = prob.params();
    params.mask = static_cast<const uint8_t*>(params.mask) + (c.s.mask_type == EVOSDPA_MASK_BOOL ? 1 : 2);
    const evosdpa::Result r = evosdpa::attention_forward(params, nullptr, "wgmma_sm90");
    EXPECT_EQ(r.status, EVOSDPA_ERROR_NOT_SUPPORTED) << r.message;
    EXPECT_NE(r.message.find("mask"), std::string::npos) << r.message;
    const char* selected = nullptr;
    ASSERT_EQ(evosdpa_supports(&params, nullptr, &selected), EVOSDPA_SUCCESS) << evosdpa_last_error_message();
    EXPECT_STREQ(selected, "reference");
  }
  const auto together = [](bool alibi) {
    const Shape s = with_mods(with_mask(shape(2, 4, 2, 300, 333, 128, EVOSDPA_CAUSAL_BOTTOM_RIGHT),
                                        alibi ? EVOSDPA_MASK_BOOL : EVOSDPA_MASK_ADDITIVE, true, false),
                              100, -1, 30);
    return KCase{alibi ? "alibimods" : "maskmods", alibi ? with_alibi(s, true) : s, EVOSDPA_DTYPE_BFLOAT16,
                 Layout::BHSD, 4.0};
  };
  for (const KCase& c : {together(false), together(true)}) {
    const Expected& e = expected_for(c);
    DeviceProblem prob(c.s, c.dtype, c.layout, e.in, c.lse, e.o_dtype);
    const auto params = prob.params();
    if (c.s.alibi || major != 9)
      EXPECT_EQ(evosdpa::attention_forward(params, nullptr, "wgmma_sm90").status, EVOSDPA_ERROR_NOT_SUPPORTED);
    const char* selected = nullptr;
    ASSERT_EQ(evosdpa_supports(&params, nullptr, &selected), EVOSDPA_SUCCESS) << evosdpa_last_error_message();
    EXPECT_STREQ(selected, c.s.alibi ? "reference" : major == 9 ? "wgmma_sm90" : "mma_sm80");
    ASSERT_TRUE(evosdpa::attention_forward(params, nullptr, "auto").ok());
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<float> out = prob.output(), lse = prob.lse();
    const Verdict v = check_attention(c.s, c.dtype, e, out, &lse);
    EXPECT_TRUE(v.pass) << describe(c) << ": " << v.message << " (EVOSDPA_TEST_SEED=" << run_seed() << ")";
  }
  // Softcaps the fast kernels' tanh cannot compute (above kMaxFastSoftcap, or so small that 2 scale log2(e) /
  // c overflows): they refuse them and "auto" runs the reference kernel (before, O was off by 0.42 at 1e7 and
  // NaN at 3e38 and, with a zero score, at 1e-40).
  for (const double cap : {1e7, 3e38, 1e-40}) {
    const KCase c{"softcap", with_mods(shape(1, 2, 2, 200, 300, 64, EVOSDPA_CAUSAL_NONE), -1, -1, cap),
                  EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, 2.0};
    const Expected& e = expected_for(c);
    DeviceProblem prob(c.s, c.dtype, c.layout, e.in, c.lse, e.o_dtype);
    const auto params = prob.params();
    for (const char* k : {"wgmma_sm90", "mma_sm80"}) {
      const evosdpa::Result r = evosdpa::attention_forward(params, nullptr, k);
      EXPECT_EQ(r.status, EVOSDPA_ERROR_NOT_SUPPORTED) << k << " softcap " << cap << ": " << r.message;
    }
    const char* selected = nullptr;
    ASSERT_EQ(evosdpa_supports(&params, nullptr, &selected), EVOSDPA_SUCCESS) << evosdpa_last_error_message();
    EXPECT_STREQ(selected, "reference") << cap;
    ASSERT_TRUE(evosdpa::attention_forward(params, nullptr, "auto").ok());
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<float> out = prob.output(), lse = prob.lse();
    const Verdict v = check_attention(c.s, c.dtype, e, out, &lse);
    EXPECT_TRUE(v.pass) << "softcap " << cap << ": " << v.message << " (EVOSDPA_TEST_SEED=" << run_seed() << ")";
  }
}

// One run, then 99 more from poisoned outputs: O and lse bitwise equal each time.
void expect_bitwise_repeatable(DeviceProblem& prob, const char* kernel) {
  const auto params = prob.params();
  ASSERT_TRUE(evosdpa::attention_forward(params, nullptr, kernel).ok());
  CUDA_OK(cudaDeviceSynchronize());
  const auto first = prob.raw_output();
  const auto first_lse = prob.lse();
  for (int run = 1; run < 100; ++run) {
    prob.poison();
    ASSERT_TRUE(evosdpa::attention_forward(params, nullptr, kernel).ok());
    CUDA_OK(cudaDeviceSynchronize());
    ASSERT_EQ(prob.raw_output(), first) << kernel << ": run " << run << " differs";
    ASSERT_EQ(std::memcmp(prob.lse().data(), first_lse.data(), first_lse.size() * 4), 0) << kernel << ": lse, run " << run;
  }
}

TEST(Determinism, HundredRunsAreBitwiseEqual) {
  // The second shape: wgmma_sm90 splits its items' keys over clusters of 2 and merges them.
  for (const auto& [kernel, s] : {std::pair{"mma_sm80", shape(2, 8, 8, 1000, 1000, 128, EVOSDPA_CAUSAL_TOP_LEFT)},
                                  std::pair{"wgmma_sm90", shape(2, 8, 8, 1000, 1000, 128, EVOSDPA_CAUSAL_TOP_LEFT)},
                                  std::pair{"wgmma_sm90", shape(1, 8, 8, 1024, 1024, 64, EVOSDPA_CAUSAL_NONE)},
                                  std::pair{"reference", shape(2, 8, 8, 1000, 1000, 128, EVOSDPA_CAUSAL_TOP_LEFT)}}) {
    const Inputs in = random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, case_seed(run_seed(), "determinism"));
    DeviceProblem prob(s, EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, in, true);
    ASSERT_NO_FATAL_FAILURE(expect_bitwise_repeatable(prob, kernel));
  }
  // A window and a softcap together.
  {
    const auto s = with_mods(shape(2, 8, 4, 1000, 1000, 128, EVOSDPA_CAUSAL_TOP_LEFT), 200, -1, 50);
    const Inputs in = random_inputs(s, EVOSDPA_DTYPE_BFLOAT16, 4.0, case_seed(run_seed(), "determinism_mods"));
    DeviceProblem prob(s, EVOSDPA_DTYPE_BFLOAT16, Layout::BHSD, in, true);
    ASSERT_NO_FATAL_FAILURE(expect_bitwise_repeatable(prob, "wgmma_sm90"));
    ASSERT_NO_FATAL_FAILURE(expect_bitwise_repeatable(prob, "mma_sm80"));
  }
  // An additive mask tensor shared by the heads.
  {
    const auto s = with_mask(shape(2, 8, 4, 1000, 1000, 128, EVOSDPA_CAUSAL_NONE), EVOSDPA_MASK_ADDITIVE, true, false);
    const Inputs in = random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, case_seed(run_seed(), "determinism_mask"));
    DeviceProblem prob(s, EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, in, true);
    ASSERT_NO_FATAL_FAILURE(expect_bitwise_repeatable(prob, "wgmma_sm90"));
    ASSERT_NO_FATAL_FAILURE(expect_bitwise_repeatable(prob, "mma_sm80"));
  }
  // ALiBi per batch entry, without a causal mask.
  {
    const auto s = with_alibi(shape(2, 8, 4, 1000, 1000, 64, EVOSDPA_CAUSAL_NONE), true);
    const Inputs in = random_inputs(s, EVOSDPA_DTYPE_BFLOAT16, 1.0, case_seed(run_seed(), "determinism_alibi"));
    DeviceProblem prob(s, EVOSDPA_DTYPE_BFLOAT16, Layout::BHSD, in, true);
    ASSERT_NO_FATAL_FAILURE(expect_bitwise_repeatable(prob, "wgmma_sm90"));
    ASSERT_NO_FATAL_FAILURE(expect_bitwise_repeatable(prob, "mma_sm80"));
  }
  // FP8 inputs (per-head descales, bf16 output).
  const auto s = shape(2, 8, 4, 1000, 1000, 128, EVOSDPA_CAUSAL_TOP_LEFT);
  const Inputs in = random_inputs(s, EVOSDPA_DTYPE_FLOAT8_E4M3, 1.0, case_seed(run_seed(), "determinism8"),
                                  {EVOSDPA_DTYPE_BFLOAT16, true});
  DeviceProblem prob(s, EVOSDPA_DTYPE_FLOAT8_E4M3, Layout::BHSD, in, true, EVOSDPA_DTYPE_BFLOAT16);
  ASSERT_NO_FATAL_FAILURE(expect_bitwise_repeatable(prob, "reference"));
  ASSERT_NO_FATAL_FAILURE(expect_bitwise_repeatable(prob, "mma_fp8_sm89"));
  ASSERT_NO_FATAL_FAILURE(expect_bitwise_repeatable(prob, "wgmma_sm90"));
}

}  // namespace
