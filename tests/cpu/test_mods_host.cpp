// Sliding window and softcap (evosdpa.h, "Sliding window and softcap") on the host: the fields' rules,
// which kernels run them (on made-up devices), and the Hopper family's row choice for them.
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
