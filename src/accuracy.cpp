// The accuracy contract (evosdpa.h): one definition, used by the GPU tests, the benchmark's verification
// and the Python tests. tests/cpu/test_accuracy_rule.cpp proves it rejects planted kernel bugs.
#include <algorithm>
#include <cmath>

#include "evosdpa/evosdpa.h"

namespace {

// Unit roundoff (half the distance from 1 to the next value) of the output: fp16's or bf16's; with FP8
// inputs the output is either, and bf16's, the coarser, is taken.
double unit_roundoff(evosdpa_dtype_t dtype) { return dtype == EVOSDPA_DTYPE_FLOAT16 ? 0x1p-11 : 0x1p-9; }

// The cap's unit: the output's roundoff for 16-bit inputs; E4M3's (2^-4) with FP8 inputs, where P is
// rounded to E4M3 and the plain computation's own error reaches 1-2% of max|O| (measured by the
// accuracy-rule test on the FP8 cases: baseline / max|O| up to 2.4%, so twice it stays under the cap).
double cap_unit(evosdpa_dtype_t dtype) {
  return dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ? 0x1p-4 / 8.0 : unit_roundoff(dtype);
}

}  // namespace

extern "C" {

double evosdpa_output_tolerance(evosdpa_dtype_t dtype, double baseline_error, double max_abs_reference) {
  const double u = unit_roundoff(dtype);
  const double magnitude = std::max(max_abs_reference, 0.0);
  // A correct kernel differs from the plain fused computation only in summation order and exp2 rounding,
  // so its error is of the baseline's size; twice that, plus one rounding at the output's magnitude,
  // covers the spread of the maximum over many elements. The cap keeps the bound a few roundings of
  // max|O| whatever the baseline does, so a baseline that is itself off cannot open the gate.
  const double bound = 2.0 * baseline_error + u * magnitude;
  const double cap = 8.0 * cap_unit(dtype) * magnitude;
  return std::min(bound, cap);
}

double evosdpa_lse_tolerance(double max_abs_lse) {
  // fp32 arithmetic on exact products: a few float32 ulps of the magnitude, at least 1e-4 absolute.
  return 1e-4 * std::max(1.0, max_abs_lse);
}

double evosdpa_lse_tolerance_for(evosdpa_dtype_t dtype, double max_abs_lse) {
  // FP8: the scores come from tensor cores that accumulate with about 14 bits (DeepSeek-V3's report,
  // section 3.3.2, for Hopper's FP8 GEMM). wgmma_sm90's E4M3 row, 2026-11-23 on an H100: lse relative
  // errors 3.6e-4 (inputs of sigma 6, D = 128) and 1.3e-4 (scale -20); 2^-10 leaves a margin of 2.7.
  if (dtype == EVOSDPA_DTYPE_FLOAT8_E4M3) return 0x1p-10 * std::max(1.0, max_abs_lse);
  return evosdpa_lse_tolerance(max_abs_lse);
}

}  // extern "C"
