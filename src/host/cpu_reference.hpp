// CPU attention used to check the GPU kernels: an exact float64 reference, and a plain same-precision
// implementation whose error sets the tolerance (a kernel may be at most twice as far from float64).
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

// What a straightforward fp16/bf16 implementation computes: S = Q K^T (fp32 accumulation) rounded to
// dtype, scaled and rounded again, softmax in fp32 rounded to dtype, then P V accumulated in fp32 and
// rounded to dtype.
std::vector<float> attention_same_precision(const Shape& s, const Inputs& in, evosdpa_dtype_t dtype,
                                            int64_t row_step = 1);

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
