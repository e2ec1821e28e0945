// Tile configuration of mma_sm80's backward pass (FlashAttention-2's algorithm on mma.sync m16n8k16).
// Plain C++ so that host-side support checks (shared memory, grid size, workspace) read the table the
// kernels are compiled from.
#pragma once

#include "kernels/rtc_std.hpp"

#include "evosdpa/evosdpa.h"

namespace evosdpa::detail::mma_sm80 {

// Threads per block of the elementwise passes (bwd_prepass.cuh), D / 8 per query row.
inline constexpr int kPrepassThreads = 128;

// Shared memory of sm_86 and sm_89 per block after the opt-in: every head dim needs a row within it.
inline constexpr int kSm8xSmemBytes = 99 * 1024;
// sm_90's opt-in: no row may ask for more.
inline constexpr int kMaxSmemBytes = 227 * 1024;

struct BwdConfig {
  int head_dim;  // D
  int min_arch;  // lowest compute capability (10 major + minor) selection gives the row; below it the
                 // kernel is not compiled
  // A block owns block_n keys and streams tiles of tile_m queries past them. Its warps are laid out
  // three ways, one per product, each warp owning a rectangle of it:
  int block_n;      // keys per block
  int tile_m;       // queries per streamed tile
  int warps;        // warps per block
  int sdp_warps_m;  // S and dP [tile_m x block_n]: warps along the queries (the rest along the keys)
  int kv_warps_n;   // dK and dV [block_n x D]: warps along the keys (the rest along D)
  int dq_warps_m;   // dQ [tile_m x D]: warps along the queries (the rest along D)
  // k-steps of 16 unrolled in the S/dP, dK/dV and dQ products' loops: unrolled, the next step's
  // ldmatrix overlaps this step's mma; registers decide (1 where more spills). dQ's product runs after
  // S and dP are stored as P and dS, when their 64 accumulator registers are free again.
  int sdp_unroll;
  int kv_unroll;
  int dq_unroll;

