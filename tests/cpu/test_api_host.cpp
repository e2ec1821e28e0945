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
  ASSERT_EQ(evosdpa_kernel_count(), 5);
  EXPECT_STREQ(evosdpa_kernel_name(0), "splitkv_sm80");
  EXPECT_STREQ(evosdpa_kernel_name(1), "wgmma_sm90");
  EXPECT_STREQ(evosdpa_kernel_name(2), "mma_sm80");
  EXPECT_STREQ(evosdpa_kernel_name(3), "mma_fp8_sm89");
  EXPECT_STREQ(evosdpa_kernel_name(4), "reference");
  EXPECT_EQ(evosdpa_kernel_name(5), nullptr);
  EXPECT_EQ(evosdpa_kernel_name(-1), nullptr);
  EXPECT_EQ(evosdpa::kernel_names(),
            (std::vector<std::string>{"splitkv_sm80", "wgmma_sm90", "mma_sm80", "mma_fp8_sm89", "reference"}));
}

TEST(CApi, ParamsInitAndStrideHelpers) {
  evosdpa_params_t p;
  std::memset(&p, 0xff, sizeof p);
  evosdpa_params_init(&p);
  EXPECT_EQ(p.q, nullptr);
  EXPECT_EQ(p.lse, nullptr);
  EXPECT_EQ(p.dtype, EVOSDPA_DTYPE_FLOAT16);
  EXPECT_EQ(p.causal, EVOSDPA_CAUSAL_NONE);
  EXPECT_EQ(p.struct_size, sizeof(evosdpa_params_t));
  EXPECT_TRUE(std::isnan(p.softmax_scale));  // NaN: 1/sqrt(head_dim); 0 is a real scale
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
  p.softmax_scale = 0.f;  // a valid scale: uniform weights
  EXPECT_EQ(evosdpa::detail::make_kernel_params(p).scale, 0.f);
  p.softmax_scale = 0.3f;
  EXPECT_FLOAT_EQ(evosdpa::detail::make_kernel_params(p).scale, 0.3f);
  p.causal = EVOSDPA_CAUSAL_BOTTOM_RIGHT;
  p.seqlen_k = 9;
  EXPECT_EQ(evosdpa::detail::make_kernel_params(p).causal_offset, 5);
}

