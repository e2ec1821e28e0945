// The Hopper attention forward kernel: CTAs of 1 + `consumers` warpgroups taking work items of block_m
// query rows of one (batch, head) as their Schedule says (wgmma_scheduler.cuh: a persistent grid of one
// CTA per SM, or an item's K/V tiles split over a cluster), and writing them out with its Epilogue
// (wgmma_epilogue.cuh, wgmma_merge.cuh).
//   Producer (warpgroup 0, one thread): per item, TMA loads of K and V tiles into a ring of `stages`
//     buffers, each filling a "full" mbarrier and waiting on the stage's "empty" one, and of the Q tile
//     of the item kQBuffers - 1 ahead into the Q ring: the next item's loads run under this one's end.
//     With a mask tensor, one thread of warp 1 + c of the same warpgroup loads consumer c's mask tiles.
//   Consumers (warpgroups 1.., 64 query rows each): per K/V tile, S = Q.K^T by wgmma from shared
//     memory, mask, online softmax in registers, P converted in place to wgmma A fragments, O += P.V by
//     wgmma with P from registers, K and V released as soon as their GEMM is done. The P.V of one tile
//     runs under the softmax of the next, and the warpgroups take turns with the tensor cores (rows with
//     TileConfig::turns).
//     O is normalised once at the end and leaves through the Epilogue.
// Registers move from the producer to the consumers with setmaxnreg (the table's split).
// FP8 (E4M3) rows: wgmma k32 takes both operands K-major, so warps 1-3 of the producer warpgroup
// transpose each V tile into a second ring (transpose_v), with the keys of each 16-key group in the
// order P's fragments hold them (to_fragments); the descales fold into the score scale and O.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"
#include "kernels/rtc_std.hpp"
#include "kernels/score_mods.cuh"
#include "kernels/wgmma/cu_tensor_map.hpp"
#include "kernels/wgmma/ptx.cuh"
#include "kernels/wgmma/wgmma_config.hpp"
#include "kernels/wgmma/wgmma_epilogue.cuh"
#include "kernels/wgmma/wgmma_fragments.cuh"
#include "kernels/wgmma/wgmma_alibi.cuh"
#include "kernels/wgmma/wgmma_mask.cuh"
#include "kernels/wgmma/wgmma_merge.cuh"
#include "kernels/wgmma/wgmma_ops.cuh"
#include "kernels/wgmma/wgmma_scheduler.cuh"
#include "kernels/wgmma/wgmma_smem.cuh"

namespace evosdpa::detail::wgmma_sm90 {

// ---- the CTA's plan and its items' Work in shared memory ---------------------------------------------
// With CallSequences the sequence's fields stay out of it (read_work takes them from the parameter bank).
template <typename Seqs, int kIndex>
__device__ __forceinline__ void write_work(const Smem<kIndex>& sm, int buf, const Work& w) {
  const int fields[Work::kFields] = {w.q0,    w.head,    w.batch, w.t0,  w.n_tiles,      w.kv_head,
                                     w.q_start, w.k_start, w.len_q, w.len_k, w.causal_offset};
  constexpr int kWritten = Seqs::kOwn ? Work::kFields : Work::kItemFields;
#pragma unroll
  for (int f = 0; f < kWritten; ++f) st_shared(sm.work(buf, f), static_cast<uint32_t>(fields[f]));
}

// With CallSequences (sequence.cuh) the sequence's rows, lengths and diagonal are the call's: read from
// the parameter bank (the rows' starts the constant 0) rather than from shared memory into registers kept
// through the loops (FP8 rows spilled 8 bytes otherwise).
template <typename Seqs, int kIndex>
__device__ __forceinline__ Work read_work(const KernelParams& p, const Smem<kIndex>& sm, int buf) {
  constexpr int kRead = Seqs::kOwn ? Work::kFields : Work::kItemFields;
  int f[Work::kFields];
#pragma unroll
  for (int i = 0; i < kRead; ++i) f[i] = static_cast<int>(ld_shared_u32(sm.work(buf, i)));
  if constexpr (!Seqs::kOwn) {
    const Sequence s = Seqs::of(p, 0);
    return {f[0], f[1], f[2], f[3], f[4], f[5], s.q_start, s.k_start, s.len_q, s.len_k, s.causal_offset};
  }
  return {f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10]};
}

// ---- TMA loads ----------------------------------------------------------------------------------
// Q of Work w into buffer `buf`, completing on its q_full.
// An item past its sequence's end (packed batches) has no row to load: q_full completes at once, so that
// the consumers do not wait a load's latency for an item they only pass through. (With CallSequences every
// item of the grid has rows: no test.)
template <typename Seqs, int kIndex>
__device__ __forceinline__ void issue_q(const CUtensorMap* tq, const KernelParams& p, const Smem<kIndex>& sm, int buf,
                                        const Work& w) {
  if (Seqs::kOwn && w.q0 >= w.len_q) {
    mbar_arrive(sm.q_full(buf));
    return;
  }
  mbar_expect_tx(sm.q_full(buf), Smem<kIndex>::kQBytes);
  for (int b = 0; b < Smem<kIndex>::kDBlocks; ++b)
    tma_load(sm.q(buf) + b * Shape<kIndex>::kBlockM * 128, tq, sm.q_full(buf), Smem<kIndex>::kBlockCols * b,
             w.q_start + w.q0, w.head, q_map_batch<Seqs>(p, w));
}

// Tile t of Work w's keys or values (`map`) into the ring buffer at `dst`, completing on `full`.
// Packed keys: the rows past the sequence's end are the next sequence's (or TMA's zeros past total_k);
// their scores are masked, so their P is 0.
template <typename Seqs, int kIndex>
__device__ __forceinline__ void issue_kv(const CUtensorMap* map, const KernelParams& p, uint32_t dst, uint32_t full,
                                         const Work& w, int t) {
  using S = Smem<kIndex>;
  constexpr int kBlockN = kConfigs[kIndex].block_n;
  mbar_expect_tx(full, S::kTileBytes);
  for (int b = 0; b < S::kDBlocks; ++b)
    tma_load(dst + b * kBlockN * 128, map, full, S::kBlockCols * b, w.k_start + (w.t0 + t) * kBlockN, w.kv_head,
             k_map_batch<Seqs>(p, w));
}

// ---- the CTA's plan ---------------------------------------------------------------------------------
// Thread 32 (warp 1 of the producer warpgroup), from the kernel's entry, while thread 0 initialises the
// other mbarriers: the CTA's first item, whose Q and first K tile it loads at once (initialising their
// two barriers itself), its item count and its last item with tiles (whose last turn is kept), in shared
// memory for the producer and the consumers. Without it the first K tile went out ~2,200 cycles after
// the CTA's entry at (1,8,512,64) (clock64 trace: the start barrier, setmaxnreg and the item's
// arithmetic in turn), with the consumers waiting for it. Graph replay on an H100 (docs/perf-log.md
// v9.4): (1,8,512,64) 7.58-7.78 -> 7.33-7.49 us, (1,8,256,64) 6.24-6.69 -> 6.14-6.56. Not more loads
// before the barrier: each split_keys consumer's first K tile here made the barrier later and
// (1,8,512,64) 7.74-7.90, K1 from a second warp 7.84-8.00; the plan without loads, 8.06-8.26.
template <int kIndex, typename Schedule>
__device__ __forceinline__ void plan_cta(const CUtensorMap* tq, const CUtensorMap* tk, const KernelParams& p,
                                         const Geometry& g, const Smem<kIndex>& sm) {
  using Seqs = typename Schedule::Seqs;
  mbar_init(sm.q_full(0), 1);
  mbar_init(sm.k_full(0), 1);
  mbar_init_fence();
  if constexpr (Schedule::kDynamic) {
    // The first item, or the end (its Q buffer completes at once and every role stops). The plan: 1 and 0
    // with an item (its count is not known; 0: the consumers' turns start), else 0 and -1; the cursor
    // for the producer's walk.
    Cursor cursor;
    const Work w = Schedule::locate(p, g, cursor, blockIdx.x);
    write_work<Seqs>(sm, 0, w);
    issue_q<Seqs>(tq, p, sm, 0, w);
    if (w.n_tiles > 0) issue_kv<Seqs, kIndex>(tk, p, sm.k(0), sm.k_full(0), w, 0);
    st_shared(sm.plan(0), w.is_end() ? 0u : 1u);
    st_shared(sm.plan(1), w.is_end() ? ~0u : 0u);
    st_shared(sm.plan(2), static_cast<uint32_t>(cursor.b));
    st_shared(sm.plan(3), static_cast<uint32_t>(cursor.base));
  } else {
    const int items = Schedule::items(g);
    int last = items - 1;
    if (items > 0) {
      const Work w = Schedule::item(p, g, 0);
      write_work<Seqs>(sm, 0, w);
      issue_q<Seqs>(tq, p, sm, 0, w);
      if (w.n_tiles > 0) issue_kv<Seqs, kIndex>(tk, p, sm.k(0), sm.k_full(0), w, 0);
      // Searched from the end: summing every item's tiles first held the consumers back from their first
      // item (causal D=64 L=512-1024, ~31 items per CTA: 4% of the run).
      while (last > 0 && Schedule::item(p, g, last).n_tiles == 0) --last;
      if (last == 0 && w.n_tiles == 0) last = -1;
    }
    st_shared(sm.plan(0), static_cast<uint32_t>(items));
    st_shared(sm.plan(1), static_cast<uint32_t>(last));
  }
}

