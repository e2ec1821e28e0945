#include "host/accuracy_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace evosdpa::host {

Expected make_expected(const Shape& s, evosdpa_dtype_t dtype, double qk_sigma, int64_t row_step, uint64_t seed,
                       Fp8Setup fp8) {
  Expected e;
  e.seed = seed;
  e.row_step = row_step;
  e.o_dtype = dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ? fp8.o_dtype : dtype;
  e.in = random_inputs(s, dtype, qk_sigma, seed, fp8);
  e.ref = attention_f64(s, e.in, row_step);
  const std::vector<float> base = attention_fused_baseline(s, e.in, dtype, row_step, e.o_dtype);
  e.baseline_error = max_abs_error(sample_rows(base, s, s.head_dim, row_step),
                                   sample_rows(e.ref.o, s, s.head_dim, row_step));
  return e;
}

Verdict check_attention(const Shape& s, evosdpa_dtype_t dtype, const Expected& e, const std::vector<float>& o,
                        const std::vector<float>* lse) {
  Verdict v;
  char buf[256];
  if (o.size() != static_cast<size_t>(s.q_elems())) {
    v.message = "O has " + std::to_string(o.size()) + " elements, expected " + std::to_string(s.q_elems());
    return v;
  }
  for (size_t i = 0; i < o.size(); ++i)
    if (!std::isfinite(o[i])) {
      std::snprintf(buf, sizeof buf, "O element %zu is %g", i, static_cast<double>(o[i]));
      v.message = buf;
      return v;
    }
  const std::vector<double> want = sample_rows(e.ref.o, s, s.head_dim, e.row_step);
  double max_ref = 0;
  for (double x : want) max_ref = std::max(max_ref, std::abs(x));
  v.error = max_abs_error(sample_rows(o, s, s.head_dim, e.row_step), want);
  v.tolerance = evosdpa_output_tolerance(dtype, e.baseline_error, max_ref);
  bool pass = v.error <= v.tolerance;
  // A row that sees no key is defined exactly: O = 0 (its lse, -inf, is matched exactly below).
  for (int64_t r = 0; r < s.rows(); ++r) {
    const double ref_lse = e.ref.lse[static_cast<size_t>(r)];
    if (!(std::isinf(ref_lse) && ref_lse < 0)) continue;
    for (int64_t d = 0; d < s.head_dim; ++d)
      if (o[static_cast<size_t>(r * s.head_dim + d)] != 0.f) {
        std::snprintf(buf, sizeof buf, "row %lld sees no key but O[%lld] = %g", static_cast<long long>(r),
                      static_cast<long long>(d), static_cast<double>(o[static_cast<size_t>(r * s.head_dim + d)]));
        v.message = buf;
        return v;
      }
  }
  if (lse != nullptr) {
    const std::vector<double> lse_want = sample_rows(e.ref.lse, s, 1, e.row_step);
    double mag = 0;
    for (double x : lse_want)
      if (std::isfinite(x)) mag = std::max(mag, std::abs(x));
    v.lse_error = max_lse_error(sample_rows(*lse, s, 1, e.row_step), lse_want);
    v.lse_tolerance = evosdpa_lse_tolerance_for(dtype, mag);
    pass = pass && v.lse_error <= v.lse_tolerance;
  }
  v.pass = pass;
  std::snprintf(buf, sizeof buf, "max|O-O_f64| %.3g (allowed %.3g: baseline %.3g, max|O_f64| %.3g)", v.error,
                v.tolerance, e.baseline_error, max_ref);
  v.message = buf;
  if (lse != nullptr) {
    std::snprintf(buf, sizeof buf, ", max|lse-lse_f64| %.3g (allowed %.3g)", v.lse_error, v.lse_tolerance);
    v.message += buf;
  }
  return v;
}

uint64_t base_seed() {
  if (const char* env = std::getenv("EVOSDPA_TEST_SEED"); env != nullptr && *env != '\0')
    return std::strtoull(env, nullptr, 0);
  std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

uint64_t case_seed(uint64_t base, const std::string& case_name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the name, mixed with the base seed
  for (unsigned char c : case_name) h = (h ^ c) * 1099511628211ull;
  std::seed_seq seq{static_cast<uint32_t>(base), static_cast<uint32_t>(base >> 32), static_cast<uint32_t>(h),
                    static_cast<uint32_t>(h >> 32)};
  uint32_t out[2];
  seq.generate(out, out + 2);
  return (uint64_t{out[0]} << 32) | out[1];
}

}  // namespace evosdpa::host
