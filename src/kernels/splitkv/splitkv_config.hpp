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
  bool sm90a_only = false;  // compiled for sm_90a alone (sm_90's shared memory, or measured only
                            // there); elsewhere never chosen (config_for, short_cache_row,
                            // paged_split_row)

  constexpr int threads() const { return 32 * warps; }
  constexpr int warp_keys() const { return block_n / warps; }
  constexpr int stage_bytes(int elem) const { return 2 * block_n * head_dim * elem; }  // K and V tiles
  // The K/V stages; the warps' merge reuses them (float O, max and sum per warp and row).
  constexpr int smem_bytes(int elem) const { return stages * stage_bytes(elem); }
  constexpr int merge_bytes() const { return warps * kBlockRows * (head_dim + 2) * 4; }
};

// Rows in order of preference per head dim: a call takes the first of its head dim that the device can
// run (config_for), or for short caches one of more blocks per SM (short_cache_row).
//  - 96 KiB rows: within sm_86/sm_89's 99 KiB; two blocks per SM on sm_90 (228 KB), one on sm_80.
//  - D = 128, 192 KiB (sm_90): with 4 warps a block is bound by its warps' latency, not by memory: on an
//    H200 (4.2 TB/s copy) the 96 KiB row decoded at ~3.1 TB/s at most, as on the H100 (3.0 TB/s), and
//    8 warps over 128-key tiles took B=8 L=128k 1,366 -> 980 us (103% of copy), B=1 L=128k 198 -> 159,
//    B=8 L=8k 97.5 -> 75.4, B=1 L=8k 27.2 -> 24.3 (fp16, Hq/Hkv 32/8, L2 flushed, bench/decode_bench.py;
//    two stages instead of three: 1,240, 177, 87.6, 25.0; docs/perf-log.md v13.16). Paged caches ran
//    slower on it until their page and row per key were stepped instead of divided (v13.17: B=1 L=128k
//    223 us on the 96 KiB row, 163 with the stepping, 153-156 on this row; B=8 L=128k 1,515, 1,203,
//    1,064). Its instantiations are compiled for sm_90a alone (src/sources.cmake), where 192 KiB fit.
//  - D = 128, 48 KiB (sm_90): four blocks per SM for short caches over many blocks (short_cache_row)
//    and paged caches of few sequences (paged_split_row). Two warps over 32-key tiles: a block streams
//    slowly alone, so only where the blocks fill two per SM, or a paged cache's parts all four. Short
//    caches, H200, fp16, Hq/Hkv 32/8, D 128, Lq 1, against the 96 KiB row (us): every sequence full,
//    B=64 L=512 42.0 -> 37.6, L=1k 70.9 -> 67.0, B=256 L=1k 257.2 -> 246.2 (paged, pages of 16: 52.4 ->
//    41.7, 88.0 -> 71.6, 330.9 -> 267.6); lengths uniform in [1, L], B=64 L=1k 53.8 -> 47.9, B=256 152.9
//    -> 142.8, B=128 level (90.7 / 90.9); but B=32 L=1k (256 blocks) 33.5 -> 35.5, and caches of 2k-4k
//    keys with spread lengths lost 12-45% (B=64 L=4k 151 -> 177; docs/perf-log.md v14.2).
inline constexpr SplitKvConfig kConfigs[] = {
    {64, 128, 4, 3},
    {128, 128, 8, 3, true},
    {128, 64, 4, 3},
    {128, 32, 2, 3, true},
};
// The rows by index, for the instantiation files (inst/).
inline constexpr int kRowD64 = 0, kRowD128Wide = 1, kRowD128 = 2, kRowD128Short = 3;
inline constexpr int kConfigCount = static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0]));

