// The backward accuracy rule (host/backward_check.hpp: the forward's rule applied to dQ, dK and dV) must
// catch real bugs: on the 16-bit cases of the kernels' shape set, the plain fused backward and a CPU model
// of a correct fused kernel that sums in another order pass the checker, and each planted bug
// (tests/cpu/backward_emulation.hpp) fails it. A bug that cannot change a case's gradients (Lq or Lk = 0,
// a mask bug without a mask, ...) must leave them bitwise unchanged or be rejected. A bug that passes
// must have an exact effect, on every gradient, within the tolerance the rule gives a correct kernel, so
// that no rule passing every correct kernel could reject it: the dropped Delta with one query row over
// 129 keys; the skipped last block of a causal 129-key case, one key that only the last row sees, with
// weight 1/129. The float64 reference is itself checked against finite differences and against the
// model run without rounding. Rows and keys are sampled (every kSampleStep-th and the last) and the
// largest cases left out, so the suite takes about half a minute on 2 cores; the GPU tests run every case
// on its own row_step. Inputs come from a fixed base seed so CI is repeatable; EVOSDPA_TEST_SEED
// replaces it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "common/cases.hpp"
#include "cpu/backward_emulation.hpp"
#include "host/accuracy_check.hpp"
#include "host/backward_check.hpp"

using namespace evosdpa::host;
using namespace test_cases;
using backward_emulation::Bug;

