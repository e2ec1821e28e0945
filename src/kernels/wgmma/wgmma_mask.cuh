// A mask tensor's tile for a consumer warpgroup (evosdpa.h, "Mask tensors"): its 64 rows of S by kBlockN
// keys, loaded by TMA into the warpgroup's own shared-memory stage by a thread of the producer warpgroup
// (load_masks, wgmma_kernel.cuh) as soon as the warpgroup has read the previous tile, then read by each
// thread at its positions of S into S's accumulators, to which S = Q.K^T adds (preload), or with a softcap
// onto the capped scores (apply). Without a mask (MaskKind::kNone) it has no state and its calls compile
// to nothing.
//
// Why a stage: each thread's 64 positions are pairs of columns in 16 column groups of two rows, so reading
// them straight from global memory is 32 loads per thread of which each warp-wide one touches 8 rows:
// 8 L1 wavefronts for 128 useful bytes, which cost 1.6x at L = 4k (docs/perf-log.md v13.1). Why TMA and
// ldmatrix: with the stage filled by the warp's own cp.async copies and read pair by pair, the mask's
// cost was its instructions (~300 per warp per tile for an fp16 bias, v13.1: the copies' addresses, 32
// shared loads, conversions, a multiply by 1/scale each); TMA moves the tile in two instructions, and an
// 8x8 ldmatrix matrix is exactly a thread's pairs of 16-bit elements (8 loads instead of 32). Why a
// loader thread: issued by lane 0 of each consumer warp, the loads and the proxy fence before them took
// 6% of an additive mask's time and 11% of a key mask's (whose fence waited for the warp's shared loads),
// on the consumers' path (ncu, H200, (4,16,4096,128) fp16, docs/perf-log.md v13.22).
#pragma once

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"
#include "kernels/rtc_std.hpp"
#include "kernels/score_mods.cuh"
#include "kernels/wgmma/ptx.cuh"

namespace evosdpa::detail::wgmma_sm90 {

// Bytes per mask element of a kind: a byte (kBool), the inputs' 16-bit type (kAdditive); 0 for none.
template <MaskKind kKind>
inline constexpr int kMaskElemBytes = kKind == MaskKind::kBool ? 1 : kKind == MaskKind::kAdditive ? 2 : 0;

// The map a MaskMap parameter holds (cu_tensor_map.hpp), nullptr for the kernels without a mask tensor.
template <bool kOn>
__device__ __forceinline__ const CUtensorMap* map_of(const MaskMap<kOn>& m) {
  if constexpr (kOn)
    return &m.map;
  else
    return nullptr;
}

// kAfterCap (a softcap among the score modifiers): the mask goes onto the capped scores (apply) instead
// of into S before Q.K^T (preload), where the cap would bend a bias and turn a hidden key's -inf into -c.
template <typename T, int kBlockN, MaskKind kKind, bool kAfterCap = false>
struct MaskTile {
  static constexpr int kStageBytes = 0;
  static constexpr bool kPreloads = false;  // S = Q.K^T starts from zero
  static constexpr bool kApplies = false;   // nothing to apply to the capped scores
  __device__ MaskTile(uint32_t, uint32_t, uint32_t, int) {}
  __device__ __forceinline__ void preload(float (&)[kBlockN / 2], float, float, bool) {}
  template <int N>
  __device__ __forceinline__ void apply(float (&)[N], bool) {}
};

template <typename T, int kBlockN, MaskKind kKind, bool kAfterCap>
struct MaskTileOn {
  static constexpr bool kBool = kKind == MaskKind::kBool;
  static constexpr int kElem = kMaskElemBytes<kKind>;
  static constexpr int kRows = 64;                   // a consumer warpgroup's rows
  static constexpr int kBoxKeys = 128 / kElem;       // keys per TMA box: one 128-byte swizzle span per row
  static constexpr int kBoxes = kBlockN / kBoxKeys;  // boxes per tile: 1 (bytes) or 2 (16-bit elements)
  static constexpr int kBoxBytes = kRows * 128;      // a box: the warpgroup's 64 rows of 128 bytes
  static constexpr int kWarpBytes = 16 * 128;        // a consumer warp's 16 rows of a box
  static constexpr int kStageBytes = kBoxes * kBoxBytes;
  static constexpr bool kPreloads = !kAfterCap;  // S = Q.K^T adds to the mask (preload)
  static constexpr bool kApplies = kAfterCap;    // the mask goes onto the capped scores (apply)
  static_assert(kBlockN % kBoxKeys == 0 && kBoxBytes % 1024 == 0, "whole boxes, 1024-byte aligned");
  uint32_t stage;      // the warpgroup's stage (Smem::mask_stage), 1024-byte aligned
  uint32_t warp_rows;  // the offset of the warp's 16 rows in it
  uint32_t full;       // the stage's mbarriers: its load's completion (Smem::mask_full)
  uint32_t empty;      //   and the warpgroup's reads (Smem::mask_empty, 128 arrivals)
  int lane;
  uint32_t phase = 0;  // of the next load's completion

