#include "host/host_tensor.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace evosdpa::host {

uint16_t encode(evosdpa_dtype_t dtype, float x) {
  uint16_t bits;
  if (dtype == EVOSDPA_DTYPE_BFLOAT16) {
    const __nv_bfloat16 b = __float2bfloat16_rn(x);
    std::memcpy(&bits, &b, 2);
  } else {
    const __half h = __float2half_rn(x);
    std::memcpy(&bits, &h, 2);
  }
  return bits;
}

float decode(evosdpa_dtype_t dtype, uint16_t bits) {
  if (dtype == EVOSDPA_DTYPE_BFLOAT16) {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __bfloat162float(__nv_bfloat16(raw));
  }
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

const char* dtype_name(evosdpa_dtype_t dtype) {
  switch (dtype) {
    case EVOSDPA_DTYPE_BFLOAT16: return "bf16";
    case EVOSDPA_DTYPE_FLOAT8_E4M3: return "fp8";
    default: return "fp16";
  }
}

uint8_t encode_e4m3(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }

float decode_e4m3(uint8_t bits) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(bits, __NV_E4M3);
  return __half2float(__half(h));
}

double Shape::effective_scale() const {
  return static_cast<float>(std::isnan(scale) ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : scale);
}

int64_t Shape::diagonal(int64_t i) const { return causal == EVOSDPA_CAUSAL_TOP_LEFT ? i : i + seqlen_k - seqlen_q; }

bool Shape::visible(int64_t i, int64_t j) const {
  const int64_t diagonal = this->diagonal(i);
  if (causal != EVOSDPA_CAUSAL_NONE && j > diagonal) return false;
  if (sliding_window) {
    if (window_left >= 0 && j < diagonal - window_left) return false;
    if (window_right >= 0 && j > diagonal + window_right) return false;
  }
  return true;
}

double Shape::cap(double x) const { return softcap > 0 ? softcap * std::tanh(x / softcap) : x; }

int64_t Shape::mask_elems() const {
  if (mask_type == EVOSDPA_MASK_NONE) return 0;
  return (mask_batch ? batch : 1) * (mask_heads ? heads_q : 1) * (mask_rows ? seqlen_q : 1) * seqlen_k;
}

size_t Shape::mask_index(int64_t b, int64_t h, int64_t i, int64_t j) const {
  const int64_t hs = mask_heads ? heads_q : 1, rs = mask_rows ? seqlen_q : 1;
  return static_cast<size_t>(
      (((mask_batch ? b : 0) * hs + (mask_heads ? h : 0)) * rs + (mask_rows ? i : 0)) * seqlen_k + j);
}

double Inputs::alibi_slope(const Shape& s, int64_t b, int64_t h) const {
  return alibi_slopes[static_cast<size_t>((s.alibi_batch ? b : 0) * s.heads_q + h)];
}

double Inputs::score_bias(const Shape& s, int64_t b, int64_t h, int64_t i, int64_t j) const {
  const double alibi = s.alibi ? -alibi_slope(s, b, h) * static_cast<double>(std::llabs(s.diagonal(i) - j)) : 0.0;
  if (s.mask_type == EVOSDPA_MASK_NONE) return alibi;
  const float x = mask[s.mask_index(b, h, i, j)];
  if (s.mask_type == EVOSDPA_MASK_BOOL) return x != 0.f ? alibi : -std::numeric_limits<double>::infinity();
  return alibi + x;
}

namespace {

// Quantise a BHSD tensor of `heads` heads to E4M3 in place (x becomes its real value, code * descale),
// with one descale per tensor or per (batch, K/V head): query head h belongs to K/V head h / group.
void quantize_e4m3(std::vector<float>& x, std::vector<uint8_t>& codes, std::vector<float>& descale, const Shape& s,
                   int64_t heads, int64_t seqlen, bool per_head) {
  const int64_t group = heads / s.heads_kv, slice = seqlen * s.head_dim;  // elements of one head
  const int64_t scales = per_head ? s.batch * s.heads_kv : 1;
  const auto scale_of = [&](int64_t bh) { return per_head ? (bh / heads) * s.heads_kv + bh % heads / group : 0; };
  std::vector<float> amax(static_cast<size_t>(scales), 0.f);
  for (int64_t bh = 0; bh < s.batch * heads; ++bh)
    for (int64_t i = 0; i < slice; ++i)
      amax[static_cast<size_t>(scale_of(bh))] =
          std::max(amax[static_cast<size_t>(scale_of(bh))], std::abs(x[static_cast<size_t>(bh * slice + i)]));
  descale.resize(static_cast<size_t>(scales));
  for (int64_t i = 0; i < scales; ++i)
    descale[static_cast<size_t>(i)] = amax[static_cast<size_t>(i)] > 0.f ? amax[static_cast<size_t>(i)] / kE4m3Max : 1.f;
  codes.resize(x.size());
  for (int64_t bh = 0; bh < s.batch * heads; ++bh) {
    const float d = descale[static_cast<size_t>(scale_of(bh))];
    for (int64_t i = 0; i < slice; ++i) {
      const size_t at = static_cast<size_t>(bh * slice + i);
      codes[at] = encode_e4m3(x[at] / d);
      x[at] = decode_e4m3(codes[at]) * d;
    }
  }
}

}  // namespace

