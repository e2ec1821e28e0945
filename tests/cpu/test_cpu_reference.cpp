// The float64 CPU reference against the softmax formula written out naively (whole score matrix, no
// max subtraction), and the fused baseline against float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "host/cpu_reference.hpp"

using namespace evosdpa::host;

namespace {

// exp(s_ij) / sum_j exp(s_ij) with no tricks; fine for the small scores used here.
std::vector<double> naive(const Shape& s, const Inputs& in) {
  std::vector<double> o(static_cast<size_t>(s.q_elems()), 0.0);
  const int64_t group = s.heads_q / s.heads_kv;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        std::vector<double> w(static_cast<size_t>(s.seqlen_k), 0.0);
        double z = 0.0;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (!s.visible(i, j)) continue;
          double dot = 0.0;
          for (int64_t d = 0; d < s.head_dim; ++d)
            dot += double(in.q[((b * s.heads_q + h) * s.seqlen_q + i) * s.head_dim + d]) *
                   in.k[((b * s.heads_kv + h / group) * s.seqlen_k + j) * s.head_dim + d];
          w[j] = std::exp(dot * s.effective_scale());
          z += w[j];
        }
        for (int64_t j = 0; j < s.seqlen_k; ++j)
          for (int64_t d = 0; d < s.head_dim; ++d)
            if (z > 0)
              o[((b * s.heads_q + h) * s.seqlen_q + i) * s.head_dim + d] +=
                  w[j] / z * in.v[((b * s.heads_kv + h / group) * s.seqlen_k + j) * s.head_dim + d];
      }
  return o;
}

struct Case {
  int64_t b, hq, hkv, lq, lk;
  evosdpa_causal_t causal;
};

class CpuReference : public ::testing::TestWithParam<Case> {};

TEST_P(CpuReference, MatchesNaiveFormula) {
  const Case c = GetParam();
  Shape s;
  s.batch = c.b, s.heads_q = c.hq, s.heads_kv = c.hkv, s.seqlen_q = c.lq, s.seqlen_k = c.lk, s.head_dim = 64;
  s.causal = c.causal;
  const Inputs in = random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 1234 + c.lq * 7 + c.lk);
  const Reference r = attention_f64(s, in);
  const std::vector<double> want = naive(s, in);
  ASSERT_EQ(r.o.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(r.o[i], want[i], 1e-12) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuReference,
                         ::testing::Values(Case{1, 2, 2, 17, 17, EVOSDPA_CAUSAL_NONE},
                                           Case{2, 2, 1, 9, 23, EVOSDPA_CAUSAL_TOP_LEFT},
                                           Case{1, 4, 2, 23, 9, EVOSDPA_CAUSAL_TOP_LEFT},
                                           Case{1, 1, 1, 9, 23, EVOSDPA_CAUSAL_BOTTOM_RIGHT},
                                           Case{1, 1, 1, 23, 9, EVOSDPA_CAUSAL_BOTTOM_RIGHT}));

TEST(CpuReference, EmptyRowsGiveZeroAndMinusInfinity) {
  Shape s;
  s.seqlen_q = 5, s.seqlen_k = 2, s.causal = EVOSDPA_CAUSAL_BOTTOM_RIGHT;  // rows 0..2 see no key
  const Inputs in = random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 7);
  const Reference r = attention_f64(s, in);
  for (int64_t i = 0; i < 5; ++i) {
    const bool empty = i < 3;
    EXPECT_EQ(std::isinf(r.lse[i]) && r.lse[i] < 0, empty) << "row " << i;
    if (empty)
      for (int64_t d = 0; d < s.head_dim; ++d) EXPECT_EQ(r.o[i * s.head_dim + d], 0.0);
  }
}

TEST(CpuReference, LseIsLogOfSumOfExponentials) {
  Shape s;
  s.seqlen_q = 3, s.seqlen_k = 5;
  const Inputs in = random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 8);
  const Reference r = attention_f64(s, in);
  for (int64_t i = 0; i < 3; ++i) {
    double z = 0;
    for (int64_t j = 0; j < 5; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < 64; ++d) dot += double(in.q[i * 64 + d]) * in.k[j * 64 + d];
      z += std::exp(dot / 8.0);
    }
    EXPECT_NEAR(r.lse[i], std::log(z), 1e-12);
  }
}