// The CTA's item count, from its plan; a constant where the schedule gives each CTA one item (the
// cluster split's producer would spill at 24 registers with a loop of unknown length).
template <typename Schedule, int kIndex>
__device__ __forceinline__ int cta_items(const Smem<kIndex>& sm) {
  return Schedule::kOneItem ? 1 : static_cast<int>(ld_shared_u32(sm.plan(0)));
}

// ---- producer -------------------------------------------------------------------------------------
// Q of the CTA's item `iter` > 0 (Work w) into buffer iter % kQBuffers, once the consumers have released
// it (its previous use, kQBuffers items earlier, is done), and the item's Work beside it: the consumers
// read it once q_full completes (the arrival releases the stores), instead of each computing the item
// (the causal order's arithmetic on their critical path between items).
template <typename Seqs, int kIndex>
__device__ __forceinline__ void load_q(const CUtensorMap* tq, const KernelParams& p, const Smem<kIndex>& sm, int iter,
                                       const Work& w) {
  constexpr int kBuffers = TileConfig::kQBuffers;
  const int buf = iter % kBuffers;
  if (iter >= kBuffers) mbar_wait(sm.q_empty(buf), (iter / kBuffers - 1) & 1);
  write_work<Seqs>(sm, buf, w);
  issue_q<Seqs>(tq, p, sm, buf, w);
}

// For each work item: its K and V tiles through the ring, whose position carries on from one item to the
// next, and the Q of the next item (the first item's Q and first K tile are plan_cta's). Each item's
// Work is computed once, before its Q goes out (a clock64 trace at (1,8,512,64) had ~1,350 cycles
// between the first Q and K when the loop computed the item again and divided by the query group).
template <int kIndex, typename Schedule>
__device__ void produce(const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv, const KernelParams& p,
                        const Geometry& g, const Smem<kIndex>& sm) {
  constexpr TileConfig kCfg = kConfigs[kIndex];
  using Seqs = typename Schedule::Seqs;
  static_assert(TileConfig::kQBuffers == 2, "the loop keeps the Work of one item ahead");
  int tiles = 0;                                   // K/V tiles loaded so far
  const int items = cta_items<Schedule>(sm);
  if (items == 0) return;
  Work next = read_work<Seqs>(p, sm, 0);
  for (int iter = 0; Schedule::kDynamic || iter < items; ++iter) {
    // DynamicSchedule: the item's Work from its slot, where load_q put it (in 24 registers, the thread
    // cannot hold it and the next one's: 56 bytes spilled).
    const Work w = Schedule::kDynamic ? read_work<Seqs>(p, sm, iter % TileConfig::kQBuffers) : next;
    if constexpr (Schedule::kDynamic)
      if (w.is_end()) break;
    // The claim of the next item goes out first; its answer is read only at load_next_q, under this
    // item's first loads. On equal-length sequences (H100, fp16, 16k tokens, docs/perf-log.md v12.1) the
    // counter ran 1.5-5% behind the fixed deal while only the storing threads released Q buffers (the
    // same order with a computed ticket as fast as the fixed deal, with the atomic's answer discarded as
    // slow as the counter; a claim a whole item ahead or relaxed K/V arrivals no better; a claiming thread
    // of its own spilled this warpgroup's 24 registers), and 0-5% since every consumer thread releases
    // them (non-causal within 1%, causal 2-5%).
    unsigned ticket = 0;
    if constexpr (Schedule::kDynamic) ticket = Schedule::claim(p);
    // A dynamic CTA always loads a next Work: its next item's or the end, which stops the consumers.
    const bool ahead = Schedule::kDynamic || iter + 1 < items;
    // The next Q waits for its buffer, which the epilogue releases after this item's first S GEMM. It goes
    // after the loads of the tile that reuses no stage of this item (tile stages - 1, or the last): any
    // later tile waits for tile 0's stage, freed after that GEMM anyway. Issued after tile 0, it held
    // tile 1 back by a load latency per item (clock64 trace at D=64 L=512: ~2,800 cycles in ~21,000).
    const int q_after = min(kCfg.stages, w.n_tiles) - 1;
    const auto load_next_q = [&] {
      if constexpr (Schedule::kDynamic) {
        // The walk's cursor stays in the plan between items, for the same reason.
        Cursor cursor{static_cast<int>(ld_shared_u32(sm.plan(2))), static_cast<int>(ld_shared_u32(sm.plan(3)))};
        load_q<Seqs>(tq, p, sm, iter + 1, Schedule::locate(p, g, cursor, ticket));
        st_shared(sm.plan(2), static_cast<uint32_t>(cursor.b));
        st_shared(sm.plan(3), static_cast<uint32_t>(cursor.base));
      } else {
        next = Schedule::item(p, g, iter + 1);
        load_q<Seqs>(tq, p, sm, iter + 1, next);
      }
    };
    if (w.n_tiles == 0 && ahead) load_next_q();
    const auto load_k = [&](int t) {
      const int c = tiles + t, s = c % kCfg.stages;  // ring position and stage
      if (c >= kCfg.stages) mbar_wait(sm.k_empty(s), (c / kCfg.stages - 1) & 1);  // the phase that freed s
      issue_kv<Seqs, kIndex>(tk, p, sm.k(s), sm.k_full(s), w, t);
    };
    const auto load_v = [&](int t) {
      const int c = tiles + t, s = c % kCfg.stages;
      if (c >= kCfg.stages) mbar_wait(sm.v_empty(s), (c / kCfg.stages - 1) & 1);
      issue_kv<Seqs, kIndex>(tv, p, sm.v(s), sm.v_full(s), w, t);
    };
    // split_keys: K of tile t goes out before V of tile t - 1, which is needed only after S_{t-1}'s
    // softmax, so that the next consumer's first K tile is not behind a V: (1,8,512,128) 10.9 -> 9.8 us
    // under graph replay. Not with a row split, where K of tile t waits for its stage (both consumers'
    // S_{t-2}) and V_{t-1} would wait with it: D=128 non-causal L=8192 fp16 697 -> 603 TFLOP/s.
    constexpr int kVLag = kCfg.split_keys ? 1 : 0;
    for (int t = 0; t < w.n_tiles + kVLag; ++t) {
      if (t < w.n_tiles && (iter > 0 || t > 0)) load_k(t);  // the first is plan_cta's
      if (t < kVLag) continue;
      load_v(t - kVLag);
      if (t - kVLag == q_after && ahead) load_next_q();
    }
    tiles += w.n_tiles;
  }
}

