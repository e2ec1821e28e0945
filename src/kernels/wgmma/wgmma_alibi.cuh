// ALiBi's bias for a consumer thread's positions of S (evosdpa.h, "ALiBi"): -slope * |diagonal - key|,
// written into S's accumulators in raw score units before S = Q.K^T adds to them (wgmma's accumulate), as
// a mask tensor's bias is (wgmma_mask.cuh), and onto it with one, so that its work runs before the
// warpgroup's turn, off the softmax's path. Without ALiBi it has no state and its calls compile to nothing.
#pragma once

#include "kernels/kernel_params.hpp"
#include "kernels/rtc_std.hpp"
#include "kernels/wgmma/wgmma_scheduler.cuh"

namespace evosdpa::detail::wgmma_sm90 {

template <int kBlockN, bool kOn>
struct AlibiTile {
  static constexpr bool kPreloads = false;
  __device__ AlibiTile(const KernelParams&, const Work&, int, int, float) {}
  template <bool kOnto>
  __device__ __forceinline__ void preload(float (&)[kBlockN / 2], int) const {}
};

template <int kBlockN>
struct AlibiTile<kBlockN, true> {
  static constexpr bool kPreloads = true;
  float slope;        // -slope / scale: the bias per key of distance in raw score units (supports(): scale != 0)
  float diagonal[2];  // the thread's rows' diagonals (row_lo, row_lo + 8) less its first column in a tile

  // Distances are whole numbers, exact in float up to 2^24 keys.
  __device__ AlibiTile(const KernelParams& p, const Work& w, int row_lo, int lane, float scale_log2)
      : slope(-p.alibi_slopes[w.batch * p.alibi_batch_stride + w.head] * 1.4426950408889634f / scale_log2) {
#pragma unroll
    for (int r = 0; r < 2; ++r)
      diagonal[r] = static_cast<float>(row_lo + 8 * r + w.causal_offset - 2 * (lane & 3));
  }

  // S's accumulators for the tile of keys key0 ..: element i (row g + 8 ((i >> 1) & 1), column
  // c = 8 (i >> 2) + (i & 1) past the thread's first) gets slope * |d - c|, d the row's diagonal less
  // the thread's first key. A tile wholly on one side of both rows' diagonals (all but the one or two
  // tiles a row's diagonal crosses) needs no |.|: slope * d - slope * c, one FFMA with the column as an
  // immediate; the others take an FADD and an FMUL with |.| per score. kOnto: added to what S holds (a
  // mask tensor's preload, whose -inf stays -inf), one FADD more per score.
  template <bool kOnto>
  __device__ __forceinline__ void preload(float (&s)[kBlockN / 2], int key0) const {
    const auto put = [&](int i, float bias) { s[i] = kOnto ? s[i] + bias : bias; };
    const float d[2] = {diagonal[0] - static_cast<float>(key0), diagonal[1] - static_cast<float>(key0)};
    const auto column = [](int i) { return static_cast<float>(8 * (i >> 2) + (i & 1)); };
    if (fminf(d[0], d[1]) >= kBlockN - 1 || fmaxf(d[0], d[1]) <= 0.f) {
      const float sign = d[0] > 0.f ? 1.f : -1.f;  // keys before the diagonals: +, after: -
      const float base[2] = {sign * slope * d[0], sign * slope * d[1]}, step = -sign * slope;
#pragma unroll
      for (int i = 0; i < kBlockN / 2; ++i) put(i, fmaf(step, column(i), base[(i >> 1) & 1]));
    } else {
#pragma unroll
      for (int i = 0; i < kBlockN / 2; ++i) put(i, slope * fabsf(d[(i >> 1) & 1] - column(i)));
    }
  }
};

}  // namespace evosdpa::detail::wgmma_sm90
