// Every kernel against the float64 CPU reference on fresh random inputs, outputs poisoned before the
// run: the acceptance shapes, odd lengths, Lq != Lk with each causal alignment, both dtypes and head
// dims, strided layouts, grouped heads, large magnitudes, explicit scales, Lk = 0, and determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "gpu/gpu_harness.hpp"

using namespace evosdpa::host;
using namespace gpu_test;

namespace {

struct KCase {
  std::string name;
  Shape s;
  evosdpa_dtype_t dtype = EVOSDPA_DTYPE_FLOAT16;
  Layout layout = Layout::BHSD;
  double qk_sigma = 1.0;
  bool lse = true;
  int64_t row_step = 1;  // check every row_step-th query row against the CPU (all rows must be finite)
};

Shape shape(int64_t b, int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d, evosdpa_causal_t c,
            double scale = 0.0) {
  Shape s;
  s.batch = b, s.heads_q = hq, s.heads_kv = hkv, s.seqlen_q = lq, s.seqlen_k = lk, s.head_dim = d, s.causal = c;
  s.scale = scale;
  return s;
}

const char* causal_name(evosdpa_causal_t c) {
  return c == EVOSDPA_CAUSAL_NONE ? "full" : c == EVOSDPA_CAUSAL_TOP_LEFT ? "topleft" : "bottomright";
}

std::string describe(const KCase& c) {
  std::ostringstream o;
  o << c.name << "_" << dtype_name(c.dtype) << "_b" << c.s.batch << "h" << c.s.heads_q << "x" << c.s.heads_kv
    << "_q" << c.s.seqlen_q << "k" << c.s.seqlen_k << "_d" << c.s.head_dim << "_" << causal_name(c.s.causal) << "_"
    << layout_name(c.layout);
  if (c.qk_sigma != 1.0) o << "_sigma" << static_cast<int>(c.qk_sigma);
  if (c.s.scale != 0.0) o << "_scale" << (c.s.scale < 0 ? "neg" : "") << static_cast<int>(std::abs(c.s.scale) * 100);
  if (!c.lse) o << "_nolse";
  return o.str();
}

std::vector<KCase> all_cases() {
  std::vector<KCase> cases;
  const auto F = EVOSDPA_CAUSAL_NONE, TL = EVOSDPA_CAUSAL_TOP_LEFT, BR = EVOSDPA_CAUSAL_BOTTOM_RIGHT;
  for (auto dt : {EVOSDPA_DTYPE_FLOAT16, EVOSDPA_DTYPE_BFLOAT16}) {
    // The five acceptance shapes (B, H, L, D, causal).
    cases.push_back({"accept", shape(1, 8, 8, 512, 512, 64, F), dt});
    cases.push_back({"accept", shape(1, 8, 8, 512, 512, 64, TL), dt});
    cases.push_back({"accept", shape(2, 8, 8, 2048, 2048, 64, F), dt, Layout::BHSD, 1.0, true, 7});
    cases.push_back({"accept", shape(2, 8, 8, 2048, 2048, 64, TL), dt, Layout::BHSD, 1.0, true, 7});
    cases.push_back({"accept", shape(2, 8, 8, 2048, 2048, 128, F), dt, Layout::BHSD, 1.0, true, 7});
    // Odd lengths, both head dims, with and without the causal mask.
    for (int64_t L : {1, 17, 127, 129, 1000, 4097})
      for (int64_t d : {64, 128})
        for (auto c : {F, TL})
          cases.push_back({"odd", shape(1, 2, 2, L, L, d, c), dt, Layout::BHSD, 1.0, true, L > 1000 ? 13 : 1});
    // Lq != Lk both ways, each causal alignment.
    for (auto [lq, lk] : {std::pair{100, 300}, {300, 100}, {1, 129}, {129, 1}, {64, 1000}, {1000, 64}})
      for (auto c : {F, TL, BR})
        for (int64_t d : {64, 128}) cases.push_back({"lqlk", shape(1, 2, 2, lq, lk, d, c), dt});
    // Strided layouts.
    for (auto layout : {Layout::BSHD, Layout::Padded})
      for (int64_t d : {64, 128})
        for (auto c : {F, BR}) cases.push_back({"layout", shape(2, 4, 4, 333, 271, d, c), dt, layout});
    // Grouped-query heads.
    cases.push_back({"gqa", shape(2, 8, 2, 257, 257, 64, BR), dt});
    cases.push_back({"gqa", shape(1, 6, 3, 130, 190, 128, F), dt, Layout::BSHD});
    // Large magnitudes: scores in the tens to hundreds, so the running max moves and rescales.
    for (int64_t d : {64, 128}) {
      cases.push_back({"large", shape(1, 2, 2, 300, 700, d, F), dt, Layout::BHSD, 6.0});
      cases.push_back({"large", shape(1, 2, 2, 700, 300, d, TL), dt, Layout::BHSD, 6.0});
    }
    // Grids large enough for the default tile variant (small ones above take the small-grid variant),
    // with tails and each causal alignment.
    for (int64_t d : {64, 128}) {
      cases.push_back({"biggrid", shape(4, 16, 16, 1000, 777, d, BR), dt, Layout::BHSD, 1.0, true, 7});
      cases.push_back({"biggrid", shape(4, 16, 8, 777, 1000, d, TL), dt, Layout::BSHD, 1.0, true, 7});
      cases.push_back({"biggrid", shape(8, 16, 16, 333, 333, d, F), dt, Layout::Padded, 1.0, true, 5});
    }
    // Explicit scales, a negative one included; Lk = 0; no lse requested.
    cases.push_back({"scale", shape(1, 2, 2, 200, 333, 64, F, 0.3), dt});
    cases.push_back({"scale", shape(1, 2, 2, 200, 333, 128, TL, -0.2), dt});
    cases.push_back({"emptykv", shape(2, 2, 2, 37, 0, 64, F), dt});
    cases.push_back({"emptykv", shape(1, 2, 2, 70, 0, 128, BR), dt});
    cases.push_back({"nolse", shape(1, 3, 3, 150, 150, 128, TL), dt, Layout::BHSD, 1.0, false});
  }
  // Large: many blocks and tiles; sampled rows.
  cases.push_back({"big", shape(4, 16, 16, 4096, 4096, 128, F), EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, 1.0, true, 61});
  cases.push_back({"big", shape(4, 32, 32, 4096, 4096, 64, TL), EVOSDPA_DTYPE_BFLOAT16, Layout::BHSD, 1.0, true, 61});
  return cases;
}

// CPU results are shared by the kernels tested on the same case.
struct Expected {
  Inputs in;
  Reference ref;
  double baseline_err = 0;  // same-precision implementation vs float64, sampled rows
  uint64_t seed = 0;
};

const Expected& expected_for(const KCase& c) {
  static std::map<std::string, std::unique_ptr<Expected>> cache;
  auto& slot = cache[describe(c)];
  if (!slot) {
    slot = std::make_unique<Expected>();
    std::random_device rd;  // fresh inputs every run; the seed is printed on failure
    const uint64_t seed = (uint64_t{rd()} << 32) | rd();
    slot->seed = seed;
    slot->in = random_inputs(c.s, c.dtype, c.qk_sigma, seed);
    slot->ref = attention_f64(c.s, slot->in, c.row_step);
    const auto base = attention_same_precision(c.s, slot->in, c.dtype, c.row_step);
    slot->baseline_err = max_abs_error(sample_rows(base, c.s, c.s.head_dim, c.row_step),
                                       sample_rows(slot->ref.o, c.s, c.s.head_dim, c.row_step));
  }
  return *slot;
}

class KernelVsCpu : public ::testing::TestWithParam<std::tuple<std::string, KCase>> {};

TEST_P(KernelVsCpu, MatchesFloat64Reference) {
  const auto& [kernel, c] = GetParam();
  const Expected& e = expected_for(c);
  DeviceProblem prob(c.s, c.dtype, c.layout, e.in, c.lse);
  const auto params = prob.params();
  const evosdpa::Result r = evosdpa::attention_forward(params, nullptr, kernel);
  ASSERT_TRUE(r.ok()) << r.message;
  CUDA_OK(cudaDeviceSynchronize());

  const std::vector<float> out = prob.output();
  for (size_t i = 0; i < out.size(); ++i) ASSERT_TRUE(std::isfinite(out[i])) << "O element " << i << " = " << out[i];
  const double err = max_abs_error(sample_rows(out, c.s, c.s.head_dim, c.row_step),
                                   sample_rows(e.ref.o, c.s, c.s.head_dim, c.row_step));
  const double tol = 2 * e.baseline_err + output_floor(c.dtype);
  EXPECT_LE(err, tol) << "max |O - O_f64| = " << err << ", same-precision baseline " << e.baseline_err
                     << " (seed " << e.seed << ")";

  if (c.lse) {
    const auto lse_got = sample_rows(prob.lse(), c.s, 1, c.row_step);
    const auto lse_want = sample_rows(e.ref.lse, c.s, 1, c.row_step);
    double mag = 0;
    for (double x : lse_want)
      if (std::isfinite(x)) mag = std::max(mag, std::abs(x));
    const double lerr = max_lse_error(lse_got, lse_want);
    EXPECT_LE(lerr, lse_tolerance(mag)) << "max |lse - lse_f64| = " << lerr << " (seed " << e.seed << ")";
  }
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
    for (const char* k : {"mma_sm80", "reference"}) out.emplace_back(k, c);
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, KernelVsCpu, ::testing::ValuesIn(params_for_all_kernels()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + describe(std::get<1>(info.param)) + "_" +
                                  std::to_string(info.index);
                         });

TEST(Determinism, HundredRunsAreBitwiseEqual) {
  for (const char* kernel : {"mma_sm80", "reference"}) {
    const Shape s = shape(2, 8, 8, 1000, 1000, 128, EVOSDPA_CAUSAL_TOP_LEFT);
    const Inputs in = random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, std::random_device{}());
    DeviceProblem prob(s, EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, in, true);
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
}

}  // namespace
