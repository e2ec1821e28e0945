// The online softmax of the mma.sync families (mma_sm80, mma_fp8) on one m-tile of scores in the mma
// accumulator layout: scale and mask, row maxima, and the rescale-and-exponentiate step.
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"
#include "kernels/score_mods.cuh"

namespace evosdpa::detail::mma_sm80 {

// Scale one m-tile's scores into the log2 domain (`scale()`: the softmax scale times log2(e), and with
// FP8 inputs q_descale * k_descale) and mask keys past the end or above the causal diagonal with -inf.
// Thread element (n, e) is row lane/4 (+8 for e >= 2), key 8n + 2(lane%4) + (e & 1). `scale` is a
// callable so that mma_sm80 reads p.scale_log2 where it always did: passed as a float, the value moved
// to a register and ptxas rescheduled the kernel (different SASS, untimed).
template <int BN, bool kMask, typename Scale>
__device__ __forceinline__ void scale_and_mask(float (&s)[BN / 8][4], const KernelParams& p, Scale scale, int row0,
                                               int key0, int lane) {
#pragma unroll
  for (int n = 0; n < BN / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] *= scale();
      if constexpr (kMask) {
        const int row = row0 + (lane >> 2) + (e >> 1) * 8;
        const int key = key0 + n * 8 + 2 * (lane & 3) + (e & 1);
        const bool visible = key < p.seqlen_k && (!p.causal || key <= row + p.causal_offset);
        if (!visible) s[n][e] = -INFINITY;
      }
    }
  }
}

// scale_and_mask with score modifiers (score_mods.cuh; mma_sm80's kernels instantiated with them): each
// score scaled, or softcapped (Mods::kSoftcap, the capped score in the log2 domain), ALiBi's bias added
// (Mods::kAlibi: alibi_log2 = -slope log2(e), the distance from the row's diagonal), the mask tensor's
// element applied (Mods::kMask: `tensor`, a MaskFragment), then with kMask the keys past the end, above the
// causal diagonal or (Mods::kWindow) outside the window set to -inf, last, so that no bias revives a
// masked score.
template <int BN, bool kMask, typename Mods, typename Tensor>
__device__ __forceinline__ void scale_and_mask_mods(float (&s)[BN / 8][4], const KernelParams& p, float alibi_log2,
                                                    const Tensor& tensor, int row0, int key0, int lane) {
  const SoftcapFactors cap = Mods::kSoftcap ? softcap_factors(p, p.scale_log2) : SoftcapFactors{0.f, 0.f};
  // Per row (lane / 4, + 8): the diagonal, and its distance from the thread's first key as a float
  // (whole numbers, exact up to 2^24 keys).
  int diagonal[2], from[2], last[2];
  float distance[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    diagonal[r] = row0 + (lane >> 2) + 8 * r + p.causal_offset;
    distance[r] = static_cast<float>(diagonal[r] - key0 - 2 * (lane & 3));
    from[r] = first_key<Mods>(p, diagonal[r]);
    last[r] = last_key<Mods>(p, p.seqlen_k, diagonal[r]);
  }
#pragma unroll
  for (int n = 0; n < BN / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = s[n][e];
      if constexpr (Mods::kSoftcap)
        x = softcap_log2(x, cap.in, cap.out);
      else
        x *= p.scale_log2;
      if constexpr (Mods::kAlibi) x += alibi_log2 * fabsf(distance[e >> 1] - static_cast<float>(8 * n + (e & 1)));
      if constexpr (Mods::kMask != MaskKind::kNone) x = tensor.apply(x, n, e);
      if constexpr (kMask) {
        const int key = key0 + n * 8 + 2 * (lane & 3) + (e & 1);
        if (key > last[e >> 1] || key < from[e >> 1]) x = -INFINITY;
      }
      s[n][e] = x;
    }
  }
}

// Max of each of the thread's two rows over the tile, shared across the 4 lanes that hold a row.
template <int BN>
__device__ __forceinline__ void row_max(const float (&s)[BN / 8][4], float (&mx)[2]) {
  mx[0] = mx[1] = -INFINITY;
#pragma unroll
  for (int n = 0; n < BN / 8; ++n) {
    mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
  }
}

// Online-softmax step for one m-tile: raise the running max, rescale the running sum and O by
// 2^(m_old - m_new), and turn S into P = 2^(S - m_new + kLog2Offset) in place, l summing that P. A row
// that has seen only masked keys keeps m = -inf; it exponentiates against 0 instead, so P and the
// rescale factor are 0, never NaN. kLog2Offset: 0 for 16-bit P; 8 for E4M3 P (at most 256, inside its
// 448, the small values further above its subnormals), which O / l and the lse (m + log2 l - offset)
// take back out.
template <int BN, int D, int kLog2Offset>
__device__ __forceinline__ void rescale(float (&s)[BN / 8][4], float (&o)[D / 8][4], float (&m)[2],
                                        float (&l)[2]) {
  float tile_max[2];
  row_max<BN>(s, tile_max);
  float base[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float m_new = fmaxf(m[r], tile_max[r]);
    base[r] = m_new == -INFINITY ? 0.f : m_new;
    const float alpha = fast_exp2(m[r] - base[r]);
    m[r] = m_new;
    l[r] *= alpha;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][2 * r] *= alpha;
      o[n][2 * r + 1] *= alpha;
    }
  }
#pragma unroll
  for (int n = 0; n < BN / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = fast_exp2(s[n][e] - (base[e >> 1] - static_cast<float>(kLog2Offset)));
      l[e >> 1] += s[n][e];
    }
  }
}

}  // namespace evosdpa::detail::mma_sm80