  // stage: the warpgroup's; thread: the thread's index in the warpgroup.
  __device__ MaskTileOn(uint32_t stage_addr, uint32_t full_bar, uint32_t empty_bar, int thread)
      : stage(stage_addr), warp_rows(thread / 32 * kWarpBytes), full(full_bar), empty(empty_bar), lane(thread % 32) {}

  // Byte b of row rho of a warp's rows: box b / 128, within it TMA's 128B swizzle (the 16-byte chunks of
  // row rho XOR-ed with rho's low 3 bits; a warp's rows start at a multiple of 8 rows), so that the 8 rows a
  // warp-wide read touches (one chunk column each) fall in 8 distinct groups of 4 banks.
  static __device__ __forceinline__ uint32_t offset(int rho, int b) {
    return (b >> 7) * kBoxBytes + rho * 128 + ((((b >> 4) ^ rho) & 7) << 4) + (b & 15);
  }

  // The load of keys key0 .. key0 + kBlockN - 1 of the warpgroup's rows row0 .. + 63 into its stage dst,
  // completing on `full_bar` (the loader thread, once the warpgroup has read the previous tile). A mask
  // whose rows are one (one_row: mask_seq_stride 0, a key mask) loads that row alone (its map's boxes are
  // one row high), into row 0. Keys and rows past the tensor read as zeros; keys past a shorter sequence
  // and rows past it are masked or dropped later (the causal/length masks go after the bias). No proxy
  // fence here: the readers fence before their arrivals on the empty mbarrier (read), which the loader
  // waits for. head, batch: the item's.
  static __device__ __forceinline__ void load(const CUtensorMap* map, uint32_t dst, uint32_t full_bar,
                                              const KernelParams& p, int head, int batch, int key0, int row0,
                                              bool one_row) {
    const int h = p.mask_head_stride != 0 ? head : 0;  // a broadcast dimension has size 1 in the map
    const int b = p.mask_batch_stride != 0 ? batch : 0;
    mbar_expect_tx(full_bar, one_row ? kBoxes * 128 : kStageBytes);
#pragma unroll
    for (int box = 0; box < kBoxes; ++box)
      tma_load(dst + box * kBoxBytes, map, full_bar, key0 + box * kBoxKeys, one_row ? 0 : row0, h, b);
  }