// ---- mask tensor loads ---------------------------------------------------------------------------------
// A mask tensor's tiles for consumer warpgroup `consumer`, by one thread of the producer warpgroup (a warp
// of its own per consumer, so that the two never wait for each other): per item, the tiles the warpgroup
// computes (warpgroup_tiles, as consume_item counts them), each once the warpgroup has read the previous
// one, so that a tile loads while the warpgroup computes the one before (and an item's first tile under
// the previous item's last). The thread reads each item's Work from its Q buffer as the consumers do, and
// releases the buffer too (q_empty counts it), so that the buffer's next item cannot overwrite a Work it
// has not read.
template <typename T, int kIndex, typename Schedule>
__device__ void load_masks(const CUtensorMap* map, const KernelParams& p, const Smem<kIndex>& sm, int consumer) {
  constexpr int BN = kConfigs[kIndex].block_n;
  static_assert(!kConfigs[kIndex].split_keys, "a warpgroup's own 64 rows and every tile of them (score_mod_row)");
  using Mods = typename Schedule::Mods;
  using Mask = MaskTile<T, BN, Mods::kMask, Mods::kSoftcap>;
  constexpr int kBuffers = TileConfig::kQBuffers;
  const int items = cta_items<Schedule>(sm);
  const bool one_row = p.mask_seq_stride == 0;
  const uint32_t stage = sm.mask_stage(consumer, Mask::kStageBytes);
  int loads = 0;  // tiles loaded into the stage so far
#pragma unroll 1
  for (int iter = 0; Schedule::kDynamic ? items > 0 : iter < items; ++iter) {
    const int buf = iter % kBuffers;
    mbar_wait(sm.q_full(buf), (iter / kBuffers) & 1);
    const Work w = read_work<typename Schedule::Seqs>(p, sm, buf);
    mbar_arrive(sm.q_empty(buf));
    if constexpr (Schedule::kDynamic)
      if (w.is_end()) break;
    const int row0 = w.q0 + 64 * consumer, head = w.head, batch = w.batch;
    // The keys of its tiles: from key to key_end, in steps of BN (few registers: the thread has 24).
    int key = w.t0 * BN;
    const int key_end = key + warpgroup_tiles<Mods>(p, w, row0, BN) * BN;
#pragma unroll 1
    for (; key < key_end; key += BN, ++loads) {
      if (loads > 0) mbar_wait(sm.mask_empty(consumer), (loads - 1) & 1);
      Mask::load(map, stage, sm.mask_full(consumer), p, head, batch, key, row0, one_row);
    }
  }
}

// ---- V transpose (FP8) -------------------------------------------------------------------------------
// Warps 1-3 of the producer warpgroup, for each K/V tile in ring order: once TMA has put V ([keys][D
// bytes], swizzled) in v(s) and the consumers have released vt(s), write V^T ([D][128 keys], 128B-
// swizzled, K-major for wgmma; a 96-key tile fills its rows' first 96 bytes) to vt(s). Position 4q + j of
// each 16-key group holds key 2q + (j & 1) + 8 (j >> 1): the keys of P's fragment register for quad lane
// q (to_fragments), so P needs no shuffle.
// The tile is cut into units of 32 keys x 16 D columns: one `ldmatrix.x4.trans` of the unit as four 8-key
// x 8-pair matrices of 16-bit pairs gives lane (g, q) keys {2q, 2q + 1} (+ 8, + 16, + 24) of D columns 2g
// and 2g + 1; four byte permutes make the 4-key words of those two columns' V^T rows for the unit's two
// 16-key groups, and one `stmatrix.x4` writes them. Each stored matrix holds 8 D rows whose swizzled
// 16-byte units differ (even columns of lanes g < 4, odd ones of g >= 4, and the reverse): no bank
// conflicts; nor in the loads (8 consecutive keys). Against 16-byte loads, byte permutes and 4-byte
// stores per lane: D=128 0.6-1.5% faster, D=64 1.1% slower (H200, docs/perf-log.md v13.15).
// How the warps share a tile's units:
//  - 96-key tiles (three 32-key blocks): warp w takes block w, its D chunks unrolled. The swizzle of a
//    lane's load row and store row does not depend on the chunk (a multiple of 8 columns), so each address
//    is a per-tile base XOR or plus a constant. Unrolled so (then over units w, w + 3, ..., one
//    instantiation per warp), the 96-key row ran (4,16,4096,128) in 607 us against 628-632 with the rolled
//    loop below, (16,16,1024,128) 192.7 against 199 (H200, docs/perf-log.md v13.23).
//  - 128-key tiles: a rolled loop over units w, w + 3, ...; unrolled as above, D = 64 causal (32,32,512)
//    ran 146 us against 133.4 (and (4,32,4096,64) 1,112 against 1,142).
template <int kIndex, typename Schedule>
__device__ void transpose_v(const KernelParams& p, const Geometry& g, const Smem<kIndex>& sm) {
  constexpr TileConfig kCfg = kConfigs[kIndex];
  static_assert(kCfg.block_n % 32 == 0 && kCfg.block_n <= 128 && Smem<kIndex>::kDBlocks == 1,
                "whole 32-key units in one 128-byte row of V^T; one block of D");
  // Transposing warps; 16-byte chunks of D per key row; 32-key blocks and units of a tile; V's row pitch,
  // over which it is swizzled (chunk c of key k sits at c ^ ((k * kRowBytes / 128) & (kRowBytes / 16 -
  // 1)): k & 7 for 128-byte rows, (k / 2) & 3 for 64-byte ones).
  constexpr int kWarps = 3, kChunks = kCfg.head_dim / 16, kBlocks = kCfg.block_n / 32, kUnits = kChunks * kBlocks;
  constexpr int kRowBytes = Smem<kIndex>::kRowBytes;
  constexpr bool kBlockPerWarp = kBlocks == kWarps;
  static_assert(!kBlockPerWarp || kChunks % 2 == 0, "chunks in pairs");
  const int warp = static_cast<int>(threadIdx.x / 32) - 1, lane = threadIdx.x % 32;
  // The row whose address this lane gives: row i of matrix mat. Loads: key 8 mat + i of the unit.
  // Stores: D column 2i + ((mat & 1) ^ (i >= 4)) of the unit's 16, in its 16-key group mat >> 1.
  const int mat = lane / 8, i = lane % 8;
  const int st_col = 2 * i + ((mat & 1) ^ (i >= 4 ? 1 : 0)), st_group = mat >> 1;
  // One block per warp: the lane's load row (swizzled) in chunk 0 of the warp's block, chunk ch at XOR
  // ch << 4; its store row in chunk 0 (group 2 warp + st_group, swizzled by the row's low bits), chunk ch
  // 16 rows further. Both rings' tiles are 1024-byte aligned: adding them leaves bits 4-6 alone.
  const int ld_key = 32 * warp + 8 * mat + i;
  const uint32_t ld_lane = ld_key * kRowBytes + ((((ld_key * kRowBytes) / 128) & (kRowBytes / 16 - 1)) << 4);
  const uint32_t st_lane = st_col * 128 + (((2 * warp + st_group) ^ (st_col & 7)) << 4);
  // The data's row (lane / 4) in the stored matrices: column 2g (selector 0x6420: low bytes of the key
  // pairs) in matrix 0 and 2 if g < 4, else 2g + 1 (0x7531: high bytes).
  const bool odd_first = lane / 4 >= 4;
  const uint32_t sel_a = odd_first ? 0x7531u : 0x6420u, sel_b = odd_first ? 0x6420u : 0x7531u;
  const auto permute = [&](const uint32_t (&r)[4], uint32_t (&w)[4]) {
    w[0] = byte_perm_r(r[0], r[1], sel_a), w[1] = byte_perm_r(r[0], r[1], sel_b);
    w[2] = byte_perm_r(r[2], r[3], sel_a), w[3] = byte_perm_r(r[2], r[3], sel_b);
  };
  const int items = cta_items<Schedule>(sm);
  int c = 0;  // ring position
  for (int iter = 0; iter < items; ++iter) {
    const int n_tiles = Schedule::item(p, g, iter).n_tiles;
    for (int t = 0; t < n_tiles; ++t, ++c) {
      const int s = c % kCfg.stages;
      const uint32_t phase = (c / kCfg.stages) & 1;
      mbar_wait(sm.v_full(s), phase);
      if (c >= kCfg.stages) mbar_wait(sm.vt_empty(s), phase ^ 1);
      if constexpr (kBlockPerWarp) {
        const uint32_t src = sm.v(s) + ld_lane, dst = sm.vt(s) + st_lane;
        // Two chunks' loads, then their stores (ldmatrix and stmatrix are volatile: they issue in order).
#pragma unroll
        for (int ch = 0; ch < kChunks; ch += 2) {
          uint32_t r[2][4], w[4];
          ldmatrix_x4_trans(r[0], src ^ (ch << 4));
          ldmatrix_x4_trans(r[1], src ^ ((ch + 1) << 4));
          permute(r[0], w);
          stmatrix_x4(dst + ch * 16 * 128, w);
          permute(r[1], w);
          stmatrix_x4(dst + (ch + 1) * 16 * 128, w);
        }
      } else {
        const uint32_t src = sm.v(s), dst = sm.vt(s);
#pragma unroll 1
        for (int u = warp; u < kUnits; u += kWarps) {
          const int ch = u % kChunks, kb = (u / kChunks) * 32;  // the unit's D chunk and first key
          const int key = kb + 8 * mat + i;
          const int swz = (key * kRowBytes / 128) & (kRowBytes / 16 - 1);
          uint32_t r[4], w[4];
          ldmatrix_x4_trans(r, src + key * kRowBytes + ((ch ^ swz) << 4));
          permute(r, w);
          const int d = 16 * ch + st_col, group = kb / 16 + st_group;
          stmatrix_x4(dst + d * 128 + ((group ^ (d & 7)) << 4), w);
        }
      }
      fence_async_shared();  // the writes, before the consumers' wgmma (async proxy) reads them
      mbar_arrive(sm.vt_full(s));
      mbar_arrive(sm.v_empty(s));
    }
  }
}