// The ABI rule of evosdpa.h: struct_size says which fields a caller knows.
TEST(CApiAbi, InitSizedRefusesTooSmallAndZeroesTheWholeCallerStruct) {
  EXPECT_EQ(evosdpa_params_init_sized(nullptr, sizeof(evosdpa_params_t)), EVOSDPA_ERROR_INVALID_ARGUMENT);
  evosdpa_params_t p;
  std::memset(&p, 0xab, sizeof p);
  EXPECT_EQ(evosdpa_params_init_sized(&p, evosdpa::detail::kParamsMinSize - 1), EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(p.q, reinterpret_cast<const void*>(~uintptr_t{0} / 0xff * 0xab)) << "nothing written on failure";
  // A newer caller's larger struct: every byte it has is initialised, appended fields to zero.
  unsigned char bigger[sizeof(evosdpa_params_t) + 32];
  std::memset(bigger, 0xab, sizeof bigger);
  auto* pb = reinterpret_cast<evosdpa_params_t*>(bigger);
  ASSERT_EQ(evosdpa_params_init_sized(pb, sizeof bigger), EVOSDPA_SUCCESS);
  EXPECT_EQ(pb->struct_size, sizeof bigger);
  for (size_t i = sizeof(evosdpa_params_t); i < sizeof bigger; ++i) ASSERT_EQ(bigger[i], 0) << i;
}

TEST(CApiAbi, NormalizeAcceptsOlderAndZeroTailedNewerStructs) {
  using evosdpa::detail::normalize_params;
  evosdpa_params_t out;
  EXPECT_EQ(normalize_params(nullptr, out).status, EVOSDPA_ERROR_INVALID_ARGUMENT);
  // Not initialised (struct_size 0, e.g. `evosdpa_params_t p = {0}`): refused with the remedy.
  evosdpa_params_t zero{};
  auto c = normalize_params(&zero, out);
  EXPECT_EQ(c.status, EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(c.message.find("evosdpa_params_init"), std::string::npos) << c.message;
  // A newer caller that uses no new feature (zero tail): accepted, fields read as given.
  unsigned char bigger[sizeof(evosdpa_params_t) + 16] = {};
  auto p = valid_params();
  std::memcpy(bigger, &p, sizeof p);
  reinterpret_cast<evosdpa_params_t*>(bigger)->struct_size = sizeof bigger;
  c = normalize_params(reinterpret_cast<evosdpa_params_t*>(bigger), out);
  EXPECT_TRUE(c.ok()) << c.message;
  EXPECT_EQ(out.seqlen_q, p.seqlen_q);
  EXPECT_EQ(out.struct_size, sizeof(evosdpa_params_t));
  // ... and one that sets a field this library does not know: refused, naming both sizes.
  bigger[sizeof(evosdpa_params_t) + 3] = 1;
  c = normalize_params(reinterpret_cast<evosdpa_params_t*>(bigger), out);
  EXPECT_EQ(c.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(c.message.find(std::to_string(sizeof bigger) + " bytes"), std::string::npos) << c.message;
  // The smallest accepted struct (0.2's, which ended at `causal`): the FP8 fields past it take their
  // defaults even when the caller's memory beyond it holds garbage.
  unsigned char older[sizeof(evosdpa_params_t)];
  std::memset(older, 0xab, sizeof older);
  p.struct_size = evosdpa::detail::kParamsMinSize;
  std::memcpy(older, &p, evosdpa::detail::kParamsMinSize);
  c = normalize_params(reinterpret_cast<evosdpa_params_t*>(older), out);
  EXPECT_TRUE(c.ok()) << c.message;
  EXPECT_EQ(out.causal, p.causal);
  EXPECT_EQ(out.o_dtype, EVOSDPA_DTYPE_FLOAT16);
  EXPECT_EQ(out.q_descale, nullptr);
  EXPECT_EQ(out.v_descale, nullptr);
  EXPECT_EQ(out.descale_head_stride, 0);
  EXPECT_TRUE(evosdpa::detail::validate_params(out).ok());
}

// A struct_size no header makes: refused before the struct's other bytes are read (an uninitialised
// struct's garbage size read 0x7ffc... bytes; 220, half of q_descale, copied half a pointer).
TEST(CApiAbi, StructSizesNoHeaderMakesAreRefused) {
  using evosdpa::detail::normalize_params;
  auto p = valid_params();
  evosdpa_params_t out;
  for (size_t size : {size_t{220}, sizeof(evosdpa_params_t) + 4, evosdpa::detail::kParamsMaxSize + 8,
                      size_t{0x7ffc12345678}}) {
    p.struct_size = size;
    const auto c = normalize_params(&p, out);
    EXPECT_EQ(c.status, EVOSDPA_ERROR_INVALID_ARGUMENT) << size;
    EXPECT_NE(c.message.find("struct_size"), std::string::npos) << c.message;
    EXPECT_NE(c.message.find("evosdpa_params_init"), std::string::npos) << c.message;
    evosdpa_params_t q;
    EXPECT_EQ(evosdpa_params_init_sized(&q, size), EVOSDPA_ERROR_INVALID_ARGUMENT) << size;
  }
  // Every size a header has made or may make passes (a multiple of 8 between the two bounds).
  for (size_t size : {evosdpa::detail::kParamsMinSize, sizeof(evosdpa_params_t)}) {
    p.struct_size = size;
    EXPECT_TRUE(normalize_params(&p, out).ok()) << size;
  }
}

TEST(CApiAbi, ForwardAndSupportsCheckTheStructSizeFirst) {
  evosdpa_params_t zero{};
  EXPECT_EQ(evosdpa_attention_forward(&zero, "auto", nullptr), EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(evosdpa_last_error_message()).find("struct_size"), std::string::npos);
  EXPECT_EQ(evosdpa_supports(&zero, nullptr, nullptr), EVOSDPA_ERROR_INVALID_ARGUMENT);
}

TEST(CApiAbi, DtypeSizesAndVersion) {
  EXPECT_EQ(evosdpa_dtype_size(EVOSDPA_DTYPE_FLOAT16), 2u);
  EXPECT_EQ(evosdpa_dtype_size(EVOSDPA_DTYPE_BFLOAT16), 2u);
  EXPECT_EQ(evosdpa_dtype_size(EVOSDPA_DTYPE_FLOAT8_E4M3), 1u);
  EXPECT_EQ(evosdpa_dtype_size(static_cast<evosdpa_dtype_t>(9)), 0u);
  EXPECT_EQ(std::string(evosdpa_version()), std::to_string(EVOSDPA_VERSION_MAJOR) + "." +
                                                std::to_string(EVOSDPA_VERSION_MINOR) + "." +
                                                std::to_string(EVOSDPA_VERSION_PATCH));
}

}  // namespace
