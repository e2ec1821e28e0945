// A mask tensor's tile in a consumer thread's registers (evosdpa.h, "Mask tensors"): the elements at the
// thread's positions of S (two rows, kBlockN / 8 column pairs each), loaded from global memory while
// S = Q.K^T runs and applied to S before the softmax. Without a mask (MaskKind::kNone) it has no
// registers and its calls compile to nothing.
#pragma once

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"
#include "kernels/rtc_std.hpp"
#include "kernels/score_mods.cuh"
#include "kernels/wgmma/wgmma_scheduler.cuh"

namespace evosdpa::detail::wgmma_sm90 {

template <typename T, int kBlockN, MaskKind kKind>
struct MaskTile {
  __device__ __forceinline__ void load(const KernelParams&, const Work&, int, int, int) {}
  __device__ __forceinline__ void apply(float (&)[kBlockN / 2], float) const {}
};

// With a mask: pair[2 * jj + r] holds the two elements of the thread's row row_lo + 8 r at columns
// key0 + 8 jj + 2 (lane % 4) + {0, 1} (the accumulator layout of an m64nN wgmma, wgmma_kernel.cuh), a
// 16-bit pair of bytes (kBool) or a 32-bit pair of T (kAdditive), read as one aligned load (supports():
// the mask's pointer and strides are multiples of two elements, and the columns are even). 32 registers
// at kBlockN = 128, either kind.
template <bool kBool>
struct MaskBits {  // an element and a pair of T (kAdditive)
  using Elem = uint16_t;
  using Pair = uint32_t;
};
template <>
struct MaskBits<true> {  // of bytes (kBool)
  using Elem = uint8_t;
  using Pair = uint16_t;
};

template <typename T, int kBlockN, MaskKind kKind>
struct MaskTileOn {
  static constexpr bool kBool = kKind == MaskKind::kBool;
  using Elem = typename MaskBits<kBool>::Elem;
  using Pair = typename MaskBits<kBool>::Pair;
  // What a row past the sequence or a key past its end holds: visible, no bias (mask_tile masks the keys;
  // the rows are never stored).
  static constexpr Pair kNeutral = kBool ? Pair(0x0101) : Pair(0);
  Pair pair[kBlockN / 4];

  // Reads the tile of keys key0 .. key0 + kBlockN - 1 for the thread's rows: read-only through the
  // non-coherent path (the mask is an input; broadcast rows and heads hit in L1). Rows past the
  // sequence and keys past its end are not read; a pair that straddles the end reads its first element.
  __device__ __forceinline__ void load(const KernelParams& p, const Work& w, int key0, int row_lo, int lane) {
    const Elem* base = static_cast<const Elem*>(p.mask) + w.batch * p.mask_batch_stride + w.head * p.mask_head_stride +
                       key0 + 2 * (lane & 3);
    const bool full = key0 + kBlockN <= w.len_k;  // no key of the tile past the end (warp-uniform)
    const int cols = w.len_k - key0 - 2 * (lane & 3);  // keys from the thread's first column to the end
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row_lo + 8 * r;
      const Elem* at = base + static_cast<int64_t>(row) * p.mask_seq_stride;
      if (row >= w.len_q) {
#pragma unroll
        for (int jj = 0; jj < kBlockN / 8; ++jj) pair[2 * jj + r] = kNeutral;
      } else if (full) {
#pragma unroll
        for (int jj = 0; jj < kBlockN / 8; ++jj) pair[2 * jj + r] = __ldg(reinterpret_cast<const Pair*>(at + 8 * jj));
      } else {
#pragma unroll
        for (int jj = 0; jj < kBlockN / 8; ++jj) {
          const int c = 8 * jj;
          if (c + 1 < cols)
            pair[2 * jj + r] = __ldg(reinterpret_cast<const Pair*>(at + c));
          else if (c < cols)  // the first element only; the second is past the end, which mask_tile masks
            pair[2 * jj + r] = static_cast<Pair>(__ldg(at + c));
          else
            pair[2 * jj + r] = kNeutral;
        }
      }
    }
  }

  // Element i of the thread's S (row (i >> 1) & 1, column pair i >> 2, element i & 1): -inf where the
  // byte is 0 (kBool), or plus bias * bias_scale (kAdditive; bias_scale turns the bias into S's units:
  // 1 / scale for raw scores whose scale is applied in the exponent, log2(e) for scores in the log2
  // domain).
  __device__ __forceinline__ void apply(float (&s)[kBlockN / 2], float bias_scale) const {
#pragma unroll
    for (int i = 0; i < kBlockN / 2; i += 2) {
      const Pair v = pair[2 * (i >> 2) + ((i >> 1) & 1)];
      if constexpr (kBool) {
        if ((v & 0xffu) == 0) s[i] = -INFINITY;
        if ((v & 0xff00u) == 0) s[i + 1] = -INFINITY;
      } else {
        const float2 bias = unpack2<T>(v);
        s[i] = fmaf(bias.x, bias_scale, s[i]);
        s[i + 1] = fmaf(bias.y, bias_scale, s[i + 1]);
      }
    }
  }
};

template <typename T, int kBlockN>
struct MaskTile<T, kBlockN, MaskKind::kBool> : MaskTileOn<T, kBlockN, MaskKind::kBool> {};
template <typename T, int kBlockN>
struct MaskTile<T, kBlockN, MaskKind::kAdditive> : MaskTileOn<T, kBlockN, MaskKind::kAdditive> {};

}  // namespace evosdpa::detail::wgmma_sm90
