// mma_sm80's backward workspace: D = rowsum(dO * O), one float per query row, then (FAST mode) dQ
// summed in float32 by atomic adds, [batch, heads_q, seqlen_q, head_dim] contiguous.
#pragma once

#include "kernels/rtc_std.hpp"

namespace evosdpa::detail::mma_sm80 {

struct BwdWorkspace {
  float* delta;     // [rows]
  float* dq_accum;  // [rows, head_dim]; nullptr in DETERMINISTIC mode
};

// Floats of D, padded so that dq_accum starts 16-byte aligned.
constexpr int64_t delta_floats(int64_t rows) { return (rows + 3) / 4 * 4; }

constexpr int64_t bwd_workspace_bytes(int64_t rows, int64_t head_dim, bool fast) {
  return (delta_floats(rows) + (fast ? rows * head_dim : 0)) * 4;
}

inline BwdWorkspace bwd_workspace(void* base, int64_t rows, bool fast) {
  float* delta = static_cast<float*>(base);
  return {delta, fast ? delta + delta_floats(rows) : nullptr};
}

}  // namespace evosdpa::detail::mma_sm80
