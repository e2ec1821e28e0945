// Tile configuration of the sm_80 tensor-core kernel family (mma.sync m16n8k16, ldmatrix, cp.async).
// Plain C++ so that host-side selection (shared-memory needs, grid size) reads the same table that the
// kernels are compiled from.
#pragma once

namespace evosdpa::detail::mma_sm80 {

struct TileConfig {
  int head_dim;           // D: columns of Q, K, V and O
  int warps;              // warps per block; each warp owns 16 query rows (one mma M-tile)
  int block_n;            // keys per K/V tile streamed through shared memory
  int min_blocks_per_sm;  // __launch_bounds__ occupancy hint: caps registers at 64K / (threads * this)
  bool q_in_registers;    // keep the warp's Q fragments in registers for the whole K/V loop, rather
                          // than re-reading them from shared memory for every K tile

  constexpr int threads() const { return warps * 32; }
  constexpr int block_m() const { return warps * 16; }  // query rows per block
  // Q tile + double-buffered K and V tiles, 2-byte elements (fp16/bf16).
  constexpr int smem_bytes() const { return (block_m() * head_dim + 2 * 2 * block_n * head_dim) * 2; }
};

// Block_m 128 halves the K/V traffic from L2 against 64 rows: at L=4096, D=128 a 64-row block streams
// 8 GB of K/V through L2 for B=4,H=16, about as long as the math itself.
// D=128 keeps Q in shared memory: O (64 floats) + S (32 floats) + Q (32 registers) exceeds the
// 128-register budget that two 256-thread blocks per SM allow.
inline constexpr TileConfig kConfigs[] = {
    {64, 8, 64, 1, true},
    {128, 8, 64, 1, true},
};

constexpr const TileConfig* find_config(int head_dim) {
  for (const TileConfig& c : kConfigs)
    if (c.head_dim == head_dim) return &c;
  return nullptr;
}

constexpr bool valid(const TileConfig& c) {
  return c.head_dim % 16 == 0 &&   // mma k-steps of 16 over D in Q.K^T, n-tile pairs in P.V
         c.block_n % 16 == 0 &&    // mma k-steps of 16 keys in P.V
         c.warps >= 1 && c.warps <= 16 &&
         (c.block_m() * c.head_dim / 8) % c.threads() == 0 &&  // Q tile copied in whole 16-byte rounds
         (c.block_n * c.head_dim / 8) % c.threads() == 0 &&    // likewise each K/V tile
         c.min_blocks_per_sm >= 1;
}

static_assert(valid(kConfigs[0]) && valid(kConfigs[1]), "invalid mma_sm80 tile configuration");
static_assert(find_config(64)->smem_bytes() <= 99 * 1024 && find_config(128)->smem_bytes() <= 99 * 1024,
              "every mma_sm80 tile must fit the 99 KiB per-block limit of sm_86/sm_89");

}  // namespace evosdpa::detail::mma_sm80
