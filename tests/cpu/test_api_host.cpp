// The C ABI and C++ API paths that need no GPU: argument errors, messages, names, empty problems, and
// the no-device error on a machine without one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "cpu/params_fixture.hpp"
#include "dispatch.hpp"
#include "evosdpa/evosdpa.hpp"

namespace {

bool have_gpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

TEST(CApi, NullParams) {
  EXPECT_EQ(evosdpa_attention_forward(nullptr, nullptr, nullptr), EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(evosdpa_last_error_message()).find("params"), std::string::npos);
  EXPECT_EQ(evosdpa_supports(nullptr, "auto", nullptr), EVOSDPA_ERROR_INVALID_ARGUMENT);
}

TEST(CApi, ArgumentErrorsComeBeforeDeviceChecks) {
  auto p = valid_params();
  p.head_dim = 80;
  evosdpa_params_set_bhsd_strides(&p);
  EXPECT_EQ(evosdpa_attention_forward(&p, nullptr, nullptr), EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(std::string(evosdpa_last_error_message()).find("head_dim 80"), std::string::npos);
  p = valid_params();
  EXPECT_EQ(evosdpa_attention_forward(&p, "fastest", nullptr), EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(evosdpa_last_error_message()).find("unknown kernel \"fastest\""), std::string::npos);
}

TEST(CApi, EmptyProblemReturnsAtOnce) {
  for (auto [b, h, lq] : {std::tuple{0, 8, 16}, std::tuple{2, 0, 16}, std::tuple{2, 8, 0}}) {
    auto p = valid_params(b, h, lq, 16);
    p.heads_kv = h;
    p.q = p.o = nullptr;
    EXPECT_EQ(evosdpa_attention_forward(&p, nullptr, nullptr), EVOSDPA_SUCCESS) << evosdpa_last_error_message();
    EXPECT_STREQ(evosdpa_last_error_message(), "");
    const char* selected = "unset";
    EXPECT_EQ(evosdpa_supports(&p, nullptr, &selected), EVOSDPA_SUCCESS);
    EXPECT_EQ(selected, nullptr);
  }
}

TEST(CApi, NoDeviceIsAClearError) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present; this checks the no-GPU path";
  auto p = valid_params();
  EXPECT_EQ(evosdpa_attention_forward(&p, nullptr, nullptr), EVOSDPA_ERROR_NO_DEVICE);
  EXPECT_NE(std::string(evosdpa_last_error_message()).find("no usable CUDA device"), std::string::npos)
      << evosdpa_last_error_message();
  const evosdpa::Result r = evosdpa::supports(p);
  EXPECT_EQ(r.status, EVOSDPA_ERROR_NO_DEVICE);
  EXPECT_FALSE(r.message.empty());
  EXPECT_TRUE(r.kernel.empty());
}

TEST(CApi, StatusStringsAndKernelNames) {
  EXPECT_STREQ(evosdpa_status_string(EVOSDPA_SUCCESS), "EVOSDPA_SUCCESS");
  EXPECT_STREQ(evosdpa_status_string(EVOSDPA_ERROR_NO_DEVICE), "EVOSDPA_ERROR_NO_DEVICE");
  EXPECT_STREQ(evosdpa_status_string(static_cast<evosdpa_status_t>(99)), "EVOSDPA_UNKNOWN_STATUS");
  ASSERT_EQ(evosdpa_kernel_count(), 2);
  EXPECT_STREQ(evosdpa_kernel_name(0), "mma_sm80");
  EXPECT_STREQ(evosdpa_kernel_name(1), "reference");
  EXPECT_EQ(evosdpa_kernel_name(2), nullptr);
  EXPECT_EQ(evosdpa_kernel_name(-1), nullptr);
  EXPECT_EQ(evosdpa::kernel_names(), (std::vector<std::string>{"mma_sm80", "reference"}));
}

TEST(CApi, ParamsInitAndStrideHelpers) {
  evosdpa_params_t p;
  std::memset(&p, 0xff, sizeof p);
  evosdpa_params_init(&p);
  EXPECT_EQ(p.q, nullptr);
  EXPECT_EQ(p.lse, nullptr);
  EXPECT_EQ(p.dtype, EVOSDPA_DTYPE_FLOAT16);
  EXPECT_EQ(p.causal, EVOSDPA_CAUSAL_NONE);
  EXPECT_EQ(p.softmax_scale, 0.f);
  p.batch = 2, p.heads_q = 8, p.heads_kv = 4, p.seqlen_q = 10, p.seqlen_k = 20, p.head_dim = 64;
  evosdpa_params_set_bhsd_strides(&p);
  EXPECT_EQ(p.q_seq_stride, 64);
  EXPECT_EQ(p.q_head_stride, 640);
  EXPECT_EQ(p.q_batch_stride, 5120);
  EXPECT_EQ(p.k_head_stride, 1280);
  EXPECT_EQ(p.k_batch_stride, 5120);
  evosdpa_params_set_bshd_strides(&p);
  EXPECT_EQ(p.q_head_stride, 64);
  EXPECT_EQ(p.q_seq_stride, 512);
  EXPECT_EQ(p.q_batch_stride, 5120);
  EXPECT_EQ(p.v_seq_stride, 256);
  EXPECT_EQ(p.v_batch_stride, 5120);
  const auto cpp = evosdpa::make_params(nullptr, nullptr, nullptr, nullptr, EVOSDPA_DTYPE_BFLOAT16, 2, 8, 10, 20,
                                        128, EVOSDPA_CAUSAL_BOTTOM_RIGHT, evosdpa::Layout::BSHD);
  EXPECT_EQ(cpp.heads_kv, 8);
  EXPECT_EQ(cpp.o_seq_stride, 8 * 128);
  EXPECT_EQ(cpp.causal, EVOSDPA_CAUSAL_BOTTOM_RIGHT);
}

TEST(CApi, DefaultScaleIsInverseSqrtHeadDim) {
  auto p = valid_params(1, 1, 4, 4, 128);
  EXPECT_FLOAT_EQ(evosdpa::detail::effective_scale(p), 1.f / std::sqrt(128.f));
  p.softmax_scale = 0.3f;
  EXPECT_FLOAT_EQ(evosdpa::detail::make_kernel_params(p).scale, 0.3f);
  p.causal = EVOSDPA_CAUSAL_BOTTOM_RIGHT;
  p.seqlen_k = 9;
  EXPECT_EQ(evosdpa::detail::make_kernel_params(p).causal_offset, 5);
}

}  // namespace
