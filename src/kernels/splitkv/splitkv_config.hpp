// The split-KV family's configuration (splitkv_sm80): one row per head dim, the split-count heuristic and
// the workspace layout. Plain constexpr C++, shared by the kernels, the family's supports() and the CPU
// tests.
//
// The family serves decoding: few query rows per (sequence, K/V head) against a long KV cache, dense or
// paged. A block takes 16 packed query rows (the queries times the query heads of one K/V head: each K/V
// tile is read once for all of them) and one of num_splits parts of the keys; its warps split every K/V
// tile between them, each running the online softmax over its own keys for all 16 rows, and the block
// merges the warps' partial results at the end. With num_splits > 1 each part writes float32 partials
// (O normalised by its own sum, and its log-sum-exp) to the workspace and a merge kernel combines them.
#pragma once

#include "kernels/rtc_std.hpp"

namespace evosdpa::detail::splitkv {

// Query rows per block: one m16 tile of mma.sync. Rows are (query, query head of the group) pairs,
// query-major: packed row r is query r / group, query head h_kv * group + r % group.
inline constexpr int kBlockRows = 16;
// The most parts the keys are split into (FlashAttention-2's cap; the heuristic rarely wants more).
inline constexpr int kMaxSplits = 128;

struct SplitKvConfig {
  int head_dim;  // D
  int block_n;   // keys per K/V tile
  int warps;     // each warp takes block_n / warps consecutive keys of every tile, for all 16 rows
  int stages;    // K/V tiles in shared memory: stages - 1 are in flight while one is computed

  constexpr int threads() const { return 32 * warps; }
  constexpr int warp_keys() const { return block_n / warps; }
  constexpr int stage_bytes(int elem) const { return 2 * block_n * head_dim * elem; }  // K and V tiles
  // The K/V stages; the warps' merge reuses them (float O, max and sum per warp and row).
  constexpr int smem_bytes(int elem) const { return stages * stage_bytes(elem); }
  constexpr int merge_bytes() const { return warps * kBlockRows * (head_dim + 2) * 4; }
};

// 96 KiB per block: within sm_86/sm_89's 99 KiB; two blocks per SM on sm_90 (228 KB), one on sm_80. Two tiles in flight
// per block (32 KiB each) keep the loads ahead of a loop whose math is a few mma per warp and tile.
inline constexpr SplitKvConfig kConfigs[] = {
    {64, 128, 4, 3},
    {128, 64, 4, 3},
};
inline constexpr int kConfigCount = static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0]));

constexpr bool valid(const SplitKvConfig& c) {
  return (c.head_dim == 64 || c.head_dim == 128) && c.warps >= 1 && c.block_n % c.warps == 0 &&
         c.warp_keys() % 16 == 0 &&              // whole k16 steps of P.V per warp
         c.threads() % (c.head_dim / 8) == 0 &&  // each thread copies one 16-byte column of the tile
         c.block_n % (c.threads() / (c.head_dim / 8)) == 0 && c.stages >= 2 &&
         c.merge_bytes() <= c.smem_bytes(2) && c.smem_bytes(2) <= 99 * 1024;
}
constexpr bool all_valid() {
  for (const SplitKvConfig& c : kConfigs)
    if (!valid(c)) return false;
  return true;
}
static_assert(all_valid(), "a splitkv row breaks the kernel's assumptions (see valid())");

// The row for a head dim, -1 when there is none.
constexpr int config_index(int head_dim) {
  for (int i = 0; i < kConfigCount; ++i)
    if (kConfigs[i].head_dim == head_dim) return i;
  return -1;
}
static_assert(config_index(64) >= 0 && config_index(128) >= 0, "every supported head dim has a row");

// Blocks of the grid before splitting: (sequence, K/V head, 16-row group).
constexpr long long base_blocks(long long batch, long long heads_kv, long long seqlen_q, long long group) {
  return batch * heads_kv * ((seqlen_q * group + kBlockRows - 1) / kBlockRows);
}

// FlashAttention-2's heuristic (num_splits_heuristic), `slots` blocks to a wave (the SM count):
// no split when the base grid fills 80% of a wave; else the fewest splits whose wave efficiency (waves /
// whole waves) is within 85% of the best up to kMaxSplits, counting only split counts that change the
// keys per part (ceil(key_blocks / s)).
constexpr int choose_splits(long long base, long long key_blocks, long long slots) {
  if (base <= 0 || key_blocks <= 1 || slots <= 0 || base * 10 >= slots * 8) return 1;
  const long long most = key_blocks < kMaxSplits ? key_blocks : kMaxSplits;
  auto eligible = [&](long long s) { return s == 1 || (key_blocks + s - 1) / s != (key_blocks + s - 2) / (s - 1); };
  auto efficiency = [&](long long s) {
    const double waves = static_cast<double>(base * s) / static_cast<double>(slots);
    const long long whole = (base * s + slots - 1) / slots;
    return waves / static_cast<double>(whole);
  };
  double best = 0;
  for (long long s = 1; s <= most; ++s)
    if (eligible(s) && efficiency(s) > best) best = efficiency(s);
  for (long long s = 1; s <= most; ++s)
    if (eligible(s) && efficiency(s) >= 0.85 * best) return static_cast<int>(s);
  return 1;
}

// Workspace of `splits` parts for `rows` = batch * heads_q * seqlen_q output rows: float O [splits][rows]
// [D], then float lse [splits][rows]; nothing without a split.
constexpr long long workspace_bytes(long long splits, long long rows, long long head_dim) {
  return splits <= 1 ? 0 : splits * rows * (head_dim + 1) * 4;
}

}  // namespace evosdpa::detail::splitkv
