// Sliding window, softcap and mask tensors (evosdpa.h, "Sliding window and softcap", "Mask tensors") on
// the host: the fields' rules, what the kernels receive, and the Hopper family's row choice for them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "cpu/params_fixture.hpp"
#include "dispatch.hpp"
#include "kernels/wgmma/wgmma_config.hpp"
#include "validation.hpp"

using namespace evosdpa::detail;

namespace {

evosdpa_params_t with_window(int64_t left, int64_t right, float softcap = 0.f) {
  auto p = valid_params();
  p.sliding_window = 1;
  p.window_left = left;
  p.window_right = right;
  p.softcap = softcap;
  return p;
}

TEST(ScoreMods, ValidFieldsPass) {
  for (auto [l, r] : {std::pair{0, 0}, {-1, 0}, {4095, -1}, {-1, -1}, {1, 1}, {int64_t{1} << 40, 3}})
    EXPECT_TRUE(validate_params(with_window(l, r)).ok()) << l << " " << r;
  auto p = valid_params();
  p.softcap = 50.f;
  EXPECT_TRUE(validate_params(p).ok());
}

TEST(ScoreMods, BadFieldsAreInvalidArguments) {
  const auto invalid = [](const evosdpa_params_t& p, const std::string& word) {
    const Check c = validate_params(p);
    EXPECT_EQ(c.status, EVOSDPA_ERROR_INVALID_ARGUMENT) << c.message;
    EXPECT_NE(c.message.find(word), std::string::npos) << c.message;
  };
  invalid(with_window(-2, 0), "window_left");
  invalid(with_window(0, -7), "window_right");
  auto p = valid_params();
  p.window_left = 5;  // a bound without sliding_window: a forgotten flag, never silently no window
  invalid(p, "without sliding_window");
  p = valid_params();
  p.sliding_window = 2;
  invalid(p, "sliding_window");
  for (float c : {-1.f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    p = valid_params();
    p.softcap = c;
    invalid(p, "softcap");
  }
}

// The kernels scale in the log2 domain: a softmax_scale whose product with log2(e) leaves float's range is
// refused (3e38 gave O = NaN on every kernel, the reference one included); the largest that fits passes.
TEST(ScoreMods, ScalesBeyondFloatInTheLog2DomainAreInvalidArguments) {
  auto p = valid_params();
  for (float s : {3e38f, -3e38f, std::numeric_limits<float>::max()}) {
    p.softmax_scale = s;
    const Check c = validate_params(p);
    EXPECT_EQ(c.status, EVOSDPA_ERROR_INVALID_ARGUMENT) << s;
    EXPECT_NE(c.message.find("softmax_scale"), std::string::npos) << c.message;
  }
  for (float s : {2.35e38f, -2.35e38f, 0.f, 1e-45f}) {
    p.softmax_scale = s;
    EXPECT_TRUE(validate_params(p).ok()) << s;
    EXPECT_TRUE(std::isfinite(make_kernel_params(p).scale_log2)) << s;
  }
}

TEST(ScoreMods, KernelParamsCarryTheWindowAndItsDiagonal) {
  auto p = with_window(100, -1);
  p.seqlen_q = 300;
  p.seqlen_k = 700;
  evosdpa_params_set_bhsd_strides(&p);
  KernelParams k = make_kernel_params(p);
  EXPECT_TRUE(k.sliding_window);
  EXPECT_EQ(k.window_left, 100);
  EXPECT_EQ(k.window_right, kNoWindowBound);  // -1: no bound
  EXPECT_EQ(k.causal, 0);
  EXPECT_EQ(k.causal_offset, 400);  // bottom-right without a causal mask (FlashAttention's)
  EXPECT_TRUE(k.causal_bottom_right);
  p.causal = EVOSDPA_CAUSAL_TOP_LEFT;
  k = make_kernel_params(p);
  EXPECT_EQ(k.causal_offset, 0);
  EXPECT_FALSE(k.causal_bottom_right);
  p = with_window(int64_t{1} << 40, 0);  // beyond any sequence: clamped to "no bound"
  EXPECT_EQ(make_kernel_params(p).window_left, kNoWindowBound);
  p = valid_params();
  k = make_kernel_params(p);
  EXPECT_FALSE(k.sliding_window);
  EXPECT_EQ(k.causal_offset, 0);
  EXPECT_EQ(k.softcap, 0.f);
}

evosdpa_params_t with_mask(evosdpa_mask_type_t type) {
  auto p = valid_params();  // [2, 8, 512, 512]
  p.mask = reinterpret_cast<const void*>(uintptr_t{0x50000000});
  p.mask_type = type;
  p.mask_batch_stride = 512 * 512;  // [B, 1, Lq, Lk]: shared by the heads
  p.mask_head_stride = 0;
  p.mask_seq_stride = 512;
  return p;
}

TEST(MaskTensor, ValidFieldsPassAndReachTheKernels) {
  for (auto type : {EVOSDPA_MASK_BOOL, EVOSDPA_MASK_ADDITIVE}) {
    auto p = with_mask(type);
    EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
    const KernelParams k = make_kernel_params(p);
    EXPECT_EQ(k.mask, p.mask);
    EXPECT_EQ(k.mask_type, type);
    EXPECT_EQ(k.mask_batch_stride, 512 * 512);
    EXPECT_EQ(k.mask_head_stride, 0);
    EXPECT_EQ(k.mask_seq_stride, 512);
    p.mask_seq_stride = 0;  // a key mask broadcast over the queries
    EXPECT_TRUE(validate_params(p).ok());
  }
  auto p = valid_params();
  EXPECT_EQ(make_kernel_params(p).mask, nullptr);
  EXPECT_EQ(make_kernel_params(p).mask_type, EVOSDPA_MASK_NONE);
  p.seqlen_k = 0;  // no element: no pointer needed
  p.mask_type = EVOSDPA_MASK_BOOL;
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
}

TEST(MaskTensor, BadFieldsAreRefusedByName) {
  const auto refused = [](const evosdpa_params_t& p, evosdpa_status_t status, const std::string& word) {
    const Check c = validate_params(p);
    EXPECT_EQ(c.status, status) << c.message;
    EXPECT_NE(c.message.find(word), std::string::npos) << c.message;
  };
  auto p = with_mask(EVOSDPA_MASK_BOOL);
  p.mask_type = EVOSDPA_MASK_NONE;  // a mask without its type: never silently ignored
  refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "mask_type");
  p = with_mask(EVOSDPA_MASK_BOOL);
  p.mask = nullptr;
  refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "mask is a null pointer");
  p = with_mask(static_cast<evosdpa_mask_type_t>(3));
  refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "mask_type 3");
  p = with_mask(EVOSDPA_MASK_ADDITIVE);
  p.mask_head_stride = -1;
  refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "mask head stride");
  p = with_mask(EVOSDPA_MASK_ADDITIVE);
  p.mask = reinterpret_cast<const void*>(uintptr_t{0x50000001});  // fp16 elements at an odd address
  refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "mask is not aligned");
  p = valid_params();
  p.mask_seq_stride = 64;
  refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "without a mask");
  p = with_mask(EVOSDPA_MASK_ADDITIVE);
  p.o = const_cast<void*>(p.mask);  // the output written over the mask
  refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "mask");
  p = with_mask(EVOSDPA_MASK_BOOL);
  p.seqused_k = reinterpret_cast<const int32_t*>(uintptr_t{0x60000000});
  refused(p, EVOSDPA_ERROR_NOT_SUPPORTED, "mask tensor");
  p = with_mask(EVOSDPA_MASK_BOOL);
  p.dtype = EVOSDPA_DTYPE_FLOAT8_E4M3;
  p.q_descale = p.k_descale = p.v_descale = reinterpret_cast<const float*>(uintptr_t{0x70000000});
  refused(p, EVOSDPA_ERROR_NOT_SUPPORTED, "FP8");
}

