// Checking a backward kernel's dQ, dK and dV against float64 under the accuracy contract: the forward's
// rule (evosdpa_output_tolerance in evosdpa.h) applied to each gradient, with the plain fused backward's
// error as that gradient's baseline. The GPU tests and the CPU test that plants backward bugs
// (tests/cpu/test_backward_rule.cpp) judge gradients with check_backward().
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "host/backward_reference.hpp"

namespace evosdpa::host {

// What gradients are judged against: the tensors the backward reads (O and lse from the float64
// forward, rounded as a kernel stores them), the float64 gradients from those tensors on the sampled
// rows and keys, and each gradient's baseline error.
struct BackwardExpected {
  BackwardInputs in;
  GradientsOf<double> ref;
  std::array<double, 3> baseline_error{};  // max |baseline - float64| of dQ, dK, dV (Grad order)
  std::array<double, 3> magnitude{};       // max of attention_backward_magnitude per gradient
  int64_t row_step = 1;
  uint64_t seed = 0;
};

// Fresh inputs from `seed` (Q, K ~ N(0, qk_sigma^2), V and dO ~ N(0, 1), rounded to dtype: fp16 or bf16)
// and their expectations; dQ checked on the sampled query rows, dK and dV on the sampled keys (sampled()).
// Costs a float64 forward over every row and a backward over the sampled rows and keys.
BackwardExpected make_backward_expected(const Shape& s, evosdpa_dtype_t dtype, double qk_sigma, int64_t row_step,
                                        uint64_t seed);

inline constexpr double kFp32Roundings = 16;

// The expectations of given inputs (a benchmark's tensors, downloaded): float64 gradients, baseline
// errors and magnitudes on the rows and keys sampled()  by row_step.
BackwardExpected backward_expected_from(const Shape& s, evosdpa_dtype_t dtype, BackwardInputs in, int64_t row_step);

struct GradientVerdict {
  bool pass = false;
  double error = 0, tolerance = 0;  // max |got - float64| on the checked rows, and what is allowed
  double max_ref = 0;               // max |float64| on the checked rows
};

struct BackwardVerdict {
  bool pass = false;
  std::array<GradientVerdict, 3> grad{};  // dQ, dK, dV (Grad order)
  std::string message;                    // one line: the failure's reason, then each gradient's figures
};

// Judge dQ, dK, dV (BHSD floats, every row: a NaN or infinity anywhere fails). Each passes when its
// error on the checked rows is within evosdpa_output_tolerance(dtype, its baseline error, its max
// |float64|), or within kFp32Roundings float32 roundings of its magnitude (what its sums cancel, dP and
// Delta by their terms' absolute values): a gradient that cancels to 0, as dQ and dK of a query row that
// sees a single key (dP = Delta exactly), has max |float64| = 0 and a baseline that happens to cancel
// exactly, while a kernel forming dP and Delta in another order gets float32 rounding (mma_sm80 on an
// H100: 1.8e-7; wgmma_sm90 on an H200, bf16, D = 128: 1.5e-7). A query row that sees no key must have dQ exactly 0, a key that no query sees dK = dV = 0.
BackwardVerdict check_backward(const Shape& s, evosdpa_dtype_t dtype, const BackwardExpected& e, const Gradients& got);

}  // namespace evosdpa::host
