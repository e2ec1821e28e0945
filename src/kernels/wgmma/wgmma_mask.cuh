// A mask tensor's tile for a consumer warp (evosdpa.h, "Mask tensors"): the warp's 16 rows of S (its
// threads' rows g and g + 8) by kBlockN keys, copied from global memory into the warp's own shared-memory
// stage a tile ahead (cp.async, 16-byte chunks), then read by each thread at its positions of S into S's
// accumulators, to which S = Q.K^T adds. Without a mask (MaskKind::kNone) it has no state and its calls
// compile to nothing.
//
// Why a stage: each thread's 64 positions are pairs of columns in 16 column groups of two rows, so reading
// them straight from global memory is 32 loads per thread of which each warp-wide one touches 8 rows:
// 8 L1 wavefronts for 128 useful bytes, 2,048 per SM per 128 x 128 tile step on top of the wgmma
// operands' shared-memory traffic, which cost 1.6x at L = 4k (docs/perf-log.md v13.1). The stage moves
// the tile in whole 16-byte chunks, 4 rows or 2 per warp-wide copy, and its reads are conflict-free.
#pragma once

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"
#include "kernels/rtc_std.hpp"
#include "kernels/score_mods.cuh"
#include "kernels/wgmma/ptx.cuh"
#include "kernels/wgmma/wgmma_scheduler.cuh"

namespace evosdpa::detail::wgmma_sm90 {

// Bytes per mask element of a kind: a byte (kBool), the inputs' 16-bit type (kAdditive); 0 for none.
template <MaskKind kKind>
inline constexpr int kMaskElemBytes = kKind == MaskKind::kBool ? 1 : kKind == MaskKind::kAdditive ? 2 : 0;

template <typename T, int kBlockN, MaskKind kKind>
struct MaskTile {
  static constexpr int kWarpBytes = 0;
  static constexpr bool kPreloads = false;  // S = Q.K^T starts from zero
  __device__ MaskTile(uint32_t, int) {}
  __device__ __forceinline__ void load(const KernelParams&, const Work&, int, int, bool) {}
  __device__ __forceinline__ void preload(float (&)[kBlockN / 2], float, float, bool) const {}
};

template <typename T, int kBlockN, MaskKind kKind>
struct MaskTileOn {
  static constexpr bool kBool = kKind == MaskKind::kBool;
  static constexpr int kElem = kMaskElemBytes<kKind>;
  static constexpr int kRowBytes = kBlockN * kElem;  // one row of the tile: 128 or 256 bytes
  static constexpr int kChunks = kRowBytes / 16;     // its 16-byte chunks
  static constexpr int kWarpBytes = 16 * kRowBytes;  // the warp's 16 rows
  static constexpr bool kPreloads = true;            // S = Q.K^T adds to the mask (preload)
  static_assert(kChunks >= 8 && kChunks % 8 == 0, "the swizzle spreads 8 rows over 8 distinct chunks");
  uint32_t stage;  // the warp's stage (Smem::mask_stage)
  int lane;

  __device__ MaskTileOn(uint32_t stage_addr, int lane_id) : stage(stage_addr), lane(lane_id) {}

  // Byte b of the stage's row rho: 16-byte chunks XOR-swizzled by the row's low 3 bits, so that the 8
  // rows a warp-wide read touches (one chunk column each) fall in 8 distinct groups of 4 banks.
  static __device__ __forceinline__ uint32_t offset(int rho, int b) {
    return rho * kRowBytes + ((((b >> 4) ^ rho) & 7) | ((b >> 4) & ~7)) * 16 + (b & 15);
  }

