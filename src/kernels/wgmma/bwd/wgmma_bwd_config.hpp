// Tile table of wgmma_sm90's backward pass (FlashAttention-3's layout of the work: a CTA per block of
// keys, the query tiles streamed past it by TMA). Plain C++ so that supports() reads the table the
// kernels are compiled from.
#pragma once

#include "kernels/rtc_std.hpp"

#include "evosdpa/evosdpa.h"

namespace evosdpa::detail::wgmma_sm90 {

struct BwdTile {
  int head_dim;  // D
  // Queries per streamed tile: the N of S^T = K Q^T and dP^T = V dO^T, the K of dV += P^T dO and
  // dK += dS^T Q. Registers decide: a consumer thread holds dK and dV (D/2 floats each) and S^T and dP^T
  // (tile_m / 2 each), so D = 128 takes 64 (224 with dQ's 32) and D = 64 takes 128.
  int tile_m;
  int block_n;        // keys per CTA: 64 per consumer warpgroup (wgmma's M)
  int stages;         // Q / dO tiles in flight (the producer runs that far ahead)
  int producer_regs;  // setmaxnreg of the producer warpgroup (a warp issues the loads and stages lse and D,
                      // a thread dQ's reduce-adds; at 24 and 32 they spilled 4-8 bytes)
  int consumer_regs;  // and of each consumer warpgroup

  constexpr int consumers() const { return block_n / 64; }
  constexpr int threads() const { return 128 * (1 + consumers()); }
  // A tile of `rows` rows of D 16-bit elements: D / 64 blocks of [rows x 128 bytes] (TMA's 128-byte
  // swizzle atom), 1024-byte aligned when rows is a multiple of 8.
  constexpr int tile_bytes(int rows) const { return rows * head_dim * 2; }
  // dS^T of one tile, [block_n keys][tile_m queries]: tile_m / 64 blocks of [block_n x 128 bytes].
  constexpr int ds_bytes() const { return block_n * tile_m * 2; }
  // A tile's dQ in float32, [tile_m x D] as D / 32 boxes of [tile_m x 128 bytes], 128B-swizzled: what a
  // TMA reduce-add adds to the workspace's sums.
  constexpr int dq_bytes() const { return tile_m * head_dim * 4; }
  // K, V; the Q and dO rings; two dS buffers (a consumer writes tile t + 1's while the other may still
  // read tile t's in its dQ product); dQ; lse and D per stage; the mbarriers (K/V full, per stage Q full
  // and empty, dQ full and empty).
  constexpr int v_offset() const { return tile_bytes(block_n); }
  constexpr int q_offset() const { return 2 * tile_bytes(block_n); }
  constexpr int do_offset() const { return q_offset() + stages * tile_bytes(tile_m); }
  constexpr int ds_offset() const { return do_offset() + stages * tile_bytes(tile_m); }
  constexpr int dq_offset() const { return ds_offset() + 2 * ds_bytes(); }
  constexpr int lse_offset() const { return dq_offset() + dq_bytes(); }
  constexpr int delta_offset() const { return lse_offset() + stages * tile_m * 4; }
  constexpr int barrier_offset() const { return delta_offset() + stages * tile_m * 4; }
  // Plus 1024 bytes for aligning the dynamic base to the swizzle's 1024-byte period.
  constexpr int smem_bytes() const { return barrier_offset() + 8 * (3 + 2 * stages) + 1024; }
};

// One row per head dim. dQ's product (wgmma_bwd_kernel.cuh) splits [tile_m x D] over the two consumers:
// by queries when tile_m = 128 (each its 64 rows, N = D = 64), by columns when tile_m = 64 (each N = 64
// of D = 128).
inline constexpr BwdTile kBwdTiles[] = {
    {64, 128, 128, 2, 40, 232},
    {128, 64, 128, 2, 40, 232},
};
inline constexpr int kBwdTileCount = sizeof(kBwdTiles) / sizeof(kBwdTiles[0]);

constexpr bool bwd_tile_valid(const BwdTile& c) {
  return (c.head_dim == 64 || c.head_dim == 128) && c.block_n == 128 && c.consumers() == 2 &&
         // dQ's split (above) needs 64-wide pieces
         ((c.tile_m == 128 && c.head_dim == 64) || (c.tile_m == 64 && c.head_dim == 128)) && c.stages >= 2 &&
         // setmaxnreg's rules: multiples of 8 in [24, 256], within the 64K registers of the SM
         c.producer_regs % 8 == 0 && c.consumer_regs % 8 == 0 && c.producer_regs >= 24 && c.consumer_regs <= 256 &&
         // within what the CTA holds at launch (65536 / threads, in 8s): setmaxnreg.inc past it never returns
         128 * (c.producer_regs + c.consumers() * c.consumer_regs) <= c.threads() * (65536 / c.threads() / 8 * 8) &&
         c.smem_bytes() <= 227 * 1024 &&
         c.tile_bytes(c.tile_m) % 1024 == 0 && c.ds_bytes() % 1024 == 0 && c.dq_bytes() % 1024 == 0;
}

constexpr bool bwd_tiles_valid() {
  for (const BwdTile& c : kBwdTiles)
    if (!bwd_tile_valid(c)) return false;
  return true;
}
static_assert(bwd_tiles_valid(), "invalid wgmma_sm90 backward tile");

// The row of `head_dim`, or -1.
constexpr int bwd_tile_index(int head_dim) {
  for (int i = 0; i < kBwdTileCount; ++i)
    if (kBwdTiles[i].head_dim == head_dim) return i;
  return -1;
}

}  // namespace evosdpa::detail::wgmma_sm90
