// Tile configuration of the sm_80 tensor-core kernel family (mma.sync m16n8k16, ldmatrix, cp.async).
// Plain C++ so that host-side selection (shared-memory needs, grid size) reads the same table that the
// kernels are compiled from.
#pragma once

#include "kernels/rtc_std.hpp"

#include "evosdpa/evosdpa.h"
#include "kernels/tile_rows.hpp"

namespace evosdpa::detail::mma_sm80 {

// Bytes per element of the types the kernels are instantiated for (fp16, bf16; inst/). The kernel body
// is 16-bit throughout (mma m16n8k16, ldmatrix, 8-element chunks) and static_asserts it.
inline constexpr int kElemBytes = 2;

struct TileConfig {
  int head_dim;           // D: columns of Q, K, V and O
  int warps;              // warps per block
  int m_tiles;            // 16-row mma tiles of queries per warp; every K/V fragment read from shared
                          // memory feeds m_tiles mma instructions
  int block_n;            // keys per K/V tile streamed through shared memory
  int min_blocks_per_sm;  // __launch_bounds__ occupancy hint: caps registers at 64K / (threads * this)
  bool q_in_registers;    // keep the warp's Q fragments in registers for the whole K/V loop, rather
                          // than re-reading them from shared memory for every K tile
  bool small_grid;        // the variant for grids that would not fill the SMs with the default one