evosdpa_params_t with_alibi(int64_t batch_stride) {
  auto p = valid_params();  // [2, 8, 512, 512]
  p.alibi_slopes = reinterpret_cast<const float*>(uintptr_t{0x50000000});
  p.alibi_batch_stride = batch_stride;
  return p;
}

TEST(Alibi, ValidFieldsPassAndReachTheKernels) {
  for (int64_t stride : {0, 8, 11}) {  // shared by the batch; [B, Hq]; batch entries further apart
    auto p = with_alibi(stride);
    EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
    KernelParams k = make_kernel_params(p);
    EXPECT_EQ(k.alibi_slopes, p.alibi_slopes);
    EXPECT_EQ(k.alibi_batch_stride, stride);
  }
  // The diagonal as a window's: bottom-right without a causal mask, top-left with a top-left one.
  auto p = with_alibi(0);
  p.seqlen_q = 100;
  evosdpa_params_set_bhsd_strides(&p);
  EXPECT_EQ(make_kernel_params(p).causal_offset, 412);
  EXPECT_TRUE(make_kernel_params(p).causal_bottom_right);
  p.causal = EVOSDPA_CAUSAL_TOP_LEFT;
  EXPECT_EQ(make_kernel_params(p).causal_offset, 0);
  EXPECT_EQ(make_kernel_params(valid_params()).alibi_slopes, nullptr);
}

TEST(Alibi, BadFieldsAreRefusedByName) {
  const auto refused = [](const evosdpa_params_t& p, evosdpa_status_t status, const std::string& word) {
    const Check c = validate_params(p);
    EXPECT_EQ(c.status, status) << c.message;
    EXPECT_NE(c.message.find(word), std::string::npos) << c.message;
  };
  auto p = valid_params();
  p.alibi_batch_stride = 8;  // a stride without slopes: never silently ignored
  refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "alibi_batch_stride");
  refused(with_alibi(-8), EVOSDPA_ERROR_INVALID_ARGUMENT, "alibi_slopes batch stride");
  p = with_alibi(8);
  p.alibi_slopes = reinterpret_cast<const float*>(uintptr_t{0x50000002});
  refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "alibi_slopes is not aligned");
  p = with_alibi(8);
  p.lse = const_cast<float*>(p.alibi_slopes);  // the lse written over the slopes
  refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "alibi_slopes");
  p = with_alibi(0);
  p.dtype = EVOSDPA_DTYPE_FLOAT8_E4M3;
  p.q_descale = p.k_descale = p.v_descale = reinterpret_cast<const float*>(uintptr_t{0x70000000});
  refused(p, EVOSDPA_ERROR_NOT_SUPPORTED, "FP8");
}

TEST(ScoreMods, HopperTakesItsTwoConsumerRowsUnsplit) {
  using namespace evosdpa::detail::wgmma_sm90;
  for (int d : {64, 128})
    for (long long bh : {1LL, 8LL, 128LL})  // small grids would otherwise split keys over clusters
      for (bool causal : {false, true}) {
        const Choice c = choose_config(d, bh, 1024, 8192, causal, 132, false, 90, true);
        ASSERT_GE(c.row, 0);
        EXPECT_TRUE(score_mod_row(c.row)) << d << " " << bh;
        EXPECT_EQ(kConfigs[c.row].consumers, 2);
        EXPECT_EQ(c.splits, 1);
        EXPECT_EQ(kConfigs[c.row].head_dim, d);
      }
}

}  // namespace