TEST(CpuReference, StableForLargeScores) {
  Shape s;
  s.seqlen_q = 4, s.seqlen_k = 40;
  const Inputs in = random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 30.0, 9);  // scores in the thousands
  const Reference r = attention_f64(s, in);
  for (double x : r.o) ASSERT_TRUE(std::isfinite(x));
  for (double x : r.lse) ASSERT_TRUE(std::isfinite(x));
}

TEST(FusedBaseline, CloseToFloat64ButNotExact) {
  for (auto dtype : {EVOSDPA_DTYPE_FLOAT16, EVOSDPA_DTYPE_BFLOAT16}) {
    Shape s;
    s.seqlen_q = 33, s.seqlen_k = 70;
    const Inputs in = random_inputs(s, dtype, 1.0, 10);
    const Reference r = attention_f64(s, in);
    const double err = max_abs_error(attention_fused_baseline(s, in, dtype), r.o);
    // About one rounding of |O| <= ~2 in the dtype: P and O are rounded, S is not.
    EXPECT_GT(err, 0.0) << dtype_name(dtype);
    EXPECT_LT(err, dtype == EVOSDPA_DTYPE_FLOAT16 ? 2e-3 : 1.6e-2) << dtype_name(dtype);
  }
}

TEST(FusedBaseline, LargeScoresKeepItsErrorAtOutputRounding) {
  // Scores in the hundreds: rounding S to bf16 (the old baseline) erred by ~1; the fused baseline, with
  // S in fp32, stays within a few roundings of |O|.
  Shape s;
  s.seqlen_q = 64, s.seqlen_k = 300;
  const Inputs in = random_inputs(s, EVOSDPA_DTYPE_BFLOAT16, 6.0, 11);
  const Reference r = attention_f64(s, in);
  double max_o = 0;
  for (double x : r.o) max_o = std::max(max_o, std::abs(x));
  EXPECT_LT(max_abs_error(attention_fused_baseline(s, in, EVOSDPA_DTYPE_BFLOAT16), r.o), 4 * 0x1p-9 * max_o);
}

TEST(ErrorMetrics, NonFiniteNeverPasses) {
  const std::vector<double> want{1.0, 2.0};
  EXPECT_EQ(max_abs_error({1.0f, std::numeric_limits<float>::quiet_NaN()}, want), std::numeric_limits<double>::infinity());
  EXPECT_EQ(max_abs_error({1.0f, std::numeric_limits<float>::infinity()}, want), std::numeric_limits<double>::infinity());
  EXPECT_EQ(max_abs_error({1.0f}, want), std::numeric_limits<double>::infinity());
  EXPECT_NEAR(max_abs_error({1.5f, 2.0f}, want), 0.5, 1e-12);
  const double ninf = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(max_lse_error({0.0f}, {ninf}), std::numeric_limits<double>::infinity());
  EXPECT_EQ(max_lse_error({-std::numeric_limits<float>::infinity()}, {ninf}), 0.0);
  EXPECT_EQ(max_lse_error({std::numeric_limits<float>::quiet_NaN()}, {1.0}), std::numeric_limits<double>::infinity());
}

TEST(Encoding, RoundTripsAndRoundsToNearest) {
  EXPECT_EQ(decode(EVOSDPA_DTYPE_FLOAT16, encode(EVOSDPA_DTYPE_FLOAT16, 1.0f)), 1.0f);
  EXPECT_EQ(decode(EVOSDPA_DTYPE_BFLOAT16, encode(EVOSDPA_DTYPE_BFLOAT16, -3.0f)), -3.0f);
  EXPECT_EQ(round_to(EVOSDPA_DTYPE_FLOAT16, 1.0f + 1.0f / 4096), 1.0f);   // below half an fp16 ulp
  EXPECT_EQ(round_to(EVOSDPA_DTYPE_BFLOAT16, 1.0f + 1.0f / 64), 1.015625f);  // representable in bf16
}

}  // namespace
