// Checking a kernel's output against float64 under the accuracy contract (evosdpa_output_tolerance and
// evosdpa_lse_tolerance in evosdpa.h). The GPU tests, the benchmark's verification and the CPU test that
// plants kernel bugs (tests/cpu/test_accuracy_rule.cpp) all judge outputs with check_attention().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/cpu_reference.hpp"

namespace evosdpa::host {

// What an output is judged against: the inputs, float64 O and lse, and the error of the plain fused
// computation in the dtype (attention_fused_baseline), all on the rows i % row_step == 0.
struct Expected {
  Inputs in;
  Reference ref;
  double baseline_error = 0;
  int64_t row_step = 1;
  uint64_t seed = 0;
  evosdpa_dtype_t o_dtype = EVOSDPA_DTYPE_FLOAT16;  // O's element type (the inputs' own unless FP8)
};

// Fresh inputs (Q, K ~ N(0, qk_sigma^2), V ~ N(0, 1), rounded to dtype, or quantised to E4M3 as `fp8`
// says) from `seed`, and their expectations.
Expected make_expected(const Shape& s, evosdpa_dtype_t dtype, double qk_sigma, int64_t row_step, uint64_t seed,
                       Fp8Setup fp8 = {});

struct Verdict {
  bool pass = false;
  double error = 0, tolerance = 0;          // max |O - O_f64| on checked rows, and what is allowed
  double lse_error = 0, lse_tolerance = 0;  // the same for the log-sum-exp (0 when not checked)
  std::string message;                      // one line: the figures, and the reason on a failure
};

// Judge O (BHSD floats, every row: a NaN or infinity anywhere fails) and, when not null, lse ([B, Hq, Lq])
// on the checked rows. Rows with no visible key must be exactly O = 0 and lse = -inf.
Verdict check_attention(const Shape& s, evosdpa_dtype_t dtype, const Expected& e, const std::vector<float>& o,
                        const std::vector<float>* lse);

// The run's base seed: EVOSDPA_TEST_SEED when set (to replay a run), else a fresh random one.
uint64_t base_seed();
// A seed per named case, derived from the base seed, so one case replays without running the others.
uint64_t case_seed(uint64_t base, const std::string& case_name);

}  // namespace evosdpa::host