Inputs random_inputs(const Shape& s, evosdpa_dtype_t dtype, double qk_sigma, uint64_t seed, Fp8Setup fp8) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  const bool is_fp8 = dtype == EVOSDPA_DTYPE_FLOAT8_E4M3;
  Inputs in;
  auto fill = [&](std::vector<float>& t, int64_t n, double sigma) {
    t.resize(static_cast<size_t>(n));
    for (float& x : t) {
      x = static_cast<float>(sigma) * dist(rng);
      if (!is_fp8) x = round_to(dtype, x);
    }
  };
  fill(in.q, s.q_elems(), qk_sigma);
  fill(in.k, s.kv_elems(), qk_sigma);
  fill(in.v, s.kv_elems(), 1.0);
  if (s.mask_type != EVOSDPA_MASK_NONE) {
    std::mt19937_64 mask_rng(seed ^ 0x6d61736b6d61736bull);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    std::normal_distribution<float> bias(0.f, 2.f);
    in.mask.resize(static_cast<size_t>(s.mask_elems()));
    for (int64_t b = 0; b < (s.mask_batch ? s.batch : 1); ++b)
      for (int64_t h = 0; h < (s.mask_heads ? s.heads_q : 1); ++h)
        for (int64_t i = 0; i < (s.mask_rows ? s.seqlen_q : 1); ++i) {
          const bool empty_row = s.mask_rows ? i % 53 == 11 : b == 1;
          for (int64_t j = 0; j < s.seqlen_k; ++j) {
            const bool hidden = empty_row || u(mask_rng) < 0.25f;
            const float inf = std::numeric_limits<float>::infinity();
            in.mask[s.mask_index(b, h, i, j)] = s.mask_type == EVOSDPA_MASK_BOOL ? (hidden ? 0.f : 1.f)
                                                : hidden ? -inf : round_to(dtype, bias(mask_rng));
          }
        }
  }
  if (s.alibi) {
    std::mt19937_64 slope_rng(seed ^ 0x616c696269616c69ull);
    std::uniform_real_distribution<double> factor(0.5, 1.5);
    in.alibi_slopes.resize(static_cast<size_t>((s.alibi_batch ? s.batch : 1) * s.heads_q));
    for (size_t at = 0; at < in.alibi_slopes.size(); ++at) {
      const int64_t h = static_cast<int64_t>(at) % s.heads_q;
      const double bloom = std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(s.heads_q));
      in.alibi_slopes[at] = static_cast<float>((h % 5 == 4 ? -1.0 : 1.0) * bloom * factor(slope_rng));
    }
  }
  if (is_fp8 && s.heads_kv > 0) {
    quantize_e4m3(in.q, in.q8, in.q_descale, s, s.heads_q, s.seqlen_q, fp8.per_head);
    quantize_e4m3(in.k, in.k8, in.k_descale, s, s.heads_kv, s.seqlen_k, fp8.per_head);
    quantize_e4m3(in.v, in.v8, in.v_descale, s, s.heads_kv, s.seqlen_k, fp8.per_head);
  }
  return in;
}

void scatter(const std::vector<float>& src, int64_t B, int64_t H, int64_t L, int64_t D, evosdpa_dtype_t dtype,
             int64_t sb, int64_t sh, int64_t sl, std::vector<uint16_t>& dst) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t d = 0; d < D; ++d)
          dst[static_cast<size_t>(b * sb + h * sh + l * sl + d)] = encode(dtype, src[static_cast<size_t>(((b * H + h) * L + l) * D + d)]);
}

std::vector<float> gather(const std::vector<uint16_t>& src, int64_t B, int64_t H, int64_t L, int64_t D,
                          evosdpa_dtype_t dtype, int64_t sb, int64_t sh, int64_t sl) {
  std::vector<float> out(static_cast<size_t>(B * H * L * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t d = 0; d < D; ++d)
          out[static_cast<size_t>(((b * H + h) * L + l) * D + d)] = decode(dtype, src[static_cast<size_t>(b * sb + h * sh + l * sl + d)]);
  return out;
}

}  // namespace evosdpa::host
