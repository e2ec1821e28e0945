// CPU attention used to check the GPU kernels: an exact float64 reference, and the plain fused
// computation in the dtype whose error sets the tolerance (see host/accuracy_check.hpp).
#pragma once

#include <vector>

#include "host/host_tensor.hpp"

namespace evosdpa::host {

struct Reference {
  std::vector<double> o;    // BHSD, [B, Hq, Lq, D]
  std::vector<double> lse;  // [B, Hq, Lq]; -inf for a row with no visible key
};

// Softmax attention in double precision (max-subtracted softmax). Rows with no visible key give O = 0
// and lse = -inf. Only query rows i with i % row_step == 0 are computed (the others stay 0 and NaN), so
// large shapes can be checked on a sample; the work is spread over the machine's cores.
Reference attention_f64(const Shape& s, const Inputs& in, int64_t row_step = 1);

// The plain fused computation in the dtype, with the rounding points a correct fused kernel has: scores
// S = Q K^T accumulated and scaled in fp32, the row max m and the unnormalised probabilities
// P = exp(S - m) in fp32, their sum l in fp32, P rounded to dtype for P V (accumulated in fp32), and O
// = (P V) / l rounded to dtype once. Its distance from float64 is the "baseline error" of the accuracy
// contract (evosdpa_output_tolerance). Rows as in attention_f64; other rows stay 0.
// FP8 inputs (dtype EVOSDPA_DTYPE_FLOAT8_E4M3, O in o_dtype): the FP8 kernels' rounding points, as
// FlashAttention-3 places them: P = 2^(S - m + kFp8MaxOffset) in fp32 (at most 256, inside E4M3's 448),
// l from that unrounded P, P rounded to E4M3 (nearest even, saturating) for P V, O = (P V) / l rounded
// to o_dtype. o_dtype is read only for FP8 inputs.
std::vector<float> attention_fused_baseline(const Shape& s, const Inputs& in, evosdpa_dtype_t dtype,
                                            int64_t row_step = 1, evosdpa_dtype_t o_dtype = EVOSDPA_DTYPE_FLOAT16);

// log2 of the largest P an FP8 kernel feeds its P.V GEMM: 2^8 = 256 <= 448 keeps P's largest values in
// E4M3's normal range and its small ones above the subnormals for longer (FlashAttention-3's offset).
inline constexpr float kFp8MaxOffset = 8.f;

// P rounded as the P.V GEMM of a kernel in this dtype sees it: to the dtype, or to E4M3 for FP8 inputs.
float round_p(evosdpa_dtype_t dtype, float p);

// Keep the rows i % row_step == 0 of a BHSD tensor with `width` values per row (D for O, 1 for lse).
template <typename T>
std::vector<T> sample_rows(const std::vector<T>& x, const Shape& s, int64_t width, int64_t row_step) {
  std::vector<T> out;
  for (int64_t r = 0; r < s.rows(); ++r)
    if ((r % s.seqlen_q) % row_step == 0)
      out.insert(out.end(), x.begin() + r * width, x.begin() + (r + 1) * width);
  return out;
}

// Largest |got - want|; +inf if any `got` is NaN or infinite, so a non-finite output never passes.
double max_abs_error(const std::vector<float>& got, const std::vector<double>& want);
// Same over the log-sum-exp, where -inf is expected for empty rows and must match exactly.
double max_lse_error(const std::vector<float>& got, const std::vector<double>& want);

}  // namespace evosdpa::host
