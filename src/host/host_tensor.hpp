// Host-side helpers shared by the tests and the benchmark: 16-bit encodings, random inputs, and an
// attention problem laid out in host memory. Not part of the library.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "evosdpa/evosdpa.h"

namespace evosdpa::host {

uint16_t encode(evosdpa_dtype_t dtype, float x);  // round to nearest even
float decode(evosdpa_dtype_t dtype, uint16_t bits);
inline float round_to(evosdpa_dtype_t dtype, float x) { return decode(dtype, encode(dtype, x)); }
const char* dtype_name(evosdpa_dtype_t dtype);

// FP8 E4M3 (PyTorch's float8_e4m3fn: bias 7, no infinities, max 448): round to nearest even, saturating
// to +-448 (an infinity too); NaN stays NaN. The conversion the FP8 kernels' cvt.rn.satfinite does.
uint8_t encode_e4m3(float x);
float decode_e4m3(uint8_t bits);
inline float round_to_e4m3(float x) { return decode_e4m3(encode_e4m3(x)); }
inline constexpr float kE4m3Max = 448.f;

// Sizes of one attention problem; the host copies are contiguous BHSD.
struct Shape {
  int64_t batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 1, seqlen_k = 1, head_dim = 64;
  evosdpa_causal_t causal = EVOSDPA_CAUSAL_NONE;
  double scale = std::numeric_limits<double>::quiet_NaN();  // NaN: 1/sqrt(head_dim), as in the C ABI
  // A sliding window (evosdpa.h): bounds in keys from the diagonal, -1 for none; and a softcap (0: none).
  bool sliding_window = false;
  int64_t window_left = -1, window_right = -1;
  double softcap = 0;
  // A mask tensor (evosdpa.h "Mask tensors"): its elements' type (NONE: none), and which dimensions it has
  // of its own; one it lacks has size 1 and is broadcast (stride 0): a key padding mask has the batch only.
  evosdpa_mask_type_t mask_type = EVOSDPA_MASK_NONE;
  bool mask_batch = true, mask_heads = true, mask_rows = true;
  // ALiBi slopes (evosdpa.h "ALiBi"): none, or one per query head, of the batch's own (alibi_batch) or
  // shared by it (stride 0).
  bool alibi = false, alibi_batch = false;
  // The scale the library applies: the float the C ABI receives (softmax_scale is a float), as a double.
  double effective_scale() const;
  int64_t q_elems() const { return batch * heads_q * seqlen_q * head_dim; }
  int64_t kv_elems() const { return batch * heads_kv * seqlen_k * head_dim; }
  int64_t rows() const { return batch * heads_q * seqlen_q; }
  // The diagonal key of query i: i with a top-left causal mask, else i + seqlen_k - seqlen_q (evosdpa.h).
  int64_t diagonal(int64_t i) const;
  // Whether query i may attend key j (causal mask and sliding window).
  bool visible(int64_t i, int64_t j) const;
  // A scaled score after the softcap: softcap * tanh(x / softcap), or x without one.
  double cap(double x) const;
  // The mask tensor's own sizes [batch|1, heads_q|1, seqlen_q|1, seqlen_k], and the index of element
  // (b, h, i, j) in its dense host copy (Inputs::mask), the broadcast dimensions taken at 0.
  int64_t mask_elems() const;
  size_t mask_index(int64_t b, int64_t h, int64_t i, int64_t j) const;
};

// Inputs in float, BHSD: the exact dtype values (already rounded), or with FP8 inputs the real values,
// each stored E4M3 value times its descale (rounded to float, as the kernels dequantise).
struct Inputs {
  std::vector<float> q, k, v;
  // FP8 inputs only: the stored E4M3 codes (BHSD) and the descales, one per tensor (size 1) or per
  // (batch, K/V head) ([B, Hkv] row-major).
  std::vector<uint8_t> q8, k8, v8;
  std::vector<float> q_descale, k_descale, v_descale;
  bool per_head_scales() const { return q_descale.size() > 1; }
  // With a mask tensor, its dense copy (Shape::mask_index): 1 or 0 (BOOL), or the bias, a dtype value or
  // -inf (ADDITIVE).
  std::vector<float> mask;
  // With ALiBi, the slopes: [batch, heads_q] (Shape::alibi_batch) or [heads_q].
  std::vector<float> alibi_slopes;
  double alibi_slope(const Shape& s, int64_t b, int64_t h) const;
  // What the mask tensor and ALiBi add to the score of query i of head h and key j: 0, -inf, or a bias.
  double score_bias(const Shape& s, int64_t b, int64_t h, int64_t i, int64_t j) const;
};

// How FP8 inputs are quantised and what such a call outputs; ignored for 16-bit inputs (whose O has
// their dtype).
struct Fp8Setup {
  evosdpa_dtype_t o_dtype = EVOSDPA_DTYPE_FLOAT16;
  bool per_head = false;  // descales per (batch, K/V head) instead of per tensor
};

// Fresh normal inputs rounded to dtype: Q and K with standard deviation `qk_sigma` (large values stress
// the online softmax), V standard normal. A mask tensor (its own random stream, so the inputs of a case
// do not depend on it) hides a quarter of the keys at random and every key of some rows (query rows
// i % 53 == 11, or with a key mask batch entry 1): those rows get O = 0. Its biases are normal with
// standard deviation 2, rounded to dtype. ALiBi's slopes (a stream of their own too) are BLOOM's,
// 2^(-8 (h + 1) / heads_q), times a factor from 0.5 to 1.5, negative for every fifth head. `seed` makes a run reproducible. FP8: each tensor (or each
// (batch, K/V head) slice) is scaled so that its largest magnitude maps to 448, E4M3's largest value
// (descale = amax / 448, PyTorch's and FlashAttention-3's recipe), and rounded to E4M3.
Inputs random_inputs(const Shape& s, evosdpa_dtype_t dtype, double qk_sigma, uint64_t seed, Fp8Setup fp8 = {});

// Copy a BHSD float tensor into a dtype buffer with the given element strides ([B,H,L,D], D contiguous);
// elements not covered stay as they are.
void scatter(const std::vector<float>& src, int64_t B, int64_t H, int64_t L, int64_t D, evosdpa_dtype_t dtype,
             int64_t sb, int64_t sh, int64_t sl, std::vector<uint16_t>& dst);
// The inverse: gather a strided dtype buffer into BHSD floats.
std::vector<float> gather(const std::vector<uint16_t>& src, int64_t B, int64_t H, int64_t L, int64_t D,
                          evosdpa_dtype_t dtype, int64_t sb, int64_t sh, int64_t sl);

}  // namespace evosdpa::host
