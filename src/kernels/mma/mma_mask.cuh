// A mask tensor's elements for one m-tile of S in mma_sm80 (evosdpa.h, "Mask tensors"): the thread's
// element pairs (keys key0 + 8 n + 2 (lane % 4), + 1 of its rows lane / 4 and + 8), read from global
// memory before Q.K^T so that their latency hides under the mma, and applied after the scale
// (scale_and_mask_mods). Without a mask (MaskKind::kNone) it has no state and compiles to nothing.
// supports(): padded batches only, the pointer and strides aligned to a pair of elements.
#pragma once

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"
#include "kernels/rtc_std.hpp"
#include "kernels/score_mods.cuh"

namespace evosdpa::detail::mma_sm80 {

template <typename T, int BN, MaskKind kKind, bool kOn = kKind != MaskKind::kNone>
struct MaskFragment {
  __device__ __forceinline__ void load(const KernelParams&, int, int, int, int, int) {}
};

template <typename T, int BN, MaskKind kKind>
struct MaskFragment<T, BN, kKind, true> {
  static constexpr bool kBool = kKind == MaskKind::kBool;
  static constexpr int kElem = kBool ? 1 : 2;  // bytes, or the inputs' 16-bit type
  uint32_t pairs[BN / 8][2];  // per key group n and row r: the pair's two elements (two bytes, or a T pair)

  // Pairs past the sequence's keys or rows read nothing (they are masked by the kernel's own bounds); a
  // last odd key is read alone, so that nothing past the tensor's last element is touched.
  __device__ __forceinline__ void load(const KernelParams& p, int b, int h, int row0, int key0, int lane) {
    const char* head = static_cast<const char*>(p.mask) + (b * p.mask_batch_stride + h * p.mask_head_stride) * kElem;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + (lane >> 2) + 8 * r;
      const char* line = head + static_cast<int64_t>(row) * p.mask_seq_stride * kElem;
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        const int key = key0 + 8 * n + 2 * (lane & 3);
        const char* at = line + static_cast<int64_t>(key) * kElem;
        uint32_t v = 0;
        if (row < p.seqlen_q && key + 1 < p.seqlen_k)
          v = kBool ? __ldg(reinterpret_cast<const unsigned short*>(at)) : __ldg(reinterpret_cast<const unsigned*>(at));
        else if (row < p.seqlen_q && key < p.seqlen_k)
          v = kBool ? static_cast<uint32_t>(__ldg(reinterpret_cast<const unsigned char*>(at)))
                    : static_cast<uint32_t>(__ldg(reinterpret_cast<const unsigned short*>(at)));
        pairs[n][r] = v;
      }
    }
  }

  // Element e (row e >> 1, key + (e & 1)) of group n applied to the scaled score x (log2 domain): a
  // hidden key's score to -inf, or the bias (times log2(e)) added.
  __device__ __forceinline__ float apply(float x, int n, int e) const {
    const uint32_t v = pairs[n][e >> 1];
    if constexpr (kBool) {
      return ((v >> (8 * (e & 1))) & 0xffu) != 0 ? x : -INFINITY;
    } else {
      const float2 bias = unpack2<T>(v);
      return x + (e & 1 ? bias.y : bias.x) * 1.4426950408889634f;
    }
  }
};

}  // namespace evosdpa::detail::mma_sm80
