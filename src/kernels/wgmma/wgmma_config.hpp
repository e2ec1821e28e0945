// Tile configuration of the Hopper family (wgmma + TMA + warp specialisation). Plain C++ so that host-side
// supports() reads the same table the kernels are compiled from.
#pragma once

#include "evosdpa/evosdpa.h"

namespace evosdpa::detail::wgmma_sm90 {

// Which calls a row of the table serves.
enum class MaskUse : int { kAny, kNonCausal };

// How O leaves the kernel (wgmma_epilogue.cuh).
enum class OStore : int {
  kDirect,  // 4-byte global stores from the accumulator registers
  kTma,     // through the item's Q buffer and a TMA store; needs a second Q buffer, or the next item's
            // Q load would wait for this item's store
};

struct TileConfig {
  int head_dim;       // D: columns of Q, K, V and O; stored as D/64 blocks of 64 columns (one 128-byte
                      // swizzle atom per row), the widest box a 128B-swizzled TMA load takes
  MaskUse use;        // kNonCausal: a tile too wide for the causal diagonal (half of it would be masked)
  int block_n;        // keys per K/V tile: the N of S = Q.K^T (one m64nNk16 wgmma per 16 columns of D)
  int stages;         // depth of the K/V ring the producer fills ahead of the consumers
  int q_buffers;      // Q tiles in shared memory: with 2, the next item's Q loads while this one runs
                      // (its DRAM latency is otherwise exposed once per item)
  int consumers;      // consumer warpgroups, 64 query rows each (wgmma M = 64), taking turns at the
                      // tensor cores; 3 where the softmax is as long as the GEMMs (D = 64)
  int producer_regs;  // registers per thread after setmaxnreg: the producer warpgroup gives its share
  int consumer_regs;  //   to the consumers (the register file holds 64K)
  OStore o_store;     // the epilogue

  static constexpr int kElemBytes = 2;  // fp16 / bf16

  constexpr int block_m() const { return 64 * consumers; }       // query rows per work item
  constexpr int threads() const { return 128 * (1 + consumers); }  // one producer warpgroup issuing TMA
  constexpr int d_blocks() const { return head_dim / 64; }
  constexpr int q_bytes() const { return block_m() * head_dim * kElemBytes; }
  constexpr int kv_tile_bytes() const { return block_n * head_dim * kElemBytes; }
  // The Q ring, then the K ring, then the V ring (every tile a multiple of 1024 bytes, the swizzle's
  // period), then the mbarriers (each ring's full and empty ones); plus 1024 bytes to align the base.
  constexpr int barrier_offset() const { return q_buffers * q_bytes() + 2 * stages * kv_tile_bytes(); }
  constexpr int smem_bytes() const { return 1024 + barrier_offset() + 8 * (2 * q_buffers + 4 * stages); }
  constexpr bool serves(bool causal) const { return use == MaskUse::kAny || !causal; }
};

// The first row that serves a call is taken (config_index).
//  - D = 64: three consumers (192 rows): per 128-key tile a warpgroup's GEMMs take about as long as its
//    softmax (16K exponentials), so a third warpgroup keeps the tensor cores busy (FlashAttention-3's
//    choice for this head size).
//  - D = 128 non-causal: 176-key tiles, fewer softmax rounds per key; causal keeps 128 (the diagonal
//    tile's masked half grows with the width).
// Registers: 2 consumers x 240 + 24, 3 x 160 + 32 (x 128 threads <= 64K).
inline constexpr TileConfig kConfigs[] = {
    {64, MaskUse::kAny, 128, 2, 2, 3, 32, 160, OStore::kTma},
    {128, MaskUse::kNonCausal, 176, 2, 1, 2, 24, 240, OStore::kDirect},
    {128, MaskUse::kAny, 128, 2, 2, 2, 24, 240, OStore::kTma},
};
inline constexpr int kConfigCount = sizeof(kConfigs) / sizeof(kConfigs[0]);

constexpr int config_index(int head_dim, bool causal) {
  for (int i = 0; i < kConfigCount; ++i)
    if (kConfigs[i].head_dim == head_dim && kConfigs[i].serves(causal)) return i;
  return -1;
}

constexpr bool valid(const TileConfig& c) {
  return c.head_dim % 64 == 0 && c.head_dim >= 64 && c.head_dim <= 256 &&  // whole 64-column blocks; O <= 128 regs
         c.block_n % 16 == 0 && c.block_n >= 16 && c.block_n <= 256 &&    // wgmma N and TMA box rows <= 256
         c.stages >= 2 && c.q_buffers >= 1 && c.q_buffers <= 2 &&
         (c.o_store == OStore::kDirect || c.q_buffers == 2) && c.consumers >= 2 && c.consumers <= 3 &&          // pingpong needs two; 4 x 128 threads max
         c.producer_regs >= 24 && c.consumer_regs <= 256 &&                 // setmaxnreg's range
         c.producer_regs % 8 == 0 && c.consumer_regs % 8 == 0 &&            // setmaxnreg's granularity
         128 * (c.producer_regs + c.consumers * c.consumer_regs) <= 65536 &&  // the register file
         c.kv_tile_bytes() % 1024 == 0 && c.q_bytes() % 1024 == 0 &&       // tiles stay 1024-byte aligned
         c.smem_bytes() <= 227 * 1024;                                       // sm_90's per-block opt-in limit
}

constexpr bool all_valid() {
  for (const TileConfig& c : kConfigs)
    if (!valid(c)) return false;
  return true;
}
static_assert(all_valid(), "invalid wgmma_sm90 tile configuration");
static_assert(config_index(64, true) >= 0 && config_index(128, true) >= 0, "every head size serves causal calls");
// Token indices are int in the kernel (TMA coordinates are signed 32-bit): key0 + block_n and
// q0 + block_m (each <= 256) must stay below 2^31 for any length validation admits.
static_assert(EVOSDPA_MAX_SEQLEN + 256 + 256 < 2147483647LL, "int token arithmetic overflows");

}  // namespace evosdpa::detail::wgmma_sm90
