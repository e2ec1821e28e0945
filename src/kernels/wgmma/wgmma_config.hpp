// Tile configuration of the Hopper family (wgmma + TMA + warp specialisation). Plain C++ so that host-side
// supports() reads the same table the kernels are compiled from.
#pragma once

#include "evosdpa/evosdpa.h"
#include "kernels/tile_rows.hpp"

namespace evosdpa::detail::wgmma_sm90 {

struct TileConfig {
  int head_dim;       // D: columns of Q, K, V and O; stored as D/64 blocks of 64 columns (one 128-byte
                      // swizzle atom per row), the widest box a 128B-swizzled TMA load takes
  int block_n;        // keys per K/V tile: the N of S = Q.K^T (one m64nNk16 wgmma per 16 columns of D)
  int stages;         // depth of the K/V ring the producer fills ahead of the consumers
  int consumers;      // consumer warpgroups, 64 query rows each (wgmma M = 64), taking turns at the
                      // tensor cores; 3 where the softmax is as long as the GEMMs (16-bit D = 64,
                      // E4M3 D = 128)
  int producer_regs;  // registers per thread after setmaxnreg: the producer warpgroup gives its share
  int consumer_regs;  //   to the consumers (the register file holds 64K)
  double row_speed;   // query rows x keys per unit time relative to the other rows of its head size,
                      // measured with full waves (choose_config)
  double causal_row_speed;  // the same with a causal mask
  bool split_keys = false;  // the consumers share one block of 64 query rows and take its K/V tiles in
                            // turn, merging their partial results in shared memory at the end: twice the
                            // CTAs of a row split for grids of less than a wave (one item per CTA)
  bool fp8 = false;         // E4M3 inputs (k32 wgmma, both operands K-major): V arrives [keys][D] and is
                            // transposed in shared memory by the producer warpgroup's warps 1-3 into a
                            // second ring; O (fp16/bf16, twice Q's bytes) leaves through its own buffers
  bool turns = true;        // the consumers issue their GEMMs in turns (the pingpong's named barriers);
                            // without, each as soon as its tiles are there

  constexpr int elem_bytes() const { return fp8 ? 1 : 2; }  // of Q, K and V
  // Q tiles in shared memory: the next item's Q loads while this one runs, and this one's buffer holds
  // its O on the way out (the epilogue's TMA store).
  static constexpr int kQBuffers = 2;
  // Shared memory for one item's Work (wgmma_scheduler.cuh: 11 ints, static_asserted there), per Q buffer,
  // and for the CTA's plan.
  static constexpr int kWorkSlotBytes = 64;

