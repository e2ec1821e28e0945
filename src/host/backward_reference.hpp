// CPU gradients of attention used to check the backward kernels: a float64 reference on the tensors a
// backward reads, and the plain fused backward in the dtype whose error sets each gradient's tolerance
// (host/backward_check.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "host/host_tensor.hpp"

namespace evosdpa::host {

// The three gradients, and a name for each (in messages).
enum class Grad { dQ, dK, dV };
inline constexpr Grad kGrads[] = {Grad::dQ, Grad::dK, Grad::dV};
const char* grad_name(Grad g);

// dQ is BHSD [B, Hq, Lq, D]; dK and dV are [B, Hkv, Lk, D], each summed over the query heads of its group.
template <typename T>
struct GradientsOf {
  std::vector<T> dq, dk, dv;
  const std::vector<T>& operator[](Grad g) const { return g == Grad::dQ ? dq : g == Grad::dK ? dk : dv; }
  std::vector<T>& operator[](Grad g) { return g == Grad::dQ ? dq : g == Grad::dK ? dk : dv; }
};
using Gradients = GradientsOf<float>;

// Which rows of a gradient are checked when only every row_step-th is: position i of a sequence of
// `length` (a query row of dQ, a key of dK and dV) when i % row_step == 0, and the last one, where a
// kernel's partial last tile sits.
inline bool sampled(int64_t i, int64_t length, int64_t row_step) { return i % row_step == 0 || i == length - 1; }

// Keep the checked rows of a gradient (`length` rows per head, head_dim values per row).
template <typename T>
std::vector<T> sample_gradient(const std::vector<T>& x, int64_t length, int64_t head_dim, int64_t row_step) {
  std::vector<T> out;
  const int64_t rows = head_dim == 0 ? 0 : static_cast<int64_t>(x.size()) / head_dim;
  for (int64_t r = 0; r < rows; ++r)
    if (sampled(r % length, length, row_step))
      out.insert(out.end(), x.begin() + r * head_dim, x.begin() + (r + 1) * head_dim);
  return out;
}

// Length of the sequence a gradient's rows run over: Lq for dQ, Lk for dK and dV.
inline int64_t gradient_length(const Shape& s, Grad g) { return g == Grad::dQ ? s.seqlen_q : s.seqlen_k; }

// dO: standard normal, rounded to dtype (fp16 or bf16), BHSD like Q.
std::vector<float> random_dout(const Shape& s, evosdpa_dtype_t dtype, uint64_t seed);

// What a backward call reads, as BHSD floats: the forward's inputs, dO, and the forward's outputs as a
// kernel stores them: O rounded to dtype, lse in float32 (-inf for a row with no visible key).
struct BackwardInputs : Inputs {
  std::vector<float> dout, o, lse;
};

// The gradients a backward computes from its inputs, in double precision: P = exp(scale Q K^T - lse) on
// the visible keys (0 elsewhere, and on a row whose lse is -inf), dV = P^T dO, dP = dO V^T,
// Delta = rowsum(dO * O), dS = P (dP - Delta), dQ = scale dS K, dK = scale dS^T Q, with O and lse as
// `in` holds them. With the exact forward's O and lse these are the gradients of sum(dO * O); with the
// stored (rounded) ones, what the kernels are judged against. Why not the exact gradients: Delta cancels
// against dP wherever one key dominates a row, so O's rounding alone moves dQ, and the plain fused
// backward's dQ was 8.0 roundings of max |dQ| from them on large_fp16 300x700 d64 (scores in the
// hundreds), past the rule's cap of 8 roundings; that error is the forward's, judged by its own rule.
// From the stored tensors the plain backward stays within 2.8 roundings on every case the CPU rule test
// runs. dQ on the sampled query rows, dK and dV on the sampled keys (sampled(), others 0). Spread over the
// machine's cores.
GradientsOf<double> attention_backward_f64(const Shape& s, const BackwardInputs& in, int64_t row_step = 1);

// The same sums with every term by its absolute value (dS = P (|dP| + |Delta|), |dS| |K|, ...): how big
// the terms are that each gradient's sums cancel. A gradient that cancels to 0 (a row that sees one key:
// dP = Delta) still gets float32 rounding of this size from any kernel (backward_check.cpp).
GradientsOf<double> attention_backward_magnitude(const Shape& s, const BackwardInputs& in, int64_t row_step = 1);

// The plain fused backward in the dtype, with the rounding points of a correct fused kernel that reads O
// and lse as stored (in.o, in.lse): S = Q K^T accumulated and scaled in fp32; P = exp(S - lse) in fp32;
// Delta = rowsum(dO * O) in fp32; dV = P^T dO with P rounded to dtype, accumulated in fp32; dP = dO V^T
// in fp32; dS = P (dP - Delta) in fp32, rounded to dtype for dQ = dS K and dK = dS^T Q (accumulated in
// fp32, then scaled in fp32); each gradient rounded to dtype once. Its distance from float64 is each
// gradient's baseline error (the forward's accuracy rule, evosdpa_output_tolerance, applied to dQ, dK
// and dV). Rows and keys as in attention_backward_f64.
Gradients attention_backward_fused_baseline(const Shape& s, const BackwardInputs& in, evosdpa_dtype_t dtype,
                                            int64_t row_step = 1);

}  // namespace evosdpa::host
