#include "host/host_tensor.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
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

bool Shape::visible(int64_t i, int64_t j) const {
  switch (causal) {
    case EVOSDPA_CAUSAL_TOP_LEFT: return j <= i;
    case EVOSDPA_CAUSAL_BOTTOM_RIGHT: return j <= i + seqlen_k - seqlen_q;
    default: return true;
  }
}

Inputs random_inputs(const Shape& s, evosdpa_dtype_t dtype, double qk_sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  Inputs in;
  auto fill = [&](std::vector<float>& t, int64_t n, double sigma) {
    t.resize(static_cast<size_t>(n));
    for (float& x : t) x = round_to(dtype, static_cast<float>(sigma) * dist(rng));
  };
  fill(in.q, s.q_elems(), qk_sigma);
  fill(in.k, s.kv_elems(), qk_sigma);
  fill(in.v, s.kv_elems(), 1.0);
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