namespace {

constexpr int64_t kSampleStep = 16;
// The largest case (B Hq Lq Lk D) the rule is proven on here: the float64 forward behind every key's
// gradient costs that many multiply-adds twice, whatever the sampling.
constexpr double kMaxWork = 1.0e9;

uint64_t seed_base() {
  const char* env = std::getenv("EVOSDPA_TEST_SEED");
  return env != nullptr && *env != '\0' ? base_seed() : 20261122;
}

double work(const Shape& s) {
  return static_cast<double>(s.batch * s.heads_q) * static_cast<double>(s.seqlen_q * s.seqlen_k * s.head_dim);
}

std::vector<KCase> rule_cases() {
  std::vector<KCase> out;
  for (KCase c : all_cases())
    if (c.dtype != EVOSDPA_DTYPE_FLOAT8_E4M3 && work(c.s) <= kMaxWork) {
      c.row_step = std::max(c.row_step, kSampleStep);
      out.push_back(c);
    }
  return out;
}

// Whether a bug's exact effect on every gradient (max |exact with the bug - float64| on the checked rows)
// is within what the rule allows a correct kernel: then no rule that passes every correct kernel can
// reject it.
bool within_tolerance(const Shape& s, const BackwardExpected& e, const GradientsOf<double>& bugged,
                      const BackwardVerdict& v, std::string& effects) {
  bool within = true;
  for (Grad g : kGrads) {
    const int64_t len = gradient_length(s, g);
    const std::vector<double> want = sample_gradient(e.ref[g], len, s.head_dim, e.row_step);
    const std::vector<double> got = sample_gradient(bugged[g], len, s.head_dim, e.row_step);
    double effect = 0;
    for (size_t i = 0; i < want.size(); ++i)
      effect = std::max(effect, std::isfinite(got[i]) ? std::abs(got[i] - want[i]) : INFINITY);
    const double tolerance = v.grad[static_cast<size_t>(g)].tolerance;
    within = within && effect <= tolerance;
    effects += std::string(effects.empty() ? "" : ", ") + grad_name(g) + " " + std::to_string(effect) + " (allowed " +
               std::to_string(tolerance) + ")";
  }
  return within;
}

bool same(const Gradients& a, const Gradients& b) { return a.dq == b.dq && a.dk == b.dk && a.dv == b.dv; }

class BackwardRule : public ::testing::TestWithParam<KCase> {};

TEST_P(BackwardRule, AcceptsCorrectModelsAndRejectsEveryPlantedBug) {
  const KCase& c = GetParam();
  const uint64_t seed = case_seed(seed_base(), describe(c));
  const BackwardExpected e = make_backward_expected(c.s, c.dtype, c.qk_sigma, c.row_step, seed);
  const BackwardVerdict base =
      check_backward(c.s, c.dtype, e, attention_backward_fused_baseline(c.s, e.in, c.dtype, c.row_step));
  EXPECT_TRUE(base.pass) << "baseline rejected: " << base.message << " (seed " << seed << ")";
  std::printf("  %-22s %s\n", "baseline", base.message.c_str());
  const Gradients good = backward_emulation::run(c.s, c.dtype, e, Bug::None);
  const BackwardVerdict ok = check_backward(c.s, c.dtype, e, good);
  EXPECT_TRUE(ok.pass) << "correct model rejected: " << ok.message << " (seed " << seed << ")";
  std::printf("  %-22s %s\n", "reordered", ok.message.c_str());
  for (Bug bug : backward_emulation::kBugs) {
    const char* name = backward_emulation::bug_name(bug);
    const Gradients bad = backward_emulation::run(c.s, c.dtype, e, bug);
    if (same(bad, good)) {
      EXPECT_FALSE(backward_emulation::can_change(bug, c.s)) << name << " changed nothing";
      std::printf("  %-22s cannot change this case\n", name);
      continue;
    }
    const BackwardVerdict v = check_backward(c.s, c.dtype, e, bad);
    if (!v.pass) {
      std::printf("  %-22s %s\n", name, v.message.c_str());
      continue;
    }
    std::string effects;
    const bool invisible = within_tolerance(c.s, e, backward_emulation::run_exact(c.s, c.dtype, e, bug), v, effects);
    EXPECT_TRUE(invisible) << name << " passed: " << v.message << "; its exact effect: " << effects << " (seed " << seed
                           << ")";
    std::printf("  %-22s passed, its exact effect within the tolerance: %s\n", name, effects.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(ShapeSet, BackwardRule, ::testing::ValuesIn(rule_cases()),
                         [](const auto& info) { return describe(info.param) + "_" + std::to_string(info.index); });

// Small shapes with grouped heads, each mask, Lq != Lk both ways (bottom-right with Lq > Lk has rows
// that see no key) and an explicit scale.
std::vector<Shape> small_shapes() {
  std::vector<Shape> out;
  for (auto c : {EVOSDPA_CAUSAL_NONE, EVOSDPA_CAUSAL_TOP_LEFT, EVOSDPA_CAUSAL_BOTTOM_RIGHT})
    for (auto [lq, lk] : {std::pair{5, 7}, {7, 5}}) out.push_back(shape(1, 4, 2, lq, lk, 8, c));
  out.push_back(shape(2, 2, 1, 6, 6, 8, EVOSDPA_CAUSAL_NONE, -0.7));
  return out;
}

// The inputs of a backward call with O and lse from the float64 forward, unrounded (to float).
BackwardInputs exact_inputs(const Shape& s, uint64_t seed) {
  BackwardInputs in;
  static_cast<Inputs&>(in) = random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, seed);
  in.dout = random_dout(s, EVOSDPA_DTYPE_FLOAT16, seed + 1);
  const Reference fwd = attention_f64(s, in);
  in.o.assign(fwd.o.begin(), fwd.o.end());
  in.lse.assign(fwd.lse.begin(), fwd.lse.end());
  return in;
}

// sum(dO * O) in float64, the loss whose gradients the backward computes.
double loss(const Shape& s, const BackwardInputs& in) {
  const Reference fwd = attention_f64(s, in);
  double l = 0;
  for (size_t i = 0; i < fwd.o.size(); ++i) l += in.dout[i] * fwd.o[i];
  return l;
}

TEST(BackwardReference, MatchesFiniteDifferencesOfTheForward) {
  for (const Shape& s : small_shapes()) {
    BackwardInputs in = exact_inputs(s, 7);
    const GradientsOf<double> g = attention_backward_f64(s, in);
    // Central differences with a step that keeps every perturbed fp16 value exact in float.
    constexpr float h = 0x1p-10f;
    for (auto [t, grad, name] : {std::tuple{&in.q, &g.dq, "dQ"}, {&in.k, &g.dk, "dK"}, {&in.v, &g.dv, "dV"}}) {
      double mag = 0;
      for (double x : *grad) mag = std::max(mag, std::abs(x));
      ASSERT_GT(mag, 0.1) << name;
      for (size_t i = 0; i < t->size(); ++i) {
        const float x = (*t)[i];
        (*t)[i] = x + h;
        const double up = loss(s, in);
        (*t)[i] = x - h;
        const double down = loss(s, in);
        (*t)[i] = x;
        ASSERT_NEAR((*grad)[i], (up - down) / (2 * h), 1e-5 * mag)
            << name << " element " << i << " of " << test_cases::describe({"fd", s});
      }
    }
  }
}

TEST(BackwardReference, AgreesWithTheTiledModelWithoutRounding) {
  for (const Shape& s :
       {shape(2, 6, 2, 130, 77, 64, EVOSDPA_CAUSAL_BOTTOM_RIGHT), shape(1, 2, 2, 70, 150, 128, EVOSDPA_CAUSAL_TOP_LEFT),
        shape(1, 3, 3, 100, 100, 64, EVOSDPA_CAUSAL_NONE, 0.0)})
    for (int64_t step : {1, 9}) {
      const BackwardExpected e = make_backward_expected(s, EVOSDPA_DTYPE_BFLOAT16, 2.0, step, 11);
      const GradientsOf<double> model = backward_emulation::run_exact(s, EVOSDPA_DTYPE_BFLOAT16, e, Bug::None);
      for (Grad g : kGrads) {
        double mag = 0;
        for (double x : e.ref[g]) mag = std::max(mag, std::abs(x));
        for (size_t i = 0; i < e.ref[g].size(); ++i)
          ASSERT_NEAR(model[g][i], e.ref[g][i], 1e-12 * mag) << grad_name(g) << " element " << i;
      }
    }
}

TEST(BackwardCheck, FailsOnANonFiniteValueAnywhereAndOnANonZeroEmptyRow) {
  const Shape s = shape(1, 2, 2, 100, 40, 64, EVOSDPA_CAUSAL_BOTTOM_RIGHT);  // query rows 0-59 see no key
  const BackwardExpected e = make_backward_expected(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 9, 3);
  const Gradients base = attention_backward_fused_baseline(s, e.in, EVOSDPA_DTYPE_FLOAT16, 9);
  ASSERT_TRUE(check_backward(s, EVOSDPA_DTYPE_FLOAT16, e, base).pass);
  Gradients g = base;
  g.dk[64 + 5] = NAN;  // key 1: not a sampled row
  BackwardVerdict v = check_backward(s, EVOSDPA_DTYPE_FLOAT16, e, g);
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.message.find("dK element 69 is nan"), std::string::npos) << v.message;
  g = base;
  g.dq[30 * 64] = 1e-30f;  // query row 30 sees no key
  v = check_backward(s, EVOSDPA_DTYPE_FLOAT16, e, g);
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.message.find("dQ row 30 must be 0"), std::string::npos) << v.message;
  g = base;
  g.dv.pop_back();
  EXPECT_FALSE(check_backward(s, EVOSDPA_DTYPE_FLOAT16, e, g).pass);
}

// A query row that sees a single key has dP = Delta, so its dQ (and that key's dK) cancel to 0 in float64.
// A correct kernel that forms dP and Delta in different orders keeps their float32 rounding, which scales
// with the terms (sum |dO V|), not with what is left after they cancel: wgmma_sm90 on an H200 (bf16, D =
// 128) gave dQ 1.5e-7 where a magnitude from |dP| + |Delta| allowed 9.5e-8, on a row whose dP itself
// cancelled. Modelled here by such a row and the orders least alike: dP summed from its largest terms,
// Delta from its smallest. A planted error in that dS (2^-7 of the row's largest term) must still fail.
TEST(BackwardCheck, AcceptsSingleKeyRowsWhoseDpAndDeltaRoundDifferently) {
  const Shape s = shape(1, 2, 2, 129, 1, 128, EVOSDPA_CAUSAL_BOTTOM_RIGHT);  // only row 128 sees key 0
  const int64_t D = s.head_dim;
  const float scale = static_cast<float>(s.effective_scale());
  for (evosdpa_dtype_t dtype : {EVOSDPA_DTYPE_FLOAT16, EVOSDPA_DTYPE_BFLOAT16})
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      // dO of the row chosen so that dP's terms cancel in pairs (dO_2i ~ V_2i+1, dO_2i+1 ~ -V_2i): dP is
      // left with what rounding dO to the dtype leaves, far below its terms, as where a kernel failed.
      BackwardInputs in = make_backward_expected(s, dtype, 1.0, 1, case_seed(seed, "single_key")).in;
      for (int64_t h = 0; h < s.heads_q; ++h) {
        float* dout = &in.dout[static_cast<size_t>((h * s.seqlen_q + 128) * D)];
        const float* v = &in.v[static_cast<size_t>(h * D)];
        for (int64_t i = 0; i < D / 2; ++i) {
          const float a = 0.7f + 0.01f * static_cast<float>(i % 13);
          dout[2 * i] = round_to(dtype, a * v[2 * i + 1]);
          dout[2 * i + 1] = round_to(dtype, -a * v[2 * i]);
        }
      }
      const BackwardExpected e = backward_expected_from(s, dtype, std::move(in), 1);
      const auto ordered_sum = [&](const float* a, const float* b, bool largest_first) {
        std::vector<float> terms(static_cast<size_t>(D));
        for (int64_t d = 0; d < D; ++d) terms[static_cast<size_t>(d)] = a[d] * b[d];
        std::sort(terms.begin(), terms.end(), [&](float x, float y) {
          return largest_first ? std::abs(x) > std::abs(y) : std::abs(x) < std::abs(y);
        });
        float sum = 0.f;
        for (float t : terms) sum += t;
        return sum;
      };
      Gradients got, planted;
      for (Grad g : kGrads) got[g].assign(e.ref[g].begin(), e.ref[g].end());
      for (float& x : got.dv) x = round_to(dtype, x);
      planted = got;
      for (int64_t h = 0; h < s.heads_q; ++h) {
        const int64_t r = h * s.seqlen_q + 128;  // its K/V head is h (one query head per group)
        const float* dout = &e.in.dout[static_cast<size_t>(r * D)];
        const float* o = &e.in.o[static_cast<size_t>(r * D)];
        const float* q = &e.in.q[static_cast<size_t>(r * D)];
        const float* k = &e.in.k[static_cast<size_t>(h * D)];
        const float* v = &e.in.v[static_cast<size_t>(h * D)];
        const float ds = ordered_sum(dout, v, true) - ordered_sum(dout, o, false);  // P = 1
        float largest = 0.f;
        for (int64_t d = 0; d < D; ++d) largest = std::max(largest, std::abs(dout[d] * v[d]));
        const float bad = ds + std::ldexp(1.f, std::ilogb(largest) - 7);
        for (int64_t d = 0; d < D; ++d) {
          const size_t at = static_cast<size_t>(h * D + d), row_at = static_cast<size_t>(r * D + d);
          got.dq[row_at] = round_to(dtype, scale * (round_to(dtype, ds) * k[d]));
          got.dk[at] = round_to(dtype, scale * (round_to(dtype, ds) * q[d]));
          planted.dq[row_at] = round_to(dtype, scale * (round_to(dtype, bad) * k[d]));
          planted.dk[at] = round_to(dtype, scale * (round_to(dtype, bad) * q[d]));
        }
      }
      const BackwardVerdict v = check_backward(s, dtype, e, got);
      EXPECT_TRUE(v.pass) << v.message << " (seed " << seed << ")";
      EXPECT_FALSE(check_backward(s, dtype, e, planted).pass) << "seed " << seed;
    }
}

}  // namespace