// ---- consumer -------------------------------------------------------------------------------------
// The thread's accumulator element i of an m64nN wgmma sits in row 16*warp + lane/4 + 8*((i>>1)&1) and
// column 8*(i>>2) + 2*(lane%4) + (i&1) of its warpgroup's 64 x N tile.

// Scores of keys a row may not see become -inf: keys past the sequence's end (TMA's zeros past seqlen_k,
// or a packed batch's next sequence), with a causal mask keys past the row's diagonal, and with a
// sliding window keys outside it. Per row the last (and first) key it sees, less the tile's first key
// and the lane's column offset, leaves one compare with a constant per score and bound (the per-score
// key and row arithmetic was 227 instructions per masked tile at D=64, 128 now).
template <int kBlockN, typename Mods>
__device__ __forceinline__ void mask_tile(float (&s)[kBlockN / 2], const KernelParams& p, const Work& w, int key0,
                                          int row_lo, int lane) {
  int limit[2], from[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int diagonal = row_lo + 8 * r + w.causal_offset, lane_key0 = key0 + 2 * (lane & 3);
    limit[r] = last_key<Mods>(p, w.len_k, diagonal) - lane_key0;
    from[r] = first_key<Mods>(p, diagonal) - lane_key0;
  }
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) {
    const int col = 8 * (i >> 2) + (i & 1);
    if (col > limit[(i >> 1) & 1]) s[i] = -INFINITY;
    if constexpr (Mods::kWindow)
      if (col < from[(i >> 1) & 1]) s[i] = -INFINITY;
  }
}

// How a row's P is formed: P = 2^(S - m + offset), m the row's max so far, so that its largest P is
// 2^offset exactly, which P's type holds: on peaked rows (attention sinks, sharp heads) that one key's P
// carries O, and O / l, with l the sum of the unrounded P, is then exact for it. 16-bit P: offset 0.
// E4M3 P (at most 448): offset 8, so that the small values stay far above E4M3's subnormals
// (FlashAttention-3's Max_offset; the library's FP8 baseline, P <= 256). A reference max that moved only
// past a slack (FlashAttention-4's conditional rescaling) rounds the largest P instead: with 8 (16-bit
// P up to 2^8) wgmma_sm90's O error reached twice mma_sm80's at the tail (bf16, H200, 300 seeds: err /
// tolerance p99 0.76-0.80, max 0.83-0.89, against 0.43 and 0.44 without; a fuzzer found calls past the
// rule), for 2-3% of speed; with 0.8 on E4M3 (P up to 445.7) 2.4-2.8x the baseline's on inputs of sigma 6
// (docs/perf-log.md v13.24, v14.4). O / l cancels the offset, the lse takes it off.
template <bool kFp8>
struct PForm {
  static constexpr float kOffset = kFp8 ? 8.f : 0.f;
};

// Online softmax over one tile for the thread's two rows: move the reference max m (log2 domain) if the
// tile's max passes it, turn the scores into P = 2^(S - m) and fold them into the
// partial row sums l, rescaled by alpha = 2^(m_old - m_new) (1 where m stayed); O must be rescaled by alpha
// too (rescale_o), once the P.V in flight is done.
// kFolded: s holds raw scores and scale (> 0, so it commutes with the max) is applied inside the
// exponent, one FFMA per score instead of a multiply and a subtract; otherwise s is already scaled.
// A row that has seen only masked keys keeps m = -inf and exponentiates against 0: P = 0, never NaN.
// The four lanes of a row hold disjoint columns: the max is shared among them, l stays partial.
// Max and sum run as four independent chains per row (the thread's 32 values of a row in a single chain
// left the warps waiting on each FMNMX and FADD: ncu's top stall, "wait", 1.86 per instruction at D=64).
// kBias (S holds an additive mask's bias, of any size): the folded exponent takes the exact product
// s * scale against the max's rounded one, so every P of a row carries a factor 2^r, r up to |m| * 2^-24,
// which O / l cancels while P stays a float; past |m| = 2^30 it need not (a bf16 bias of -1e10 on a
// row's first tiles, a padded prefix, gave P = inf there and, once later keys moved m, l = inf * 0: a
// NaN row). Such a row's keys up to that tile are hidden instead (P = 0): exact where the row has a key
// of ordinary size later, and a row whose largest biased score stays past the bound reads as a row
// with no visible key (evosdpa.h). One compare and select per row and tile.
template <int kBlockN, bool kFolded, typename Form, bool kBias = false>
__device__ __forceinline__ void softmax_step(float (&s)[kBlockN / 2], float scale, float (&m)[2], float (&l)[2],
                                             float (&alpha)[2]) {
  // Element i belongs to row (i >> 1) & 1; chain c = (i & 1) + 2 * ((i >> 2) & 1) of that row.
  float part[2][4], sum[2][4];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) part[r][c] = -INFINITY, sum[r][c] = 0.f;
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) {
    float& x = part[(i >> 1) & 1][(i & 1) + 2 * ((i >> 2) & 1)];
    x = fmaxf(x, s[i]);
  }
  float base[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = fmaxf(fmaxf(part[r][0], part[r][1]), fmaxf(part[r][2], part[r][3]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    if constexpr (kFolded) tile_max *= scale;
    if (tile_max > m[r]) {  // true too for m = -inf and a finite max; false for NaN
      alpha[r] = fast_exp2(m[r] - tile_max);
      m[r] = tile_max;
      l[r] *= alpha[r];
    } else {
      alpha[r] = 1.f;
    }
    if constexpr (kFolded && kBias)
      base[r] = fabsf(m[r]) < 0x1p30f ? m[r] - Form::kOffset : INFINITY;  // m = -inf too: P = 0 either way
    else
      base[r] = m[r] == -INFINITY ? 0.f : m[r] - Form::kOffset;
  }
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) {
    const float b = base[(i >> 1) & 1];
    s[i] = kFolded ? fast_exp2(fmaf(s[i], scale, -b)) : fast_exp2(s[i] - b);
    sum[(i >> 1) & 1][(i & 1) + 2 * ((i >> 2) & 1)] += s[i];
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] += (sum[r][0] + sum[r][1]) + (sum[r][2] + sum[r][3]);
}

// O *= alpha, skipped when no row of the warp moved its max (warp-uniform: no wgmma is issued here).
template <int D>
__device__ __forceinline__ void rescale_o(float (&o)[D / 2], const float (&alpha)[2]) {
  if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] *= alpha[(i >> 1) & 1];
}