constexpr bool valid(const SplitKvConfig& c) {
  return (c.head_dim == 64 || c.head_dim == 128) && c.warps >= 1 && c.block_n % c.warps == 0 &&
         c.warp_keys() % 16 == 0 &&              // whole k16 steps of P.V per warp
         c.threads() % (c.head_dim / 8) == 0 &&  // each thread copies one 16-byte column of the tile
         c.block_n % (c.threads() / (c.head_dim / 8)) == 0 && c.stages >= 2 &&
         c.merge_bytes() <= c.smem_bytes(2) && c.smem_bytes(2) <= 227 * 1024;  // sm_90's per-block opt-in
}
constexpr bool all_valid() {
  for (const SplitKvConfig& c : kConfigs)
    if (!valid(c)) return false;
  return true;
}
static_assert(all_valid(), "a splitkv row breaks the kernel's assumptions (see valid())");

// The row a call takes: the first of its head dim whose stages (`elem`-byte elements) fit `smem_optin`
// bytes per block, an sm90a_only one only on an sm_90 device (`sm90a`: compute capability 9.0); -1 when
// there is none.
constexpr int config_for(int head_dim, bool sm90a, long long smem_optin, int elem) {
  for (int i = 0; i < kConfigCount; ++i) {
    const SplitKvConfig& c = kConfigs[i];
    if (c.head_dim == head_dim && c.smem_bytes(elem) <= smem_optin && (!c.sm90a_only || sm90a)) return i;
  }
  return -1;
}
// Caches up to which short_cache_row may hand a call to a smaller row.
inline constexpr long long kShortCacheKeys = 1024;

// The row a call takes: config_for's, except for caches of at most kShortCacheKeys keys whose `base`
// blocks (base_blocks) fill at least half the slots of a row of the head dim holding n >= 2 blocks per
// SM in `smem_optin` bytes (base >= n / 2 * sm_count): those take such a row, the one of most blocks
// per SM (an sm90a_only row only on sm_90, `sm90a`). Such blocks stream a few tiles each, so what counts
// is how soon each block's first tiles arrive, and several smaller blocks per SM overlap one's start with
// the others' streaming; a smaller block streams more slowly alone, hence the half-full slots. H200,
// fp16, Hq/Hkv 32/8, D 128, Lq 1, every sequence full, 8-warp row against the 96 KiB row (us): dense B=64
// L=512 49.2 / 41.9, L=1k 75.5 / 70.1, B=32 L=512 27.0 / 22.8, L=1k 41.5 / 37.4, B=64 L=4k 247.7 /
// 246.7, L=16k 942.5 / 955.2; paged B=64 L=512 59.0 / 51.2, L=1k 93.2 / 89.3 (the 48 KiB row: above).
// The cache's capacity (seqlen_k) bounds the rule, not its sequences' lengths, which the host does not
// know; with lengths spread over the cache the longest sequences decide, and a 4-warp block streams one
// alone at about half the 8-warp rate: lengths uniform in [1, 1k), B=64 52.9 / 55.8 (paged 71.1 /
// 73.8), B=32 35.0 / 34.0, B=128 91.9 / 89.5; in [1, 4k), B=32 86.5 / 107.3 (docs/perf-log.md v13.18).
constexpr int short_cache_row(int row, long long seqlen_k, long long base, long long sm_count, long long smem_optin,
                              int elem, bool sm90a) {
  if (row < 0 || seqlen_k > kShortCacheKeys) return row;
  int best = row;
  long long best_per_sm = 1;
  for (int i = 0; i < kConfigCount; ++i) {
    const SplitKvConfig& c = kConfigs[i];
    if (i == row || c.head_dim != kConfigs[row].head_dim || (c.sm90a_only && !sm90a)) continue;
    const long long per_sm = smem_optin / c.smem_bytes(elem);
    if (per_sm > best_per_sm && 2 * base >= per_sm * sm_count) best = i, best_per_sm = per_sm;
  }
  return best;
}