  constexpr int threads() const { return warps * 32; }
  constexpr int warp_rows() const { return 16 * m_tiles; }
  constexpr int block_m() const { return warps * warp_rows(); }  // query rows per block
  // Q tile + double-buffered K and V tiles of `elem_bytes`-byte elements.
  constexpr int smem_bytes(int elem_bytes = kElemBytes) const {
    return (block_m() * head_dim + 2 * 2 * block_n * head_dim) * elem_bytes;
  }
};

constexpr bool same_row(const TileConfig& a, const TileConfig& b) {
  return a.head_dim == b.head_dim && a.warps == b.warps && a.m_tiles == b.m_tiles && a.block_n == b.block_n &&
         a.min_blocks_per_sm == b.min_blocks_per_sm && a.q_in_registers == b.q_in_registers &&
         a.small_grid == b.small_grid;
}

// A tuned row replaces the hand-made row of the same bucket (head_dim, and default or small-grid
// variant): `evosdpa-tune --emit-table` writes one file per model, tuned/sm<cc>_<SMs>.inc, and lists it
// in tuned/index.inc.
using TunedRow = TunedRowOf<TileConfig>;

#ifdef EVOSDPA_TUNE_CANDIDATE
// evosdpa-tune compiles a candidate row (tune/candidate.cpp) as the whole table, with NVRTC.
inline constexpr TileConfig kHandRows[] = {EVOSDPA_TUNE_CANDIDATE};
inline constexpr TunedRow kTunedRows[] = {{0, 0, kHandRows[0]}};
#else
// Chosen by measurement on an H100, fp16, B=4 L=4096 (docs/perf-log.md, v6): every row is the fastest
// variant that compiles without spills. block_m is 128 for the default rows: 64 doubles K/V traffic from L2.
// - 4 warps of 32 rows (2 m-tiles), 2 blocks/SM: each K/V fragment read by ldmatrix feeds two mmas,
//   halving the shared-memory traffic that bounded 8 warps of 16 rows (D=128: 340 TFLOP/s against 312;
//   D=64: 303 against 276). D=128 keeps Q in shared memory to fit 255 registers.
// - small_grid rows: fewer query rows per block, so a problem of few (batch, head, 128-row) blocks, such
//   as B=1 H=8 L=512, spreads over more SMs (15.6 -> 9.9 us for that shape, CUDA-graph replay).
inline constexpr TileConfig kHandRows[] = {
    {64, 4, 2, 64, 2, true, false},
    {128, 4, 2, 64, 2, false, false},
    {64, 4, 1, 64, 2, true, true},
    {128, 4, 1, 64, 2, false, true},
};

inline constexpr TunedRow kTunedRows[] = {
    {0, 0, kHandRows[0]},  // no device has compute capability 0: keeps the array non-empty, never matches
#include "kernels/mma/tuned/index.inc"
};

#endif

// The rows compiled (tile_rows.hpp; one instantiation per row and dtype, inst/).
inline constexpr auto kRowList = collect_rows(kHandRows, kTunedRows, same_row);
inline constexpr int kConfigCount = kRowList.count;
inline constexpr RowTable<TileConfig, kConfigCount> kConfigs = fit_rows<kConfigCount>(kRowList);

inline constexpr int kHandCount = sizeof(kHandRows) / sizeof(kHandRows[0]);

// Rows compiled with the score modifiers (a sliding window, a softcap, ALiBi, a mask tensor:
// score_mods.cuh): the hand-made rows of 16-row warps, one per head dim. Each combination is an
// instantiation of its own (six per row and dtype); limiting them to these rows keeps the build's time
// and size down. Calls with modifiers take them whatever the grid (choose_config). Not the 32-row warps'
// rows: at their 255 registers the window+softcap, window and ALiBi kernels spilled 4 to 64 bytes
// (ptxas, CUDA 13.0).
constexpr bool score_mod_row(int i) { return i < kHandCount && kConfigs[i].m_tiles == 1; }
template <int kIndex>
inline constexpr bool kScoreModRow = score_mod_row(kIndex);

// Index of the head_dim's default (or small-grid) variant in kConfigs; -1 if there is none.
constexpr int config_index(int head_dim, bool small_grid) {
  for (int i = 0; i < kConfigCount; ++i)
    if (kConfigs[i].head_dim == head_dim && kConfigs[i].small_grid == small_grid) return i;
  return -1;
}

// Index in kConfigs of a row equal to c; -1 if none.
constexpr int row_index(const TileConfig& c) {
  for (int i = 0; i < kConfigCount; ++i)
    if (same_row(kConfigs[i], c)) return i;
  return -1;
}

// The bucket's row (head_dim, small_grid) on a GPU of compute capability cc (major * 10 + minor) with
// sm_count SMs: the row of `tuned` (kTunedRows, or a test's table) for this model where there is one, else
// the hand-made row.
template <int N>
constexpr int bucket_row(const TunedRow (&tuned)[N], int head_dim, bool small_grid, int cc, int sm_count) {
  for (const TunedRow& t : tuned)
    if (t.cc != 0 && t.cc == cc && t.sm_count == sm_count && t.config.head_dim == head_dim &&
        t.config.small_grid == small_grid)
      return row_index(t.config);
  return config_index(head_dim, small_grid);
}

// The variant that runs a problem: the default one, unless its grid would leave SMs idle and a
// small-grid variant exists; each from the GPU model's tuned table where it has one. -1 when the head_dim
// has no variant.
template <int N>
constexpr int choose_config_in(const TunedRow (&tuned)[N], int head_dim, long long batch_heads, long long seqlen_q,
                               int sm_count, int cc) {
  const int big = bucket_row(tuned, head_dim, false, cc, sm_count);
  if (big < 0) return -1;
  const int small = bucket_row(tuned, head_dim, true, cc, sm_count);
  const long long bm = kConfigs[big].block_m();
  const long long q_blocks = (seqlen_q + bm - 1) / bm;
  // q_blocks * batch_heads can pass 2^63 (batch * heads_q reaches 2^62): the product is formed only once
  // batch_heads < sm_count bounds it.
  const bool fills_sms = batch_heads >= sm_count || q_blocks * batch_heads >= sm_count;
  return small >= 0 && !fills_sms ? small : big;
}

constexpr int choose_config(int head_dim, long long batch_heads, long long seqlen_q, int sm_count, int cc,
                            bool score_mods = false) {
  if (score_mods) {
    for (int i = 0; i < kConfigCount; ++i)
      if (score_mod_row(i) && kConfigs[i].head_dim == head_dim) return i;
    return -1;
  }
  return choose_config_in(kTunedRows, head_dim, batch_heads, seqlen_q, sm_count, cc);
}

constexpr bool valid(const TileConfig& c) {
  return c.head_dim % 16 == 0 &&   // mma k-steps of 16 over D in Q.K^T, n-tile pairs in P.V
         c.block_n % 16 == 0 &&    // mma k-steps of 16 keys in P.V
         c.warps >= 1 && c.warps <= 16 && c.m_tiles >= 1 && c.m_tiles <= 4 &&
         // load_tile: each thread copies one 16-byte chunk column (head_dim / 8 chunks per row) of rows a
         // multiple of 8 apart, in whole rounds of the Q tile and of each K/V tile
         c.threads() % (c.head_dim / 8) == 0 && c.threads() >= c.head_dim / 8 &&
         (c.threads() / (c.head_dim / 8)) % 8 == 0 &&
         c.block_m() % (c.threads() / (c.head_dim / 8)) == 0 && c.block_n % (c.threads() / (c.head_dim / 8)) == 0 &&
         c.min_blocks_per_sm >= 1;
}

constexpr bool all_valid() {
  for (const TileConfig& c : kConfigs)
    if (!valid(c) || c.smem_bytes() > 99 * 1024) return false;
  return true;
}
static_assert(all_valid(), "invalid mma_sm80 tile configuration, or one over sm_86/sm_89's 99 KiB per block");
#ifndef EVOSDPA_TUNE_CANDIDATE
static_assert(config_index(64, false) >= 0 && config_index(128, false) >= 0, "64 and 128 need a default variant");
constexpr bool head_dims_instantiated() {  // inst/ has a file per dtype for D = 64 and D = 128
  for (const TileConfig& c : kConfigs)
    if (c.head_dim != 64 && c.head_dim != 128) return false;
  return true;
}
static_assert(head_dims_instantiated(), "a tuned row with a head_dim inst/ does not instantiate");
#endif

// The kernel (mma_kernel.cuh) indexes tokens with 32-bit ints and adds tile sizes to them:
// seqlen + block_m - 1 and seqlen + block_n - 1 (query/key tile counts), q0 + block_m and
// row + causal_offset (q0 < seqlen_q, causal_offset = seqlen_k - seqlen_q), key0 + block_n (key0 < seqlen_k).
// Each stays below EVOSDPA_MAX_SEQLEN + block_m + block_n, which must fit an int.
constexpr bool fits_int32_with_max_seqlen() {
  for (const TileConfig& c : kConfigs)
    if (EVOSDPA_MAX_SEQLEN + c.block_m() + c.block_n > INT32_MAX) return false;
  return true;
}
static_assert(fits_int32_with_max_seqlen(), "EVOSDPA_MAX_SEQLEN plus a tile overflows the kernel's int indices");

}  // namespace evosdpa::detail::mma_sm80