// The descriptor of a warpgroup's 64 rows of Q (K-major, swizzled over its rows' bytes), computed once
// per item.
template <int kRowBytes>
__device__ __forceinline__ uint64_t q_desc_of(uint32_t q_rows) { return matrix_desc(q_rows, 16, 8 * kRowBytes, kRowBytes); }

// S = Q.K^T for the stage's K tile: k-steps of 32 bytes (16 fp16/bf16 columns, 32 E4M3 ones), k-step
// kk 32 bytes into block row kk / kSteps of both (kSteps: k-steps per block row, 4 or, for 64-byte
// rows, 2).
// accumulate: S adds to what sc holds (a mask tensor's preload) instead of starting from zero.
template <typename T, int kIndex>
__device__ __forceinline__ void issue_qk(float (&sc)[kConfigs[kIndex].block_n / 2], uint64_t q_desc, uint32_t k_tile,
                                         bool accumulate = false) {
  constexpr int D = kConfigs[kIndex].head_dim, BN = kConfigs[kIndex].block_n;
  constexpr int kRowBytes = Smem<kIndex>::kRowBytes, kSteps = kRowBytes / 32;
  const uint64_t k_desc = matrix_desc(k_tile, 16, 8 * kRowBytes, kRowBytes);
#pragma unroll
  for (int kk = 0; kk < D * static_cast<int>(sizeof(T)) / 32; ++kk) {
    const uint32_t step = (kk % kSteps) * 32;
    const uint64_t a = desc_advance(q_desc, (kk / kSteps) * Shape<kIndex>::kBlockM * kRowBytes + step);
    const uint64_t b = desc_advance(k_desc, (kk / kSteps) * BN * kRowBytes + step);
    mma_ss<BN, T>(sc, a, b, accumulate || kk > 0);
  }
  wgmma_commit();
}

// O += P.V. 16-bit: V is [keys][D], so B is N-major (transpose bit): 8-key groups 1024 bytes apart,
// 64-column blocks BN*128 bytes apart, 16 keys (2048 bytes) per k-step. E4M3: V^T ([D][keys], K-major,
// transpose_v), 32 keys (32 bytes) per k-step, like K in issue_qk.
template <typename T, int kIndex>
__device__ __forceinline__ void issue_pv(float (&o)[kConfigs[kIndex].head_dim / 2],
                                         const uint32_t (&pa)[kPSteps<T, kConfigs[kIndex].block_n>][4], uint32_t v_tile) {
  constexpr int D = kConfigs[kIndex].head_dim, BN = kConfigs[kIndex].block_n;
  if constexpr (sizeof(T) == 1) {
    const uint64_t vt_desc = matrix_desc(v_tile, 16, 1024);
#pragma unroll
    for (int kk = 0; kk < BN / 32; ++kk) mma_rs<D, T>(o, pa[kk], desc_advance(vt_desc, kk * 32));
  } else {
    const uint64_t v_desc = matrix_desc(v_tile, BN * 128, 1024);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) mma_rs<D, T>(o, pa[kk], desc_advance(v_desc, kk * 2048));
  }
  wgmma_commit();
}

// Mask S_j (softcapped first with Mods::kSoftcap, then `capped` puts a mask tensor on it; without a cap a
// mask tensor's or ALiBi's bias is in S already: MaskTile, AlibiTile) and
// run its softmax in the log2 domain (O's rescale is left to the caller). scale_log2: the scores' scale
// times log2(e) (with FP8 inputs times q_descale * k_descale). A tile needs the mask when a key of it lies
// past the sequence's end or outside some row's causal or window bounds (the warpgroup's rows row0 ..
// row0 + 63); it goes last, so that no bias (+inf included) revives a masked score.
template <int kBlockN, typename Form, typename Mods, typename Capped>
__device__ __forceinline__ void scores_to_probs_n(float (&sc)[kBlockN / 2], const KernelParams& p, const Work& w,
                                                  float scale_log2, int key0, int row0, int row_lo, int lane,
                                                  float (&m)[2], float (&l)[2], float (&alpha)[2], Capped&& capped) {
  const int key_last = key0 + kBlockN - 1;
  bool masked = key0 + kBlockN > w.len_k || (p.causal && key_last > row0 + w.causal_offset);
  if constexpr (Mods::kWindow)
    masked = masked || key_last > row0 + w.causal_offset + p.window_right ||
             key0 < row0 + 63 + w.causal_offset - p.window_left;
  if constexpr (Mods::kSoftcap) {  // capped scores are in the log2 domain already, masks go after the cap
    const SoftcapFactors cap = softcap_factors(p, scale_log2);
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) sc[i] = softcap_log2(sc[i], cap.in, cap.out);
    capped(sc);  // a mask tensor onto the capped scores (MaskTile::apply)
    if (masked) mask_tile<kBlockN, Mods>(sc, p, w, key0, row_lo, lane);
    softmax_step<kBlockN, false, Form>(sc, 1.f, m, l, alpha);
  } else if (scale_log2 > 0.f) {  // the usual case: the scale goes into the exponent
    if (masked) mask_tile<kBlockN, Mods>(sc, p, w, key0, row_lo, lane);
    softmax_step<kBlockN, true, Form, Mods::kMask == MaskKind::kAdditive>(sc, scale_log2, m, l, alpha);
  } else {  // scale first: -inf (mask) times a negative or zero scale would be +inf or NaN
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) sc[i] *= scale_log2;
    if (masked) mask_tile<kBlockN, Mods>(sc, p, w, key0, row_lo, lane);
    softmax_step<kBlockN, false, Form>(sc, 1.f, m, l, alpha);
  }
}

// Whether the tile's keys key0 + kBlockN/2 .. are hidden from every row of the warpgroup (rows row0 ..
// row0 + 63): its last row's last visible key lies in the first half. The causal diagonal's tile of an
// item's first 64 rows when items and tiles are aligned (every such tile of the fa3 grid's causal
// shapes: at (32,32,512,64) 4 of the 20 tile turns of a head), a tile half or more past the sequence's
// end. Warpgroup-uniform.
template <int kBlockN, typename Mods>
__device__ __forceinline__ bool second_half_hidden(const KernelParams& p, const Work& w, int key0, int row0) {
  return last_key<Mods>(p, w.len_k, row0 + 63 + w.causal_offset) < key0 + kBlockN / 2;
}

// The first half of a tile's accumulators: the first kBlockN/2 keys' elements, 0 .. kBlockN/4 - 1.
template <int N>
__device__ __forceinline__ float (&first_half(float (&s)[N]))[N / 2] {
  return *reinterpret_cast<float(*)[N / 2]>(&s[0]);
}

// scores_to_probs_n over the tile, or with `half` (second_half_hidden) over its first half alone: the
// hidden half's masking, maxima, exponentials and sums are skipped (half the softmax of such a tile), its
// P set to zero. (Zeroing P's fragments for that half instead, under the same branch, made ptxas
// serialise every wgmma of the kernel for the A fragments' registers, C7511: 15-50% slower.)
template <int kBlockN, typename Form, typename Mods, typename Capped>
__device__ __forceinline__ void scores_to_probs(float (&sc)[kBlockN / 2], const KernelParams& p, const Work& w,
                                                float scale_log2, int key0, int row0, int row_lo, int lane,
                                                float (&m)[2], float (&l)[2], float (&alpha)[2], bool half,
                                                Capped&& capped) {
  if (half) {
    scores_to_probs_n<kBlockN / 2, Form, Mods>(first_half(sc), p, w, scale_log2, key0, row0, row_lo, lane, m, l, alpha,
                                               capped);
#pragma unroll
    for (int i = kBlockN / 4; i < kBlockN / 2; ++i) sc[i] = 0.f;
  } else {
    scores_to_probs_n<kBlockN, Form, Mods>(sc, p, w, scale_log2, key0, row0, row_lo, lane, m, l, alpha, capped);
  }
}