  constexpr int block_m() const { return split_keys ? 64 : 64 * consumers; }  // query rows per work item
  constexpr int threads() const { return 128 * (1 + consumers); }  // one producer warpgroup issuing TMA
  // Registers per thread the CTA is launched with (__launch_bounds__(threads(), 1): 64K over the
  // threads, in steps of 8). setmaxnreg only moves registers within this allocation: a claim beyond what
  // the others released waits forever (four consumers at 120 and a producer at 24, 640 threads launched
  // with 96, hung on an H100).
  // (At least 384 threads, so below the 255-register cap.)
  constexpr int launch_regs() const { return 65536 / threads() / 8 * 8; }
  // Q, K and V rows are stored as blocks of 128 bytes (one 128B-swizzle atom, the widest box a
  // 128B-swizzled TMA load takes): 64 fp16/bf16 columns or 128 E4M3 ones; E4M3 at D = 64 as rows of
  // 64 bytes, 64B-swizzled (wgmma's K-major atom of 8 rows x 64 bytes).
  constexpr int row_bytes() const { return head_dim * elem_bytes() < 128 ? head_dim * elem_bytes() : 128; }
  constexpr int block_cols() const { return row_bytes() / elem_bytes(); }
  constexpr int d_blocks() const { return head_dim / block_cols(); }
  constexpr int q_bytes() const { return block_m() * head_dim * elem_bytes(); }
  constexpr int kv_tile_bytes() const { return block_n * head_dim * elem_bytes(); }
  // The Q ring, then the K ring, then the V ring (every tile a multiple of 1024 bytes, the swizzle's
  // period), then the mbarriers (each ring's full and empty ones, and a split item's merge barrier), then
  // per Q buffer its item's Work (11 ints, which the producer computes for the consumers) and the CTA's
  // plan (up to 4 ints, plan_cta), kWorkSlotBytes each, then with split_keys the partial results the
  // consumers hand to the storing one; plus 1024 bytes to align the base. (A split item's partial rows
  // go over the rings at the end: partial_row_bytes.)
  // FP8 rows add the transposed V ring and per consumer a buffer of its 64 rows of O (2-byte elements)
  // after the V ring, and the transposed ring's full and empty barriers after the others.
  constexpr int vt_offset() const { return kQBuffers * q_bytes() + 2 * stages * kv_tile_bytes(); }
  // FP8: V^T's rows are 128 bytes (one swizzle atom of keys) whatever the tile's keys (block_n <= 128).
  constexpr int vt_tile_bytes() const { return head_dim * 128; }
  constexpr int o_stage_offset() const { return vt_offset() + (fp8 ? stages * vt_tile_bytes() : 0); }
  constexpr int o_stage_bytes() const { return 64 * head_dim * 2; }  // one consumer's rows of O
  constexpr int barrier_offset() const { return o_stage_offset() + (fp8 ? consumers * o_stage_bytes() : 0); }
  constexpr int barrier_count() const { return 2 * kQBuffers + 4 * stages + 1 + (fp8 ? 2 * stages : 0); }
  constexpr int work_offset() const { return barrier_offset() + 8 * barrier_count(); }
  constexpr int handoff_offset() const { return work_offset() + (kQBuffers + 1) * kWorkSlotBytes; }
  // split_keys: per consumer but the storing one, each thread's O accumulators, its two rows' m and l.
  constexpr int handoff_floats() const { return head_dim / 2 + 4; }
  constexpr int handoff_bytes() const { return split_keys ? (consumers - 1) * 128 * handoff_floats() * 4 : 0; }
  constexpr int smem_bytes() const { return 1024 + handoff_offset() + handoff_bytes(); }
  // With a mask tensor (wgmma_mask.cuh), after the rest: two mbarriers per consumer warpgroup (its TMA
  // loads complete on one, its reads arrive on the other), then at the next 1024-byte boundary (the 128B
  // swizzle's period) the CTA's block_m x block_n tile of mask elements (`mask_elem` bytes each), each
  // consumer warpgroup staging its 64 rows.
  static constexpr int kMaskBarriers = 2 * 3;  // up to 3 consumers
  constexpr int mask_bar_offset() const { return (handoff_offset() + handoff_bytes() + 7) / 8 * 8; }
  constexpr int mask_stage_offset() const { return (mask_bar_offset() + 8 * kMaskBarriers + 1023) / 1024 * 1024; }
  constexpr int mask_stage_bytes(int mask_elem) const { return block_m() * block_n * mask_elem; }
  // A launch's shared memory with a mask tensor of `mask_elem`-byte elements (0: none).
  constexpr int smem_bytes(int mask_elem) const {
    return mask_elem == 0 ? smem_bytes() : 1024 + mask_stage_offset() + mask_stage_bytes(mask_elem);
  }
  // A split item's partial rows (wgmma_merge.cuh): fp32, its D columns of O, then its max and sum, padded
  // to D + 4 floats (16 bytes past a multiple of 128: 2-way bank conflicts for the 8-byte stores of a
  // warp's 8 rows, the least 8-byte stores allow). From the start of shared memory, over the Q and K/V
  // rings once every GEMM is done: the CTA's block_m rows as staged, then the block_m rows it receives
  // (its slice of each CTA's).
  constexpr int partial_row_bytes() const { return (head_dim + 4) * 4; }
};

// Most CTAs sharing one item's keys (a cluster, merged through distributed shared memory): the
// largest cluster size every sm_90 part runs.
inline constexpr int kMaxSplits = 8;

// How a call runs: its tile-table row, and how many CTAs of a cluster share each work item's K/V tiles
// (1: the persistent grid, one CTA per SM taking whole items in turn).
struct Choice {
  int row;
  int splits;
  // log2 of a split count (1, 2, 4 or 8).
  static constexpr int log2_of(int splits) { return splits >= 8 ? 3 : splits >= 4 ? 2 : splits >= 2 ? 1 : 0; }
  // As KernelFamily's variant (one int): the row and log2(splits).
  constexpr int variant() const { return row * 4 + log2_of(splits); }
  static constexpr Choice of_variant(int v) { return {v / 4, 1 << (v % 4)}; }
};

// Measured on an H100 (docs/perf-log.md v8.3):
//  - D = 64, three consumers (192 rows): per 128-key tile a warpgroup's GEMMs take about as long as its
//    softmax (16K exponentials), so a third warpgroup keeps the tensor cores busy (FlashAttention-3's
//    choice for this head size): on the fa3 grid non-causal D = 64 went from 0.79-0.90x cuDNN to
//    0.85-1.07x, about 15% more rows per second. Two consumers (128 rows) for grids of few waves, where
//    the bigger items leave SMs idle: (2,8,2048,64) ran 46.6 us with 128-row items, 55.6 with 192.
//  - D = 128: 128-key tiles. A 176-key row (FlashAttention-3's non-causal choice) was 6% faster than
//    this one with direct stores of O, and 5-9% slower once O went out through TMA.
//  - D = 64 causal: the three-consumer row's advantage shrinks (v8.4, fa3 points, 192 against 128 rows):
//    L512 170 / 165 us, L1024 258 / 235, L2048 342 / 382. With the rounds of items below, any speed
//    between 1.03 and 1.125 picks the faster row at all three; 1.08.
//  - split_keys rows, for grids whose 64-row items fit in one wave: twice the CTAs of the 128-row row at
//    the same register split. (1,8,512,64) under graph replay 9.9 us (mma_sm80, the choice before) ->
//    8.3-8.5; (1,8,512,128) 11.6 -> 9.7; (1,8,256,64) 7.1 -> 6.8 (docs/perf-log.md v8.6). Four stages at
//    D = 64: every tile of L = 512 in flight at once.
// Rows with the same bucket (head size, consumers, split_keys, FP8) and levers; the speeds are not levers.
constexpr bool same_row(const TileConfig& a, const TileConfig& b) {
  return a.head_dim == b.head_dim && a.block_n == b.block_n && a.stages == b.stages && a.consumers == b.consumers &&
         a.producer_regs == b.producer_regs && a.consumer_regs == b.consumer_regs && a.split_keys == b.split_keys &&
         a.fp8 == b.fp8 && a.turns == b.turns;
}
constexpr bool same_bucket(const TileConfig& a, const TileConfig& b) {
  return a.head_dim == b.head_dim && a.consumers == b.consumers && a.split_keys == b.split_keys && a.fp8 == b.fp8;
}

// A tuned row replaces the hand-made row of its bucket (same_bucket) and keeps that row's speeds:
// `evosdpa-tune --emit-table` writes one file per model, tuned/sm<cc>_<SMs>.inc, and lists it in
// tuned/index.inc.
using TunedRow = TunedRowOf<TileConfig>;

#ifdef EVOSDPA_TUNE_CANDIDATE
// evosdpa-tune compiles a candidate row (tune/candidate.cpp) as the whole table, with NVRTC.
inline constexpr TileConfig kHandRows[] = {EVOSDPA_TUNE_CANDIDATE};
inline constexpr TunedRow kTunedRows[] = {{0, 0, kHandRows[0]}};
#else
// Registers: 2 consumers x 240 + 24, 3 x 160 + 32, 2 x 224 + 56 (x 128 threads <= 64K).
inline constexpr TileConfig kHandRows[] = {
    {64, 128, 2, 3, 32, 160, 1.15, 1.08},
    {64, 128, 2, 2, 24, 240, 1.0, 1.0},
    {128, 128, 2, 2, 24, 240, 1.0, 1.0},
    {64, 128, 4, 2, 24, 240, 1.0, 1.0, true},
    {128, 128, 2, 2, 24, 240, 1.0, 1.0, true},
    // E4M3 at D = 128 (docs/fp8-design.md, step 3): the producer warpgroup's warps 1-3 transpose V, which
    // with 40 registers spilled (ptxas keeps each setmaxnreg region within its count); the consumers' P
    // fragments are half the 16-bit ones.
    {128, 128, 2, 2, 56, 224, 1.0, 1.0, false, true},
    // E4M3 at D = 128, three consumers over 96-key tiles (192-row items): an FP8 tile's GEMMs take half
    // the 16-bit ones', so, as for 16-bit D = 64, a third warpgroup keeps the tensor cores busy while two
    // run their softmax; at 160 registers only 96-key tiles fit (128: 152 bytes spilled, every wgmma
    // serialised). H200, against the row above (docs/perf-log.md v13.23): (4,16,4096,128) 600 us against
    // 697, (2,16,8192,128) 1,237 against 1,375, causal (1,16,16384,128) 1,266 against 1,422; slower where
    // its items or tiles are mostly tails, (32,16,512,128) 114.4 against 108.9, (1,8,512,128) under graph
    // replay 14.2 against 11.5. Its speeds, fitted to those six non-causal and two causal shapes
    // (choose_config's time, which counts its 96-key tiles): 1.16-1.21 and 1.10-1.16.
    {128, 96, 2, 3, 32, 160, 1.18, 1.12, false, true},
    // E4M3 at D = 64: Q and K rows of 64 bytes (64B swizzle), V^T as at D = 128 with 64 rows.
    {64, 128, 2, 2, 56, 224, 1.0, 1.0, false, true},
    // E4M3 at D = 64, three consumers (192-row items): the GEMMs of a tile are a quarter of the 16-bit
    // D = 128 ones', the softmax the same, so a third warpgroup's softmax fills the gaps. H200, against
    // the row above (docs/perf-log.md v13.23): (4,32,4096,64) 960 us against 1,135, (1,32,16384,64) 3,496
    // against 4,394, causal (2,32,8192,64) 992 against 1,152. Speeds fitted to the six non-causal fa3
    // points, 1.21-1.27; causal (L >= 2048) 1.14-1.16, taken as 1.12 so that causal L = 512 and 1024,
    // where the row was not timed, stay on the row above (it needs more than 1.125 there). Without the
    // pingpong's turns: H200, two rounds each, (16,32,1024,64) 282.9, 280.4 us against 287.8, 285.9 with
    // them, (4,32,4096,64) 941.1, 937.4 against 963.1, 958.4, causal (2,32,8192,64) 986.3, 989.8 against
    // 996.7, 1,001.1 (the 16-bit D = 64 three-consumer row level either way: 170.6-1,105 us against
    // 171.7-1,102; docs/perf-log.md v13.25).
    {64, 128, 2, 3, 32, 160, 1.22, 1.12, false, true, false},
};

inline constexpr TunedRow kTunedRows[] = {
    {0, 0, kHandRows[0]},  // no device has compute capability 0: keeps the array non-empty, never matches
#include "kernels/wgmma/tuned/index.inc"
};
#endif
inline constexpr int kHandCount = sizeof(kHandRows) / sizeof(kHandRows[0]);

// The rows compiled (tile_rows.hpp; inst/ instantiates the tuned ones, wgmma_instances.hpp).
inline constexpr auto kRowList = collect_rows(kHandRows, kTunedRows, same_row);
inline constexpr int kConfigCount = kRowList.count;
inline constexpr RowTable<TileConfig, kConfigCount> kConfigs = fit_rows<kConfigCount>(kRowList);

// Index in kConfigs of a row equal to c; -1 if none.
constexpr int row_index(const TileConfig& c) {
  for (int i = 0; i < kConfigCount; ++i)
    if (same_row(kConfigs[i], c)) return i;
  return -1;
}

// The row (index in kConfigs) that runs hand-made row `hand`'s bucket on a GPU of compute capability cc
// with sm_count SMs: the tuned table's row for this model where it has one, else the hand-made row.
template <int N>
constexpr int bucket_row(const TunedRow (&tuned)[N], int hand, int cc, int sm_count) {
  for (const TunedRow& t : tuned)
    if (t.cc != 0 && t.cc == cc && t.sm_count == sm_count && same_bucket(t.config, kHandRows[hand]) &&
        row_index(t.config) >= 0)  // a test's table may name a row the build did not compile
      return row_index(t.config);
  return hand;
}

// The row of kConfigs with this head size, consumer count, split and input type (the instantiation files
// name rows so).
constexpr int row_of(int head_dim, int consumers, bool split_keys = false, bool fp8 = false) {
  for (int i = 0; i < kConfigCount; ++i)
    if (kConfigs[i].head_dim == head_dim && kConfigs[i].consumers == consumers &&
        kConfigs[i].split_keys == split_keys && kConfigs[i].fp8 == fp8)
      return i;
  return -1;
}

// Rows compiled with the score modifiers (a sliding window, a softcap: score_mods.cuh): the hand-made
// 16-bit rows of two consumers splitting the rows, on the persistent grid. Each modifier combination is
// an instantiation of its own; limiting them to these rows (which the tuned ones on the H100 only copy)
// and to the one schedule keeps the build's time and size down. Not the three-consumer D = 64 row: at
// 160 registers per consumer its softcap kernels spilled 16 bytes (ptxas, CUDA 13.0); D = 64 calls with
// modifiers take the two-consumer row.
constexpr bool score_mod_row(int i) {
  return i < kHandCount && !kConfigs[i].split_keys && !kConfigs[i].fp8 && kConfigs[i].consumers == 2;
}
// Their mask tensor kernels' shared memory, with a tile of 2-byte mask elements.
constexpr bool mask_stages_fit() {
  for (int i = 0; i < kConfigCount; ++i)
    if (score_mod_row(i) && kConfigs[i].smem_bytes(2) > 227 * 1024) return false;
  return true;
}
static_assert(mask_stages_fit(), "a score-modifier row's mask tensor stage exceeds sm_90's shared memory");
template <int kIndex>
inline constexpr bool kScoreModRow = score_mod_row(kIndex);

// ceil(x), at least 1; past 2^53 a whole more or less is below the rounding.
constexpr double ceil_positive(double x) {
  if (x <= 1.0) return 1.0;
  if (x >= 9.0e15) return x;
  const double whole = static_cast<double>(static_cast<long long>(x));
  return whole < x ? whole + 1.0 : whole;
}

// A split leaves each CTA of the cluster at least this many K/V tiles: the merge costs about what 2-3
// tiles do. Measured on an H100 (graph replay, docs/perf-log.md v8.4): (1,8,1024,64), 8 tiles split in 2,
// 14.0 us against 15.2 unsplit; (1,8,512,128), 4 tiles split in 2, 15.9 against 12.0; (1,8,512,64), 4
// tiles split in 4, 11.4 against 12.1 (and 9.9 on mma_sm80).
inline constexpr int kMinTilesPerSplit = 4;

// What a cluster split's launch and merge cost, in tiles of the split item's time: without it a split
// of 128-row items into 2 tied with the split_keys row (64-row items, one CTA each, the same SMs) and
// won the tie, ~35% slower. Measured on an H100 (graph replay, docs/perf-log.md v9.1): (1,8,1024,64)
// 14.5 us split over clusters of 2 against 10.7 with the keys split inside the CTA.
inline constexpr double kMergeTiles = 2.0;
// split_keys rows also run split over clusters when a caller forces the variant (Choice), never by this
// selection: at (1,8,512,64) in clusters of 2 each CTA's GEMMs and softmax end ~2,100 cycles earlier
// than unsplit, but the merge took ~4,300 (H100, graph replay 8.06 -> 8.67 us; clock trace,
// docs/perf-log.md v13.9).

// SMs that clusters of `size` CTAs (one per SM) can fill at once: a cluster runs within one GPC, and
// GPCs hold SM counts that 4 and 8 do not always divide. Measured with cudaOccupancyMaxActiveClusters
// on an H100 (132 SMs): 66 clusters of 2, 30 of 4 (120 SMs). The estimate for 4 and 8 leaves an eighth;
// the launch asks the driver and splits less where the clusters would not all fit.
constexpr double cluster_slots(int size, int sm_count) { return size >= 4 ? sm_count - sm_count / 8 : sm_count; }

// How a call runs: among the rows of its head size, the one that should end first; the first on a tie;
// row -1 if no row has this head size. A row with at least as many items (block_m query rows of one
// (batch, head)) as SMs runs the persistent grid, estimated as rounds of items (ceil(items / sm_count))
// times the item's tiles times block_m x block_n over row_speed (causal_row_speed with a causal mask). With fewer items, each item's K/V tiles are split among a cluster
// of CTAs (a power of two, at most kMaxSplits, each with at least kMinTilesPerSplit tiles, the clusters
// within cluster_slots): one round of rows times the tiles of one split and kMergeTiles. A split_keys row runs only
// where its items (64 rows) fit in one wave, each CTA over all the item's tiles. In floating point:
// items can pass 2^63. FP8 inputs take the FP8 rows, which are not split. The rows are the hand-made
// rows' buckets, each the GPU model's tuned row where its table has one (bucket_row of kTunedRows, or a
// test's table): cc 0 for the hand-made rows alone. Calls with score modifiers (score_mods) take the
// rows that have them compiled (kScoreModRow), unsplit.
template <int N>
constexpr Choice choose_config_in(const TunedRow (&tuned)[N], int head_dim, long long batch_heads, long long seqlen_q,
                                  long long seqlen_k, bool causal, int sm_count, bool fp8, int cc,
                                  bool score_mods = false) {
  Choice best{-1, 1};
  double best_time = 0;
  for (int hand = 0; hand < kHandCount; ++hand) {
    const int i = score_mods ? hand : bucket_row(tuned, hand, cc, sm_count);
    if (kConfigs[i].head_dim != head_dim || kConfigs[i].fp8 != fp8) continue;
    if (score_mods && !score_mod_row(i)) continue;
    const long long bm = kConfigs[i].block_m();
    const double items = static_cast<double>((seqlen_q + bm - 1) / bm) * static_cast<double>(batch_heads);
    const double tiles = static_cast<double>((seqlen_k + kConfigs[i].block_n - 1) / kConfigs[i].block_n);
    int splits = 1;
    if (kConfigs[i].split_keys) {
      if (items > sm_count) continue;  // one item per CTA, every CTA in the first wave
    } else if (!fp8 && !score_mods) {
      while (2 * splits <= kMaxSplits && 2 * splits * kMinTilesPerSplit <= tiles &&
             items * 2 * splits <= cluster_slots(2 * splits, sm_count))
        splits *= 2;
    }
    const double rounds = ceil_positive(items / sm_count);  // rounds of items
    const double tiles_per_item = splits > 1 ? ceil_positive(tiles / splits) : (tiles > 1 ? tiles : 1.0);
    const double speed = causal ? kConfigs[i].causal_row_speed : kConfigs[i].row_speed;
    const double merge = splits > 1 ? kMergeTiles : 0.0;
    // Per tile, block_m rows over block_n keys: a row of narrower tiles runs more of them.
    const double time =
        rounds * (tiles_per_item + merge) * static_cast<double>(bm) * kConfigs[i].block_n / speed;
    if (best.row < 0 || time < best_time) best = {i, splits}, best_time = time;
  }
  return best;
}
constexpr Choice choose_config(int head_dim, long long batch_heads, long long seqlen_q, long long seqlen_k,
                               bool causal, int sm_count, bool fp8 = false, int cc = 0, bool score_mods = false) {
  return choose_config_in(kTunedRows, head_dim, batch_heads, seqlen_q, seqlen_k, causal, sm_count, fp8, cc, score_mods);
}

constexpr bool valid(const TileConfig& c) {
  return c.head_dim % 64 == 0 && c.head_dim >= 64 && c.head_dim <= 256 &&  // whole 64-column blocks; O <= 128 regs
         c.block_n % 16 == 0 && c.block_n >= 16 && c.block_n <= 256 &&    // wgmma N and TMA box rows <= 256
         c.stages >= 2 && c.consumers >= 2 && c.consumers <= 3 &&          // pingpong needs two; 4 x 128 threads max
         c.producer_regs >= 24 && c.consumer_regs <= 256 &&                 // setmaxnreg's range
         c.producer_regs % 8 == 0 && c.consumer_regs % 8 == 0 &&            // setmaxnreg's granularity
         128 * (c.producer_regs + c.consumers * c.consumer_regs) <= c.threads() * c.launch_regs() &&  // the CTA's registers
         c.kv_tile_bytes() % 1024 == 0 && c.q_bytes() % 1024 == 0 &&       // tiles stay 1024-byte aligned
         c.head_dim % c.block_cols() == 0 &&                               // whole blocks of row_bytes()
         (c.fp8 || 2 * c.block_m() * c.partial_row_bytes() <= c.vt_offset()) &&  // partial rows fit over the rings
         (!c.fp8 || ((c.head_dim == 128 || c.head_dim == 64) && (c.block_n == 128 || c.block_n == 96) && !c.split_keys)) &&  // one block of Q/K, of V^T rows
         (c.row_bytes() == 128 || c.row_bytes() == 64) &&                    // the swizzles TMA and wgmma share
         c.smem_bytes() <= 227 * 1024;                                       // sm_90's per-block opt-in limit
}

constexpr bool all_valid() {
  for (const TileConfig& c : kConfigs)
    if (!valid(c)) return false;
  for (const TunedRow& t : kTunedRows) {  // each tuned row replaces a hand-made 16-bit row of its bucket
    if (t.config.fp8) return false;     // TunedRows instantiates fp16 and bf16 only
    bool has_bucket = false;
    for (const TileConfig& h : kHandRows) has_bucket = has_bucket || same_bucket(h, t.config);
    if (!has_bucket) return false;
  }
  return true;
}
static_assert(all_valid(), "invalid wgmma_sm90 tile configuration");
// Token indices are int in the kernel (TMA coordinates are signed 32-bit): key0 + block_n and
// q0 + block_m (each <= 256) must stay below 2^31 for any length validation admits.
static_assert(EVOSDPA_MAX_SEQLEN + 256 + 256 < 2147483647LL, "int token arithmetic overflows");

}  // namespace evosdpa::detail::wgmma_sm90