// The row a paged call takes after short_cache_row: where its base blocks number at least a quarter of
// the SMs but fewer than the SMs, the row of the head dim holding the most blocks per SM, four or more
// (an sm90a_only row only on sm_90), whose split count then counts those blocks (supports(): a paged
// cache's parts fill every block an SM holds). A paged tile's copies wait on page-table reads, so more,
// smaller blocks in flight pull more bandwidth, and more parts per sequence even out sequences of
// different lengths. H200, fp16, Hq/Hkv 32/8, D 128, Lq 1, pages of 16, the 8-warp row (2 parts at B=8)
// against the 48 KiB row (8 parts), us: every sequence full, B=8 L=1k 22.6, 21.9 / 21.1, 20.6; L=8k 82.3,
// 81.6 / 75.4, 74.0; L=32k 275.7, 274.7 / 258.4, 258.1; L=64k 536.9, 541.9 / 505.3, 504.6; L=128k
// 1,055.6, 1,054.5 / 994.0, 994.6 (4.3 TB/s); B=5 L=8k 61.2, 60.7 / 52.3, 51.8; B=16 L=16k
// 273.1, 273.1 / 257.5, 257.4; lengths uniform in [1, L]: B=8 L=4k 47.0, 47.3 / 39.8, 39.4, L=128k
// 937.0, 935.4 / 731.1, 707.0; B=16 L=16k 262.8, 263.0 / 217.3, 217.4. B=1 (8 blocks) on it: L=8k
// 22.5-22.7 against 23.2-23.6 with 32 parts, 24.8-24.9 with 64, 32.7-32.9 with 16; faster only at L=32k
// with 64 (47.5-48.0 against 49.2); not taken (docs/perf-log.md v14.2). With only a few parts its blocks
// each stream a long run of keys slowly (B=8 L=32k in 2 parts: 722 us against 278 on the 8-warp row):
// plan_call takes it only with the library's split count and a workspace for all its parts.
constexpr int paged_split_row(int row, bool paged, long long base, long long sm_count, long long smem_optin, int elem,
                              bool sm90a) {
  if (row < 0 || !paged || 4 * base < sm_count || base >= sm_count) return row;
  int best = row;
  long long best_per_sm = 3;
  for (int i = 0; i < kConfigCount; ++i) {
    const SplitKvConfig& c = kConfigs[i];
    if (c.head_dim != kConfigs[row].head_dim || (c.sm90a_only && !sm90a)) continue;
    const long long per_sm = smem_optin / c.smem_bytes(elem);
    if (per_sm > best_per_sm) best = i, best_per_sm = per_sm;
  }
  return best;
}

// Every supported head dim runs on sm_86/sm_89 (99 KiB); the instantiation files' rows.
static_assert(config_for(64, false, 99 * 1024, 2) >= 0 && config_for(128, false, 99 * 1024, 2) >= 0,
              "every supported head dim has a row within 99 KiB");
static_assert(kConfigs[kRowD64].head_dim == 64 && kConfigs[kRowD128Wide].head_dim == 128 &&
                  kConfigs[kRowD128].head_dim == 128 && kConfigs[kRowD128Short].head_dim == 128 &&
                  kConfigCount == 4,
              "the instantiation files' rows");

// Blocks of the grid before splitting: (sequence, K/V head, 16-row group).
constexpr long long base_blocks(long long batch, long long heads_kv, long long seqlen_q, long long group) {
  return batch * heads_kv * ((seqlen_q * group + kBlockRows - 1) / kBlockRows);
}

// A split count that gives every part keys: ceil(key_blocks / s) parts of its size, no fewer (with s - 1
// parts of the same size, s parts would leave one empty).
constexpr bool splits_all_used(long long key_blocks, long long s) {
  return s == 1 || (key_blocks + s - 1) / s != (key_blocks + s - 2) / (s - 1);
}