// The rows of a sequence's last V tile past its end, zeroed (16-bit rows with sequences of their own:
// cu_seqlens_k, seqused_k). TMA loads the whole box, and there those rows are the next sequence's, padding
// past the last one, or cache slots past seqused_k, any of which may hold NaN or inf (torch.empty): the
// mask gives their keys P = 0, but P.V takes 0 * NaN = NaN (the serving fuzzer's NaN-poisoned calls: 714 of
// 5,458 failed on wgmma_sm90, docs/perf-log.md v14.5). The warpgroup stores zeros over the 16-byte chunks
// of rows valid .. BN - 1 of the V stage (whole 128-byte rows of each 64-column block: TMA's swizzle only
// permutes chunks within a row), fences them for wgmma's async proxy and syncs. A row split does it in
// consumer 0 just before its turn of the tile, which every consumer's P.V of it follows through the turns'
// barriers; split_keys in the tile's own consumer, its only reader. Once per such tile.
template <int kIndex>
__device__ __forceinline__ void zero_v_tail(const Smem<kIndex>& sm, int stage, int valid, int consumer) {
  constexpr int BN = kConfigs[kIndex].block_n, C = kConfigs[kIndex].consumers;
  constexpr int kChunks = 8 * Smem<kIndex>::kDBlocks;  // 16-byte chunks of a key's row of V
  if constexpr (!kConfigs[kIndex].fp8) {  // 16-bit V, [keys][D] (FP8 rows take no sequences of their own)
    const uint32_t v = sm.v(stage);
    for (int i = static_cast<int>(threadIdx.x % 128); i < (BN - valid) * kChunks; i += 128) {
      const int row = valid + i / kChunks, chunk = i % kChunks;
      st_shared_zero16(v + (chunk / 8) * BN * 128 + row * 128 + (chunk % 8) * 16);
    }
    fence_async_shared();
    named_sync_warpgroup(C + 1 + consumer);  // the epilogue's barrier of this warpgroup, free here
  }
}

// A turn of the pingpong for tile c (ring position) that the warpgroup does not compute: it passes the
// turn on and releases the stage once the tile has arrived (an arrival before that would count towards
// the stage's previous use). tail_valid >= 0: first, before the turn, the tile's V rows from there are
// zeroed (zero_v_tail).
template <int kIndex>
__device__ __forceinline__ void skip_turn(const Smem<kIndex>& sm, int c, int my_turn, int next_turn, bool keep,
                                          int tail_valid = -1, int consumer = 0) {
  constexpr int kStages = kConfigs[kIndex].stages;
  const int s = c % kStages;
  const uint32_t phase = (c / kStages) & 1;
  if (tail_valid >= 0) {
    mbar_wait(sm.pv_full(s), phase);
    zero_v_tail<kIndex>(sm, s, tail_valid, consumer);
  }
  if constexpr (kConfigs[kIndex].turns) {
    named_sync(my_turn);
    if (!keep) named_arrive(next_turn);
  }
  mbar_wait(sm.k_full(s), phase);
  mbar_arrive(sm.k_empty(s));
  mbar_wait(sm.pv_full(s), phase);
  mbar_arrive(sm.pv_empty(s));
}

// The item's tiles a consumer computes: tile first + k * stride for k < count. A row split (each
// consumer its own 64 rows) runs every tile its rows see; with split_keys the consumers share the rows
// and take the tiles in turn.
struct TileRun {
  int first, stride, count;
  __device__ int tile(int k) const { return first + k * stride; }
};

// A split_keys item's hand-over: the consumers that do not store write their partial (O, m, l) to
// shared memory and are done; the storer, the consumer of the item's last tile (the last to finish its
// P.V, so that the others' writes are off the critical path: ~290 cycles of a clock64 trace at
// (1,8,512,64)), folds each into its own against the larger of the two maxima, in consumer order
// (deterministic). Thread t of every consumer holds the same rows and columns, so each thread reads what
// its counterparts wrote: no shuffles, and a warp's 32 floats are consecutive (no bank conflict).
// Returns whether this consumer stores the item.
template <int kIndex>
__device__ __forceinline__ bool hand_over(const Smem<kIndex>& sm, int consumer, int storer,
                                          float (&o)[kConfigs[kIndex].head_dim / 2], float (&m)[2], float (&l)[2]) {
  constexpr int C = kConfigs[kIndex].consumers, D = kConfigs[kIndex].head_dim;
  constexpr int kBarrier = 2 * C + 1;  // after the pingpong's 1..C and the epilogue's C+1..2C
  const int t = threadIdx.x % 128;
  // The hand-over slot of consumer c (every consumer but the storer has one).
  const auto slot = [storer](int c) { return c < storer ? c : c - 1; };
  if (consumer != storer) {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) st_shared(sm.handoff(slot(consumer), i, t), __float_as_uint(o[i]));
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      st_shared(sm.handoff(slot(consumer), D / 2 + r, t), __float_as_uint(m[r]));
      st_shared(sm.handoff(slot(consumer), D / 2 + 2 + r, t), __float_as_uint(l[r]));
    }
    named_arrive_threads(kBarrier, 128 * C);
    return false;
  }
  named_sync_threads(kBarrier, 128 * C);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (c == storer) continue;
    const int h = slot(c);
    float mine[2], theirs[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float mc = ld_shared_f32(sm.handoff(h, D / 2 + r, t));
      const float big = fmaxf(m[r], mc);
      const float base = big == -INFINITY ? 0.f : big;  // neither saw a key: both weights 0, O = 0
      mine[r] = fast_exp2(m[r] - base);
      theirs[r] = fast_exp2(mc - base);
      l[r] = l[r] * mine[r] + ld_shared_f32(sm.handoff(h, D / 2 + 2 + r, t)) * theirs[r];
      m[r] = big;
    }
#pragma unroll
    for (int i = 0; i < D / 2; ++i)
      o[i] = o[i] * mine[(i >> 1) & 1] + ld_shared_f32(sm.handoff(h, i, t)) * theirs[(i >> 1) & 1];
  }
  return true;
}

// Before the epilogue, FP8 rows: m less P's offset, so that the epilogue's lse (m + log2 l) is that of
// the dequantised inputs (O's factor, v_descale, goes into the epilogue's 1 / l).
template <bool kFp8>
__device__ __forceinline__ void finish_rows(float (&m)[2]) {
  if constexpr (kFp8) {
#pragma unroll
    for (int r = 0; r < 2; ++r) m[r] -= PForm<true>::kOffset;  // -inf stays -inf
  }
}

