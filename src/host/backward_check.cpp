#include "host/backward_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "host/accuracy_check.hpp"

namespace evosdpa::host {
namespace {

// Whether row `r` of gradient g is defined to be exactly 0: a query row that sees no key (key 0 is the
// first any mask admits), or a key that no query sees (the last query sees the most keys).
bool must_be_zero(const Shape& s, Grad g, int64_t r) {
  if (g == Grad::dQ) return s.seqlen_k == 0 || !s.visible(r % s.seqlen_q, 0);
  return s.seqlen_q == 0 || !s.visible(s.seqlen_q - 1, r % s.seqlen_k);
}

// Why gradient g fails outright (a non-finite value anywhere, a wrong size, a non-zero row that must be
// zero), or "" when it does not.
std::string defect(const Shape& s, Grad g, const std::vector<float>& x, size_t want_size) {
  char buf[160];
  if (x.size() != want_size) {
    std::snprintf(buf, sizeof buf, "%s has %zu elements, expected %zu", grad_name(g), x.size(), want_size);
    return buf;
  }
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i])) {
      std::snprintf(buf, sizeof buf, "%s element %zu is %g", grad_name(g), i, static_cast<double>(x[i]));
      return buf;
    }
  const int64_t D = s.head_dim;
  for (int64_t r = 0; D > 0 && r < static_cast<int64_t>(x.size()) / D; ++r) {
    if (!must_be_zero(s, g, r)) continue;
    for (int64_t d = 0; d < D; ++d)
      if (x[static_cast<size_t>(r * D + d)] != 0.f) {
        std::snprintf(buf, sizeof buf, "%s row %lld must be 0 (%s) but element %lld is %g", grad_name(g),
                      static_cast<long long>(r), g == Grad::dQ ? "its query sees no key" : "no query sees its key",
                      static_cast<long long>(d), static_cast<double>(x[static_cast<size_t>(r * D + d)]));
        return buf;
      }
  }
  return "";
}

}  // namespace

BackwardExpected backward_expected_from(const Shape& s, evosdpa_dtype_t dtype, BackwardInputs in, int64_t row_step) {
  BackwardExpected e;
  e.row_step = row_step;
  e.in = std::move(in);
  e.ref = attention_backward_f64(s, e.in, row_step);
  const Gradients base = attention_backward_fused_baseline(s, e.in, dtype, row_step);
  const GradientsOf<double> magnitude = attention_backward_magnitude(s, e.in, row_step);
  for (Grad g : kGrads) {
    const int64_t len = gradient_length(s, g);
    const auto at = static_cast<size_t>(g);
    e.baseline_error[at] = max_abs_error(sample_gradient(base[g], len, s.head_dim, row_step),
                                         sample_gradient(e.ref[g], len, s.head_dim, row_step));
    for (double m : magnitude[g]) e.magnitude[at] = std::max(e.magnitude[at], m);
  }
  return e;
}

BackwardExpected make_backward_expected(const Shape& s, evosdpa_dtype_t dtype, double qk_sigma, int64_t row_step,
                                        uint64_t seed) {
  BackwardInputs in;
  static_cast<Inputs&>(in) = random_inputs(s, dtype, qk_sigma, seed);
  in.dout = random_dout(s, dtype, case_seed(seed, "dout"));  // a stream of its own, not Q's
  const Reference fwd = attention_f64(s, in);                // every row: each key's gradient needs them all
  in.o.resize(fwd.o.size());
  std::transform(fwd.o.begin(), fwd.o.end(), in.o.begin(), [&](double x) { return round_to(dtype, static_cast<float>(x)); });
  in.lse.assign(fwd.lse.begin(), fwd.lse.end());
  BackwardExpected e = backward_expected_from(s, dtype, std::move(in), row_step);
  e.seed = seed;
  return e;
}

BackwardVerdict check_backward(const Shape& s, evosdpa_dtype_t dtype, const BackwardExpected& e, const Gradients& got) {
  BackwardVerdict v;
  v.pass = true;
  std::string reason, figures;
  for (Grad g : kGrads) {
    GradientVerdict& gv = v.grad[static_cast<size_t>(g)];
    const std::vector<float>& x = got[g];
    const std::string bad = defect(s, g, x, e.ref[g].size());
    if (!bad.empty()) {
      if (reason.empty()) reason = bad;
      v.pass = false;
      continue;
    }
    const int64_t len = gradient_length(s, g);
    const std::vector<double> want = sample_gradient(e.ref[g], len, s.head_dim, e.row_step);
    for (double w : want) gv.max_ref = std::max(gv.max_ref, std::abs(w));
    gv.error = max_abs_error(sample_gradient(x, len, s.head_dim, e.row_step), want);
    gv.tolerance = std::max(evosdpa_output_tolerance(dtype, e.baseline_error[static_cast<size_t>(g)], gv.max_ref),
                            kFp32Roundings * 0x1p-24 * e.magnitude[static_cast<size_t>(g)]);
    gv.pass = gv.error <= gv.tolerance;
    v.pass = v.pass && gv.pass;
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s%s %.3g (allowed %.3g: baseline %.3g, max|ref| %.3g)",
                  figures.empty() ? "" : ", ", grad_name(g), gv.error, gv.tolerance,
                  e.baseline_error[static_cast<size_t>(g)], gv.max_ref);
    figures += buf;
    if (!gv.pass && reason.empty()) reason = std::string(grad_name(g)) + " beyond its tolerance";
  }
  v.message = reason.empty() ? figures : reason + (figures.empty() ? "" : ": " + figures);
  return v;
}

}  // namespace evosdpa::host