  constexpr int threads() const { return warps * 32; }
  // K and V tiles; double-buffered Q and dO tiles, lse and D; the P and dS tiles.
  constexpr int smem_bytes(int elem_bytes) const {
    return (2 * block_n * head_dim + 2 * 2 * tile_m * head_dim + 2 * tile_m * block_n) * elem_bytes +
           2 * 2 * tile_m * 4;
  }
};

// Rows in order of preference per head dim: selection takes the first that the device's compute
// capability and shared memory allow. FlashAttention-2's layouts (8 warps over 128 keys; 2 x 4 warps
// for S and dP, 4 x 2 for dK and dV): warp rectangles of 32 x 32 or more read 192-256 bytes of shared
// memory per mma, against 320 for the first version's 16 keys per warp (docs/perf-log.md v10.3).
// - D = 64, sm_90: 128-query tiles (FlashAttention-2's D = 64 tile, 161 KiB): -14% time against 64
//   (H100, B4 H32 L4096 fp16, FAST: 5,998 against 6,945 us).
// - D = 64 within sm_86/sm_89's 99 KiB: 64-query tiles, both loops unrolled (-6% against neither).
// - D = 128 at 128 keys needs 161 KiB and all 255 registers: sm_80-89's scalar dQ atomics push it into
//   a 4-8 byte spill (ptxas), so it is sm_90's; before, 64 keys and 32-query tiles in 4 warps.
// The sm_90 rows' unrolling (docs/perf-log.md v13.19; H200, fp16, FAST, us): dQ's product unrolled
// with P and dS stored by stmatrix, then S/dP by 2 (by 4 at D = 64 and 8 at D = 128 it spills):
// B4 H16 L4096 D128 6,841 -> 6,057-6,181 -> 5,846; B1 H16 L16384 D128 24,413 -> 22,349-22,417 -> 21,660;
// B4 H32 L4096 D64 6,750 -> 6,544-6,620 -> 6,258. With v13.20's leaner tile body (the mask's select
// code only on masked tiles), S/dP by 4 at D = 128 compiles without a spill: with v13.20's other changes,
// B4 H16 L4096 D128 5,493-5,626 against main's 5,842-5,845 (by 8 still spills; at D = 64 by 4 spills).
// dK/dV's product unrolled fully (by 4) at D = 128 once v13.21's leaner tile left the registers
// (H200, B4 H16 L4096 D128 fp16, us: FAST 5,424-5,435 against 5,502-5,515 rolled, DETERMINISTIC
// 6,207-6,278 against 6,500-6,529; by 2, 5,460-5,477 and 6,221-6,358). At D = 64, by 4 instead of 8
// was level in FAST mode and 0-2% slower in DETERMINISTIC mode.
inline constexpr BwdConfig kBwdConfigs[] = {
    {64, 90, 128, 128, 8, 2, 4, 4, 2, 8, 8},
    {64, 80, 128, 64, 8, 2, 4, 2, 4, 4, 1},
    {128, 90, 128, 64, 8, 2, 4, 2, 4, 4, 8},
    {128, 80, 64, 32, 4, 1, 2, 2, 1, 1, 1},
};
inline constexpr int kBwdConfigCount = sizeof(kBwdConfigs) / sizeof(kBwdConfigs[0]);

// Compile-time view of one row, for the kernels (a constexpr member function of a host struct is not
// callable from device code).
template <int kIndex>
struct BwdKernel {
  static constexpr BwdConfig kCfg = kBwdConfigs[kIndex];
  static constexpr int kD = kCfg.head_dim;
  static constexpr int kMinArch = kCfg.min_arch;
  static constexpr int kBN = kCfg.block_n;
  static constexpr int kTM = kCfg.tile_m;
  static constexpr int kWarps = kCfg.warps;
  static constexpr int kThreads = kCfg.threads();
  static constexpr int kSdpWarpsM = kCfg.sdp_warps_m;
  static constexpr int kKvWarpsN = kCfg.kv_warps_n;
  static constexpr int kDqWarpsM = kCfg.dq_warps_m;
  static constexpr int kSdpUnroll = kCfg.sdp_unroll;
  static constexpr int kKvUnroll = kCfg.kv_unroll;
  static constexpr int kDqUnroll = kCfg.dq_unroll;
};

// load_tile's rule: each thread copies one chunk column of rows a multiple of 8 apart, in whole rounds.
constexpr bool loads_tile(int threads, int rows, int head_dim) {
  const int chunks = head_dim / 8, step = threads / chunks;
  return threads % chunks == 0 && step % 8 == 0 && rows % step == 0;
}

// A warp rectangle of a product [rows x cols] split over `warps_rows` x the rest: whole 16-row
// m-tiles and 16-column pairs of n-tiles (one ldmatrix.x4 gives two).
constexpr bool splits(int rows, int cols, int warps, int warps_rows) {
  return warps_rows >= 1 && warps % warps_rows == 0 && rows % (16 * warps_rows) == 0 &&
         cols % (16 * (warps / warps_rows)) == 0;
}

constexpr bool bwd_valid(const BwdConfig& c) {
  return (c.head_dim == 64 || c.head_dim == 128) &&
         // P and dS tiles: rows of block_n 16-bit elements, 4 or 8+ chunks (the swizzle)
         (c.block_n == 32 || c.block_n % 64 == 0) && c.tile_m % 16 == 0 &&
         splits(c.tile_m, c.block_n, c.warps, c.sdp_warps_m) && splits(c.block_n, c.head_dim, c.warps, c.kv_warps_n) &&
         splits(c.tile_m, c.head_dim, c.warps, c.dq_warps_m) && loads_tile(c.threads(), c.block_n, c.head_dim) &&
         loads_tile(c.threads(), c.tile_m, c.head_dim) && c.threads() >= c.tile_m &&  // one thread per row loads lse and D
         c.sdp_unroll >= 1 && c.kv_unroll >= 1 && c.dq_unroll >= 1 && c.smem_bytes(2) <= kMaxSmemBytes;
}

// Whether a device of compute capability `arch` (10 major + minor) with `smem_bytes` per block runs the row.
constexpr bool bwd_row_runs(const BwdConfig& c, int arch, long long smem_bytes) {
  return arch >= c.min_arch && c.smem_bytes(2) <= smem_bytes;
}

// The first row of `head_dim` such a device runs, or -1.
constexpr int bwd_config_index(int head_dim, int arch = 90, long long smem_bytes = kMaxSmemBytes) {
  for (int i = 0; i < kBwdConfigCount; ++i)
    if (kBwdConfigs[i].head_dim == head_dim && bwd_row_runs(kBwdConfigs[i], arch, smem_bytes)) return i;
  return -1;
}

// The least shared memory a row of `head_dim` needs, or 0 when there is none.
constexpr int bwd_min_smem_bytes(int head_dim) {
  int least = 0;
  for (const BwdConfig& c : kBwdConfigs)
    if (c.head_dim == head_dim && (least == 0 || c.smem_bytes(2) < least)) least = c.smem_bytes(2);
  return least;
}

constexpr bool bwd_all_valid() {
  for (const BwdConfig& c : kBwdConfigs)
    if (!bwd_valid(c) || c.min_arch < 80) return false;
  return bwd_config_index(64, 80, kSm8xSmemBytes) >= 0 && bwd_config_index(128, 80, kSm8xSmemBytes) >= 0;
}
static_assert(bwd_all_valid(), "invalid mma_sm80 backward configuration");

// Token indices are ints: seqlen + block - 1 must fit.
static_assert(EVOSDPA_MAX_SEQLEN + 256 <= INT32_MAX, "EVOSDPA_MAX_SEQLEN plus a tile overflows int indices");

}  // namespace evosdpa::detail::mma_sm80
