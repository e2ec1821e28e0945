// Shared-memory tiles of the mma.sync families (mma_sm80 with 16-bit elements, mma_fp8 with E4M3 bytes):
// the swizzle, the cp.async tile copy, the ldmatrix A-fragment load, and which query block a block runs.
//
// Tiles hold rows of 16-byte chunks, swizzled so that the 8 rows an ldmatrix phase reads fall in 8
// different bank groups (conflict-free ldmatrix, cp.async and staging stores without padding): with 8 or
// more chunks per row chunk c of row r is stored at c ^ (r % 8); with 4 (64-byte rows, two per 128 bytes)
// at c ^ ((r / 2) % 4).
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/kernel_params.hpp"
#include "kernels/mma/mma_primitives.cuh"

namespace evosdpa::detail::mma_sm80 {

// Byte offset of (row, 16-byte chunk) in a swizzled tile with `kChunks` chunks per row.
template <int kChunks>
__device__ __forceinline__ uint32_t swizzle(int row, int chunk) {
  static_assert(kChunks == 4 || kChunks >= 8, "rows of 64 bytes or of 128 bytes and more");
  if constexpr (kChunks >= 8) return static_cast<uint32_t>((row * kChunks + (chunk ^ (row & 7))) * 16);
  return static_cast<uint32_t>((row * kChunks + (chunk ^ ((row >> 1) & 3))) * 16);
}

// Copy `kRows` rows of D elements of T from global (row stride `stride` elements) into a swizzled shared
// tile. Rows at or beyond `valid_rows` are zero-filled: zeros in K keep masked scores finite, zeros in V
// keep 0 * V from turning into NaN. Each thread copies the same 16-byte chunk of rows row0, row0 + step,
// ...; with step a multiple of 8 the swizzle is the same in every round, so a round costs one pointer
// increment (per-round addresses computed independently were hoisted out of the K/V loop and spilled).
template <int kRows, int D, int kThreads, typename T>
__device__ __forceinline__ void load_tile(uint32_t smem_tile, const T* gmem, int64_t stride,
                                          int valid_rows, int tid) {
  constexpr int kPerChunk = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte chunk
  constexpr int kChunks = D / kPerChunk;
  constexpr int kRowStep = kThreads / kChunks;
  constexpr int kRounds = kRows / kRowStep;
  static_assert(kThreads % kChunks == 0 && kRowStep % 8 == 0 && kRows % kRowStep == 0,
                "each thread must copy one chunk column of rows a multiple of 8 apart");
  const int row0 = tid / kChunks;
  const int chunk = tid % kChunks;
  const uint32_t dst = smem_tile + swizzle<kChunks>(row0, chunk);
  const T* src = gmem + row0 * stride + chunk * kPerChunk;
  const int64_t step = kRowStep * stride;
#pragma unroll
  for (int i = 0; i < kRounds; ++i) {
    const bool valid = row0 + i * kRowStep < valid_rows;
    cp_async_16(dst + i * kRowStep * kChunks * 16, valid ? src : gmem, valid);
    src += step;
  }
}

// A-operand fragment of the 16 rows starting at `row0` for mma k-step `kk`, which spans 32 bytes of the
// row (chunks 2kk and 2kk + 1: 16 16-bit elements, or 32 E4M3 ones): matrices (rows 0-7, chunk 2kk),
// (rows 8-15, 2kk), (rows 0-7, 2kk + 1), (rows 8-15, 2kk + 1).
template <int kChunks>
__device__ __forceinline__ void load_q_fragment(uint32_t (&a)[4], uint32_t sQ, int row0, int lane, int kk) {
  const int row = row0 + (lane & 7) + ((lane >> 3) & 1) * 8;
  const int chunk = 2 * kk + (lane >> 4);
  ldmatrix_x4(a, sQ + swizzle<kChunks>(row, chunk));
}

// The (batch, head, query block) a block computes. Blocks of one (batch, head) are adjacent in launch
// order so that their K/V stay in L2; with a causal mask the longest query blocks go first so that the
// short ones fill in the tail.
struct BlockCoords {
  int b, h, q_block;
};

__device__ __forceinline__ BlockCoords block_coords(const KernelParams& p, int block_m) {
  const int num_q_blocks = (p.seqlen_q + block_m - 1) / block_m;
  const int bh = blockIdx.x / num_q_blocks;
  const int qb = blockIdx.x % num_q_blocks;
  return {bh / p.heads_q, bh % p.heads_q, p.causal ? num_q_blocks - 1 - qb : qb};
}

}  // namespace evosdpa::detail::mma_sm80