// The split count: the most parts that keep the grid within one wave of `slots` blocks (every part
// with keys), none when the base grid fills 80% of a wave. A decoding block streams at a rate bound by
// its own copies in flight, so every slot left empty is bandwidth lost, and a second wave costs more
// than it spreads. FlashAttention-2's heuristic (the fewest splits within 85% of the best wave
// efficiency) stopped short of the wave: H200, fp16, Hq/Hkv 32/8, D 128, Lq 1, B=1 L=128k: dense
// (slots: 132 SMs) 14 parts 155 us, 15 147, 16 136, 32 141; paged (pages of 16, two blocks per SM,
// slots 264) 29 parts 223 us, 33 200, 64 213 (docs/perf-log.md v13.17).
constexpr int choose_splits(long long base, long long key_blocks, long long slots) {
  if (base <= 0 || key_blocks <= 1 || slots <= 0 || base * 10 >= slots * 8) return 1;
  long long s = slots / base;
  if (s > key_blocks) s = key_blocks;
  if (s > kMaxSplits) s = kMaxSplits;
  for (; s > 1; --s)
    if (splits_all_used(key_blocks, s)) return static_cast<int>(s);
  return 1;
}

// Workspace of `splits` parts for `rows` = batch * heads_q * seqlen_q output rows: float O [splits][rows]
// [D], then float lse [splits][rows]; nothing without a split.
constexpr long long workspace_bytes(long long splits, long long rows, long long head_dim) {
  return splits <= 1 ? 0 : splits * rows * (head_dim + 1) * 4;
}

// A call's parts on row `row`: the caller's count `fixed` (> 0; at most one per key block), or
// choose_splits over the slots of the grid. A dense cache counts SMs, not the blocks an SM holds: a
// memory-bound block pulls more than an SM's share of the bandwidth, so SMs given two blocks finish last
// (H100, fp16, Hq/Hkv 32/8, D 128, Lq 1: B=1 L=64k 103 us with 16 parts (128 blocks) against 114 with 29
// (232 blocks); B=8 L=8k 97.7 us with 2 parts against 100.6 with 4; .carry/split_sweep.py). A paged one
// counts every block the SMs hold: each tile's copies wait for page-table reads, so a block streams less
// and more of them must be in flight (B=8 L=8k, pages of 16: 111.8 us with 4 parts, 180.7 with 2; B=1
// L=64k: 128.9 against 209.2; docs/perf-log.md v11).
constexpr long long row_splits(int row, long long fixed, long long base, long long seqlen_k, bool paged,
                               long long sm_count, long long smem_optin, int elem) {
  const long long key_blocks = (seqlen_k + kConfigs[row].block_n - 1) / kConfigs[row].block_n;
  if (fixed > 0) return fixed < key_blocks ? fixed : (key_blocks > 0 ? key_blocks : 1);
  const long long per_sm = smem_optin / kConfigs[row].smem_bytes(elem);
  return choose_splits(base, key_blocks, paged ? sm_count * (per_sm > 1 ? per_sm : 1) : sm_count);
}

// How a call runs: its row (-1 if none fits the device), its parts, and the parts it would take with
// any workspace (`wanted`, the workspace query's answer). The row is config_for's, or short_cache_row's;
// a paged call without a fixed count (`fixed` 0) takes paged_split_row's where the caller's workspace
// holds all the parts that row wants (`fit`: the parts it holds, 0 without one), else keeps the other
// row. Without a fixed count the parts are those the workspace holds, none below two.
struct CallPlan {
  int row;
  long long splits;
  long long wanted;
};
constexpr CallPlan plan_call(int head_dim, bool sm90a, long long smem_optin, int elem, long long sm_count,
                             long long seqlen_k, long long base, bool paged, long long fixed, long long fit) {
  const int row = short_cache_row(config_for(head_dim, sm90a, smem_optin, elem), seqlen_k, base, sm_count,
                                  smem_optin, elem, sm90a);
  if (row < 0) return {-1, 1, 1};
  const int best = fixed > 0 ? row : paged_split_row(row, paged, base, sm_count, smem_optin, elem, sm90a);
  const long long wanted = row_splits(best, fixed, base, seqlen_k, paged, sm_count, smem_optin, elem);
  const int chosen = best != row && fit < wanted ? row : best;
  long long splits = chosen == best ? wanted : row_splits(row, fixed, base, seqlen_k, paged, sm_count, smem_optin, elem);
  if (fixed <= 0 && splits > fit) splits = fit >= 2 ? fit : 1;
  return {chosen, splits, wanted};
}

}  // namespace evosdpa::detail::splitkv