  // Starts the copy of keys key0 .. key0 + kBlockN - 1 of the warp's rows warp_row0 .. + 15: lane l takes
  // chunk l % kChunks of rows l / kChunks + kStep i. A mask whose rows are one (one_row: mask_seq_stride
  // 0, a key mask) is copied once, as row 0: sixteen copies of the same bytes from every SM made a few L2 lines
  // the bottleneck (1.64x against 1.21x read through L1). Rows past the sequence and keys past its end
  // are zero-filled (never read: the causal/length masks cover them). supports(): the mask and its non-zero
  // strides are 16-byte aligned, so every chunk is.
  __device__ __forceinline__ void load(const KernelParams& p, const Work& w, int key0, int warp_row0, bool one_row) {
    constexpr int kStep = 32 / kChunks;  // rows per warp-wide copy
    const int x = lane % kChunks, r0 = lane / kChunks;
    const int rows = one_row ? 1 : 16;
    const int col = key0 + x * (16 / kElem);
    const int left = (w.len_k - col) * kElem;  // the row's bytes from the chunk on
    const int bytes = left < 0 ? 0 : left < 16 ? left : 16;
    const char* base = static_cast<const char*>(p.mask) +
                       (w.batch * p.mask_batch_stride + w.head * p.mask_head_stride) * kElem;
    const char* src = base + (static_cast<int64_t>(warp_row0 + r0) * p.mask_seq_stride + col) * kElem;
    const int64_t step = static_cast<int64_t>(kStep) * p.mask_seq_stride * kElem;
#pragma unroll
    for (int i = 0; i < kWarpBytes / 16 / 32; ++i, src += step) {
      const int rho = r0 + kStep * i;
      if (rho >= rows) break;
      const int n = warp_row0 + rho < w.len_q ? bytes : 0;
      cp_async_16(stage + offset(rho, 16 * x), n > 0 ? src : base, n);
    }
    cp_async_commit();
  }

  // S's accumulators before S = Q.K^T adds to them (wgmma's accumulate; the mask's work then runs before
  // the warpgroup's turn, off the softmax's path): at element i (row g + 8 ((i >> 1) & 1), column
  // 8 (i >> 2) + 2 (lane % 4) + (i & 1)) the bias in raw score units, bias * inv_scale (kAdditive), or 0
  // and `hidden` where the byte is 0 (kBool): -inf, or +inf for a negative scale, which the softmax
  // multiplies in first (scores_to_probs). Waits for the warp's copy; the next load may follow at once.
  // The swizzle is an XOR of the chunk bits (4..6) of the address with the row's, so each read is one XOR
  // with a constant of a per-row base and an immediate offset.
  __device__ __forceinline__ void preload(float (&s)[kBlockN / 2], float inv_scale, float hidden, bool one_row) const {
    cp_async_wait_all();
    __syncwarp();  // every lane's chunks, for every lane
    const int g = lane / 4, q = lane % 4;
    uint32_t row_base[2];  // the rows' bytes of column 2q, before the swizzle of its chunk
#pragma unroll
    for (int r = 0; r < 2; ++r) row_base[r] = stage + offset(one_row ? 0 : g + 8 * r, 2 * q * kElem);
#pragma unroll
    for (int i = 0; i < kBlockN / 2; i += 2) {
      const int b = (8 * (i >> 2)) * kElem;  // the pair's byte in the row, less 2 q kElem
      const uint32_t at = (row_base[(i >> 1) & 1] ^ (((b >> 4) & 7) << 4)) + (b & ~0x7f) + (b & 15);
      if constexpr (kBool) {
        const uint32_t v = ld_shared_u16(at);
        s[i] = (v & 0xffu) != 0 ? 0.f : hidden;
        s[i + 1] = (v & 0xff00u) != 0 ? 0.f : hidden;
      } else {
        const float2 bias = unpack2<T>(ld_shared_u32(at));
        s[i] = bias.x * inv_scale;
        s[i + 1] = bias.y * inv_scale;
      }
    }
    __syncwarp();  // every lane has read before the next copy overwrites the stage
  }
};

template <typename T, int kBlockN>
struct MaskTile<T, kBlockN, MaskKind::kBool> : MaskTileOn<T, kBlockN, MaskKind::kBool> {
  using MaskTileOn<T, kBlockN, MaskKind::kBool>::MaskTileOn;
};
template <typename T, int kBlockN>
struct MaskTile<T, kBlockN, MaskKind::kAdditive> : MaskTileOn<T, kBlockN, MaskKind::kAdditive> {
  using MaskTileOn<T, kBlockN, MaskKind::kAdditive>::MaskTileOn;
};

}  // namespace evosdpa::detail::wgmma_sm90