  // Waits for the warpgroup's load and calls f(i, element) for the thread's first N of S's accumulators,
  // element i at row g + 8 ((i >> 1) & 1), column 8 (i >> 2) + 2 (lane % 4) + (i & 1) (N < kBlockN / 2: the
  // first keys of a half tile): the byte, nonzero where the key is seen (kBool), or the bias as a float
  // (kAdditive). Then the thread's arrival on `empty`: once all 128 have read, the next load may follow.
  template <int N, typename F>
  __device__ __forceinline__ void read(bool one_row, F&& f) {
    static_assert(N % 8 == 0 && N <= kBlockN / 2, "whole 8-key groups of the tile");
    mbar_wait(full, phase);
    phase ^= 1;
    const int g = lane / 4, q = lane % 4;
    const uint32_t base = stage + (one_row ? 0u : warp_rows);  // a key mask's one row: row 0, every warp's
    if constexpr (kBool) {
      uint32_t row_base[2];  // the rows' bytes of column 2q, before the swizzle of its chunk
#pragma unroll
      for (int r = 0; r < 2; ++r) row_base[r] = base + offset(one_row ? 0 : g + 8 * r, 2 * q);
#pragma unroll
      for (int i = 0; i < N; i += 2) {
        const int b = 8 * (i >> 2);  // the pair's byte in the row, less 2q: chunk bits XOR-ed, box added
        const uint32_t at = (row_base[(i >> 1) & 1] ^ (((b >> 4) & 7) << 4)) + (b >> 7) * kBoxBytes + (b & 15);
        const uint32_t v = ld_shared_u16(at);
        f(i, v & 0xffu);
        f(i + 1, v & 0xff00u);
      }
    } else {
      // ldmatrix x4 number n: matrix k (lanes 8k .. 8k + 7 give its rows' addresses) is the 8 x 8 block
      // of rows 8 (k & 1) .. + 7 and keys 8 c .. + 7, c = 2n + (k >> 1): the thread's elements
      // 8n + 2k, + 1. Row rho's chunk c sits at chunk (c & 7) ^ (rho & 7) of box c >> 3; with
      // c & 7 = 2 (n & 3) | (k >> 1), a per-lane base and one XOR with a constant per load.
      const int k = lane >> 3, rho = one_row ? 0 : 8 * (k & 1) + (lane & 7);
      const uint32_t lane_base = base + rho * 128 + ((((k >> 1) ^ rho) & 7) << 4);
#pragma unroll
      for (int n = 0; n < N / 8; ++n) {
        uint32_t v[4];
        ldmatrix_x4(v, (lane_base ^ ((2 * (n & 3)) << 4)) + (n >> 2) * kBoxBytes);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 bias = unpack2<T>(v[j]);
          f(8 * n + 2 * j, bias.x);
          f(8 * n + 2 * j + 1, bias.y);
        }
      }
    }
    // The loader's next TMA write (async proxy) must follow these reads (generic proxy): the proxy fence
    // first (it also waits for them), then the arrival. Without it, with the reads' values used later
    // (docs/perf-log.md v13.22, fin4), the next tile overwrote the stage before they were done.
    fence_async_shared();
    mbar_arrive(empty);
  }
  // S's accumulators before S = Q.K^T adds to them (wgmma's accumulate; the mask's work then runs before
  // the warpgroup's turn, off the softmax's path): the bias in raw score units, bias * inv_scale
  // (kAdditive), or 0 and `hidden` where the byte is 0 (kBool): -inf, or +inf for a negative scale, which
  // the softmax multiplies in first (scores_to_probs).
  __device__ __forceinline__ void preload(float (&s)[kBlockN / 2], float inv_scale, float hidden, bool one_row) {
    if constexpr (kPreloads) {
      if constexpr (kBool)
        read<kBlockN / 2>(one_row, [&](int i, uint32_t seen) { s[i] = seen != 0 ? 0.f : hidden; });
      else
        read<kBlockN / 2>(one_row, [&](int i, float bias) { s[i] = bias * inv_scale; });
    }
  }

  // The capped scores (in the log2 domain: softcap_log2) with the mask on them: the bias times log2(e)
  // added, or -inf where the byte is 0. On the softmax's path (loaded while the previous tile ran).
  template <int N>
  __device__ __forceinline__ void apply(float (&s)[N], bool one_row) {
    if constexpr (kApplies) {
      if constexpr (kBool)
        read<N>(one_row, [&](int i, uint32_t seen) { s[i] = seen != 0 ? s[i] : -INFINITY; });
      else
        read<N>(one_row, [&](int i, float bias) { s[i] = fmaf(bias, 1.4426950408889634f, s[i]); });
    }
  }
};

template <typename T, int kBlockN, bool kAfterCap>
struct MaskTile<T, kBlockN, MaskKind::kBool, kAfterCap> : MaskTileOn<T, kBlockN, MaskKind::kBool, kAfterCap> {
  using MaskTileOn<T, kBlockN, MaskKind::kBool, kAfterCap>::MaskTileOn;
};
template <typename T, int kBlockN, bool kAfterCap>
struct MaskTile<T, kBlockN, MaskKind::kAdditive, kAfterCap> : MaskTileOn<T, kBlockN, MaskKind::kAdditive, kAfterCap> {
  using MaskTileOn<T, kBlockN, MaskKind::kAdditive, kAfterCap>::MaskTileOn;
};

}  // namespace evosdpa::detail::wgmma_sm90
