// mma_sm80's backward workspace: D = rowsum(dO * O), one float per query row; dQ summed in float32,
// [batch, heads_q, seqlen_q, head_dim] contiguous; in DETERMINISTIC mode, one turn counter per tile of
// tile_m query rows, which orders the blocks' adds to the tile (bwd_dkdv_kernel.cuh).
#pragma once

#include "kernels/rtc_std.hpp"

namespace evosdpa::detail::mma_sm80 {

struct BwdWorkspace {
  float* delta;     // [rows]
  float* dq_accum;  // [rows, head_dim]
  int* dq_turn;     // [batch, heads_q, ceil(seqlen_q / turn_rows)]; nullptr in FAST mode
  int turn_rows;    // query rows per turn counter: the row's tile_m
  // A tile's first key block stores its dQ rather than adding it (wgmma_sm90's DETERMINISTIC mode, whose
  // adds go in a fixed order): the pre-pass zeroes only the sums of the tiles that no key block sees.
  bool first_block_stores;
};

// Floats of D, padded so that dq_accum starts 16-byte aligned.
constexpr int64_t delta_floats(int64_t rows) { return (rows + 3) / 4 * 4; }

constexpr int64_t dq_turns(int64_t batch_heads, int64_t seqlen_q, int tile_m) {
  return batch_heads * ((seqlen_q + tile_m - 1) / tile_m);
}

// `turns`: 0 in FAST mode.
constexpr int64_t bwd_workspace_bytes(int64_t rows, int64_t head_dim, int64_t turns) {
  return (delta_floats(rows) + rows * head_dim) * 4 + turns * 4;
}

// The workspace of a call over `batch_heads` (batch * heads_q) heads of seqlen_q rows whose turns
// (DETERMINISTIC mode) cover tile_m query rows each.
constexpr int64_t bwd_workspace_bytes(int64_t batch_heads, int64_t seqlen_q, int64_t head_dim, bool deterministic,
                                      int tile_m) {
  return bwd_workspace_bytes(batch_heads * seqlen_q, head_dim, deterministic ? dq_turns(batch_heads, seqlen_q, tile_m) : 0);
}

inline BwdWorkspace bwd_workspace(void* base, int64_t rows, int64_t head_dim, bool deterministic, int tile_m,
                                  bool first_block_stores = false) {
  float* delta = static_cast<float*>(base);
  float* dq_accum = delta + delta_floats(rows);
  return {delta, dq_accum, deterministic ? reinterpret_cast<int*>(dq_accum + rows * head_dim) : nullptr, tile_m,
          first_block_stores};
}

}  // namespace evosdpa::detail::mma_sm80