// Per tile j, in one turn of the pingpong: issue S_j = Q.K_j^T and O += P_{j-1}.V_{j-1}; then, while the
// second runs, the softmax of S_j; then rescale O and turn S_j into the fragments P_j. Tile 0 (no P.V
// yet) and the last P.V are peeled off the loop: wgmma issues and waits under a condition make ptxas
// serialise every wgmma (C7518, "compiler-inserted WG.DP in divergent path"). With a row split, a
// warpgroup whose rows need fewer tiles than the item (the causal diagonal, rows past the sequence's end) skips
// the turns of the others (at D=64, 192-row items, L=512: a quarter of the causal work, a ninth of the
// non-causal); with split_keys the turns follow the tiles, each taken by the tile's consumer. `tiles` is
// the ring position (K/V tiles consumed before this item); `last_turn`: this item holds the CTA's last
// tile, whose turn its consumer keeps (no one waits for it). scale_log2: the scores' scale (times
// q_descale * k_descale with FP8 inputs); v_descale: O's factor (1 for 16-bit inputs). Mods: the score
// modifiers (score_mods.cuh); mt: the warpgroup's mask tensor tiles (wgmma_mask.cuh), kept across items.
template <typename T, int kIndex, typename Mods, bool kOwnSeqs, typename Epilogue, typename Mask>
__device__ void consume_item(const KernelParams& p, const CUtensorMap* to, const Work& w, int consumer,
                             const Smem<kIndex>& sm, Epilogue& epilogue, Mask& mt, int iter, int tiles,
                             bool last_turn, float scale_log2, float v_descale) {
  constexpr TileConfig kCfg = kConfigs[kIndex];
  constexpr int D = kCfg.head_dim, BN = kCfg.block_n, kStages = kCfg.stages, C = kCfg.consumers;
  constexpr bool kSplitKeys = kCfg.split_keys;
  constexpr bool kTurns = kCfg.turns;  // the pingpong's turns (TileConfig::turns)
  static_assert(kTurns || !kSplitKeys, "split_keys rows take their tiles in turns");
  using Form = PForm<kCfg.fp8>;
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int rows_at = kSplitKeys ? 0 : 64 * consumer;  // the warpgroup's rows within the item
  const int row0 = w.q0 + rows_at;                      // the warpgroup's first query row
  const int row_lo = row0 + 16 * warp + lane / 4;      // the thread's rows: row_lo, row_lo + 8
  const int key0 = w.t0 * BN;                          // the item's first key
  const int q_buf = iter % TileConfig::kQBuffers;
  const uint64_t q_desc = q_desc_of<Smem<kIndex>::kRowBytes>(sm.q(q_buf) + rows_at * Smem<kIndex>::kRowBytes);  // its 64 rows
  const int my_turn = 1 + consumer, next_turn = 1 + (consumer + 1) % C;
  const TileRun run = kSplitKeys ? TileRun{consumer, C, w.n_tiles > consumer ? (w.n_tiles - consumer + C - 1) / C : 0}
                                 : TileRun{0, 1, warpgroup_tiles<Mods>(p, w, row0, BN)};
  // split_keys: the consumer of the item's last tile stores it (hand_over).
  const int storer = w.n_tiles > 0 ? (w.n_tiles - 1) % C : 0;
  // Whether the turn of the item's tile j is the CTA's last, which its consumer keeps.
  const auto keep = [&](int j) { return (kSplitKeys || consumer == C - 1) && last_turn && j + 1 == w.n_tiles; };
  // Keys of the item's last tile within its sequence; with fewer than BN its V rows past them are zeroed
  // (zero_v_tail): row split, by consumer 0 before its turn of the tile (turn_tail(j) >= 0); split_keys, by
  // the tile's consumer before its P.V. Not in a padded batch without seqused_k (the split kernels run those
  // too), whose rows past the sequence lie past the tensor map, which TMA fills with zeros.
  const int tail_keys = w.n_tiles > 0 ? w.len_k - (w.t0 + w.n_tiles - 1) * BN : BN;
  const bool zero_tail =
      kOwnSeqs && !kCfg.fp8 && tail_keys < BN && (p.cu_seqlens_k != nullptr || p.seqused_k != nullptr);
  static_assert(!kOwnSeqs || kCfg.fp8 || kTurns, "the zeroing is ordered before the P.V by the turns");
  const auto turn_tail = [&](int j) {
    return !kSplitKeys && zero_tail && consumer == 0 && j + 1 == w.n_tiles ? tail_keys : -1;
  };

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];
  float sc[BN / 2];
  uint32_t pa[kPSteps<T, BN>][4];
  using Alibi = AlibiTile<BN, Mods::kAlibi>;  // ALiBi's bias (onto a mask tensor's preload, if any)
  constexpr bool kPreloaded = Mask::kPreloads || Alibi::kPreloads;  // S = Q.K^T adds to a bias
  static_assert(!(kPreloaded && Mods::kSoftcap), "a bias goes after the softcap: no preload with one");
  const Alibi alibi(p, w, row_lo, lane, scale_log2);
  // A preloaded mask in raw score units (supports(): scale != 0): a bias over the scale, a hidden key at
  // -inf, or at +inf for a negative scale (scores_to_probs multiplies by it first).
  const float mask_inv_scale = 1.4426950408889634f / scale_log2;
  const float mask_hidden = scale_log2 > 0.f ? -INFINITY : INFINITY;
  const bool one_row = p.mask_seq_stride == 0;  // a key mask, loaded as one row (MaskTile)
  // With a softcap the mask tile goes onto the capped scores (MaskTile::apply), read in the softmax.
  const auto capped = [&](auto& s) { mt.apply(s, one_row); };
  if (run.count == 0) {
    epilogue.first_s_done(sm);
    if constexpr (!kSplitKeys) {
      for (int j = 0; j < w.n_tiles; ++j)
        skip_turn<kIndex>(sm, tiles + j, my_turn, next_turn, keep(j), turn_tail(j), consumer);
    } else if (!hand_over<kIndex>(sm, consumer, storer, o, m, l)) {
      epilogue.pass();
      return;
    }
    finish_rows<kCfg.fp8>(m);
    epilogue.store(p, to, w, sm, q_buf, consumer, row_lo, lane, o, m, l, v_descale);
    return;
  }

  // A tile's bias (mask tensor, ALiBi) into S's accumulators. Each tile's goes in at the end of the previous
  // tile's iteration (sc is free once P is in the fragments), not at the top of its own: in the block of
  // the turn's barrier ptxas sank the bias's multiplies and the bool mask's selects past the barrier, between
  // the turn and the S GEMM (docs/perf-log.md v13.22).
  const auto preload = [&](int tile) {
    mt.preload(sc, mask_inv_scale, mask_hidden, one_row);
    alibi.template preload<Mask::kPreloads>(sc, key0 + tile * BN);
  };

  // The first tile: its S alone.
  int c = tiles + run.tile(0);  // ring position of the tile
  preload(run.tile(0));
  // Before the turn, with no wgmma in flight (between a GEMM's issue and its wait the branch made ptxas
  // serialise every wgmma of the bool-mask ALiBi kernels, C7520).
  if (turn_tail(run.tile(0)) >= 0) {
    mbar_wait(sm.pv_full(c % kStages), (c / kStages) & 1);
    zero_v_tail<kIndex>(sm, c % kStages, tail_keys, consumer);
  }
  if constexpr (kTurns) named_sync(my_turn);
  mbar_wait(sm.k_full(c % kStages), (c / kStages) & 1);
  wgmma_fence();
  issue_qk<T, kIndex>(sc, q_desc, sm.k(c % kStages), kPreloaded);
  if (kTurns && !keep(run.tile(0))) named_arrive(next_turn);
  wgmma_wait<0>();
  mbar_arrive(sm.k_empty(c % kStages));
  epilogue.first_s_done(sm);
  // Half tiles (second_half_hidden) at D = 64, where the softmax is as long as the GEMMs: H100, median of
  // 3 alternated runs, (32,32,512,64) causal -1.5% (fp16 142.5 -> 140.3 us), (16,32,1024,64) causal -2.2%;
  // at D = 128 none faster and (4,16,4096,128) causal +0.8% (the second softmax's code), so not there. Nor
  // on split_keys rows (grids under one wave): (1,8,512,64) under graph replay 7.87-8.02 -> 7.68-7.87 us
  // without them (H100, five alternated runs; the trace showed no half tile in its items).
  constexpr bool kHalfTiles = D == 64 && !kSplitKeys;
  bool half = kHalfTiles && second_half_hidden<BN, Mods>(p, w, key0 + run.tile(0) * BN, row0);
  scores_to_probs<BN, Form, Mods>(sc, p, w, scale_log2, key0 + run.tile(0) * BN, row0, row_lo, lane, m, l, alpha, half,
                                  capped);
  to_fragments<T, BN>(sc, pa);
  if (run.count > 1) preload(run.tile(1));

  for (int k = 1; k < run.count; ++k) {
    const int j = run.tile(k), prev = c % kStages, prev_phase = (c / kStages) & 1;
    c = tiles + j;
    const int s = c % kStages;
    if (turn_tail(j) >= 0) {
      mbar_wait(sm.pv_full(s), (c / kStages) & 1);
      zero_v_tail<kIndex>(sm, s, tail_keys, consumer);
    }
    if constexpr (kTurns) named_sync(my_turn);
    mbar_wait(sm.k_full(s), (c / kStages) & 1);
    wgmma_fence();
    issue_qk<T, kIndex>(sc, q_desc, sm.k(s), kPreloaded);
    mbar_wait(sm.pv_full(prev), prev_phase);
    issue_pv<T, kIndex>(o, pa, sm.pv_tile(prev));
    if (kTurns && !keep(j)) named_arrive(next_turn);
    wgmma_wait<1>();  // S_j is done (groups complete in order); P_{j-1}.V_{j-1} may still run
    mbar_arrive(sm.k_empty(s));
    half = kHalfTiles && second_half_hidden<BN, Mods>(p, w, key0 + j * BN, row0);
    scores_to_probs<BN, Form, Mods>(sc, p, w, scale_log2, key0 + j * BN, row0, row_lo, lane, m, l, alpha, half, capped);
    wgmma_wait<0>();  // O and the fragments are free again
    mbar_arrive(sm.pv_empty(prev));
    rescale_o<D>(o, alpha);
    to_fragments<T, BN>(sc, pa);
    if (k + 1 < run.count) preload(run.tile(k + 1));
  }

  mbar_wait(sm.pv_full(c % kStages), (c / kStages) & 1);
  if (kSplitKeys && zero_tail && run.tile(run.count - 1) + 1 == w.n_tiles)
    zero_v_tail<kIndex>(sm, c % kStages, tail_keys, consumer);
  wgmma_fence();
  issue_pv<T, kIndex>(o, pa, sm.pv_tile(c % kStages));
  wgmma_wait<0>();
  mbar_arrive(sm.pv_empty(c % kStages));
  if constexpr (kSplitKeys) {
    if (!hand_over<kIndex>(sm, consumer, storer, o, m, l)) {
      epilogue.pass();  // a split item's barrier (MergeEpilogue)
      return;
    }
  } else {
    // After the last P.V: a skipped turn waits for its tile, whose load may need this one's V released.
    for (int j = run.count; j < w.n_tiles; ++j)
      skip_turn<kIndex>(sm, tiles + j, my_turn, next_turn, keep(j), turn_tail(j), consumer);
  }
  finish_rows<kCfg.fp8>(m);
  epilogue.store(p, to, w, sm, q_buf, consumer, row_lo, lane, o, m, l, v_descale);
}

// The consumer warpgroup's work items, with the ring position and the pingpong carried across them.
// FP8: each item's descales, read for its (batch, K/V head) (FlashAttention-3's indexing).
template <typename T, int kIndex, typename Schedule, typename Epilogue>
__device__ void consume(const KernelParams& p, const CUtensorMap* to, int consumer,
                        const Smem<kIndex>& sm) {
  constexpr bool kFp8 = kConfigs[kIndex].fp8;
  const int items = cta_items<Schedule>(sm);
  Epilogue epilogue;
  using Mask = MaskTile<T, kConfigs[kIndex].block_n, Schedule::Mods::kMask, Schedule::Mods::kSoftcap>;
  Mask mt(sm.mask_stage(consumer, Mask::kStageBytes), sm.mask_full(consumer), sm.mask_empty(consumer),
          threadIdx.x % 128);
  // The CTA's last item with tiles holds the last turn, which is kept. A dynamic CTA does not know its last
  // item: every turn is passed on, and consumer 0 takes the one left after the end.
  const int last = static_cast<int>(ld_shared_u32(sm.plan(1)));
  if (kConfigs[kIndex].turns && last >= 0 && consumer == kConfigs[kIndex].consumers - 1) named_arrive(1);  // consumer 0 takes the first turn
  int tiles = 0;
  for (int iter = 0; Schedule::kDynamic ? items > 0 : iter < items; ++iter) {
    const int buf = iter % TileConfig::kQBuffers;
    mbar_wait(sm.q_full(buf), (iter / TileConfig::kQBuffers) & 1);
    const Work w = read_work<typename Schedule::Seqs>(p, sm, buf);
    if constexpr (Schedule::kDynamic)
      if (w.is_end()) break;
    float scale_log2 = p.scale_log2, v_descale = 1.f;
    if constexpr (kFp8) {
      const int64_t at = w.batch * p.descale_batch_stride + w.kv_head * p.descale_head_stride;
      scale_log2 *= p.q_descale[at] * p.k_descale[at];
      v_descale = p.v_descale[at];
    }
    consume_item<T, kIndex, typename Schedule::Mods, Schedule::Seqs::kOwn>(
        p, to, w, consumer, sm, epilogue, mt, iter, tiles, !Schedule::kDynamic && iter == last, scale_log2, v_descale);
    tiles += w.n_tiles;
  }
  if constexpr (Schedule::kDynamic)
    if (last >= 0 && consumer == 0) named_sync(1);
  epilogue.finish();
}

template <typename T, int kIndex, typename Schedule, typename Epilogue>
__global__ void __launch_bounds__(Shape<kIndex>::kThreads, 1)
    attention_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                     const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_o,
                     const __grid_constant__ MaskMap<Schedule::Mods::kMask != MaskKind::kNone> tm_mask,
                     const KernelParams p, const __grid_constant__ Geometry geo) {
  constexpr TileConfig kCfg = kConfigs[kIndex];
  constexpr bool kMask = Schedule::Mods::kMask != MaskKind::kNone;
  constexpr int kTransposers = 96;  // FP8: warps 1-3 of the producer warpgroup (transpose_v)
  extern __shared__ uint8_t smem_raw[];
  const Smem<kIndex> sm{(smem_addr(smem_raw) + 1023u) & ~1023u};  // the 128B swizzle repeats every 1024 bytes
  if (threadIdx.x == 0) {
    prefetch_tensor_map(&tm_q);
    prefetch_tensor_map(&tm_k);
    prefetch_tensor_map(&tm_v);
    prefetch_tensor_map(&tm_o);
    if constexpr (kMask) {
      prefetch_tensor_map(map_of(tm_mask));
      for (int c = 0; c < kCfg.consumers; ++c) {
        mbar_init(sm.mask_full(c), 1);     // the loader's expect_tx
        mbar_init(sm.mask_empty(c), 128);  // the warpgroup's threads, once each has read
      }
    }
    for (int b = 0; b < TileConfig::kQBuffers; ++b) {
      if (b > 0) mbar_init(sm.q_full(b), 1);  // q_full(0) and k_full(0): plan_cta's
      mbar_init(sm.q_empty(b), Epilogue::kQReleases + (kMask ? kCfg.consumers : 0));  // and the mask loaders
    }
    for (int s = 0; s < kCfg.stages; ++s) {
      if (s > 0) mbar_init(sm.k_full(s), 1);
      mbar_init(sm.v_full(s), 1);
      // Every thread of the consumers that compute a tile releases its stage: all of them with a row
      // split, the tile's own consumer with split_keys.
      constexpr int kReleases = (kCfg.split_keys ? 1 : kCfg.consumers) * 128;
      mbar_init(sm.k_empty(s), kReleases);
      if constexpr (kCfg.fp8) {  // V is read by the transposing warps, V^T by the consumers
        mbar_init(sm.v_empty(s), kTransposers);
        mbar_init(sm.vt_full(s), kTransposers);
        mbar_init(sm.vt_empty(s), kReleases);
      } else {
        mbar_init(sm.v_empty(s), kReleases);
      }
    }
    mbar_init(sm.merge_full(), 1);
    mbar_init_fence();
  } else if (threadIdx.x == 32) {
    plan_cta<kIndex, Schedule>(&tm_q, &tm_k, p, geo, sm);
  }
  __syncthreads();
  // Broadcast from lane 0 so that ptxas sees a warp-uniform value: wgmma under a branch it cannot prove
  // uniform is serialised (C7518/C7520, "... in divergent path").
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  if (wg == 0) {
    regs_release<kCfg.producer_regs>();
    // The warp from lane 0, for the same reason: each branch below is one warp's.
    const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 32), 0);
    if (warp == 0) {
      if (threadIdx.x == 0) produce<kIndex, Schedule>(&tm_q, &tm_k, &tm_v, p, geo, sm);
    } else if constexpr (kCfg.fp8) {
      transpose_v<kIndex, Schedule>(p, geo, sm);
    } else if constexpr (kMask) {
      // Lane 0 of warps 1 .. consumers: consumer warpgroup (warp - 1)'s mask tiles.
      if (warp <= kCfg.consumers && threadIdx.x % 32 == 0)
        load_masks<T, kIndex, Schedule>(map_of(tm_mask), p, sm, warp - 1);
    }
    Epilogue().idle();
  } else {
    regs_claim<kCfg.consumer_regs>();
    consume<T, kIndex, Schedule, Epilogue>(p, &tm_o, wg - 1, sm);
  }
}

}  // namespace evosdpa::detail::wgmma_sm90
