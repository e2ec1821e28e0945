// wgmma_sm90's backward pass: FlashAttention-2's algorithm on Hopper's wgmma, laid out as
// FlashAttention-3 lays it out. A CTA owns 128 keys of one (batch, K/V head), 64 per consumer
// warpgroup, and streams past them every tile of queries that sees them, of every query head of the
// group; a producer warp loads the tiles by TMA into a ring and stages their lse and D. Per tile, each
// consumer computes, with its keys as wgmma's M (so that P^T and dS^T are A fragments in registers):
//   S^T = K Q^T,  dP^T = V dO^T                      (both operands from shared memory)
//   P^T = exp2(S^T scale log2(e) - lse log2(e)),  dS^T = P^T (dP^T - D)
//   dV += P^T dO,  dK += dS^T Q                       (A from registers)
//   dQ = dS K                                         (dS^T through shared memory, both consumers' keys)
// dK and dV stay in fp32 registers for the whole loop and are stored once (dK times the scale); each
// tile's dQ goes through shared memory to a writer thread that adds it to float32 sums in the workspace
// by TMA reduce-adds, in DETERMINISTIC mode in the fixed order of the key blocks that mma_sm80's
// backward uses (dq_turns.cuh), the first of them storing; mma_sm80's pre- and post-passes
// (bwd_prepass.cuh) zero the sums (in DETERMINISTIC mode only those no block writes) and round them.
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/backward_params.hpp"
#include "kernels/device_math.cuh"
#include "kernels/dq_turns.cuh"
#include "kernels/mma/bwd/bwd_workspace.hpp"
#include "kernels/wgmma/bwd/wgmma_bwd_config.hpp"
#include "kernels/wgmma/wgmma_fragments.cuh"
#include "kernels/wgmma/ptx.cuh"
#include "kernels/wgmma/wgmma_ops.cuh"

namespace evosdpa::detail::wgmma_sm90 {

using mma_sm80::BwdWorkspace;

// Shared memory of row kIndex (addresses from the 1024-byte aligned base).
template <int kIndex>
struct BwdSmem {
  static constexpr BwdTile kCfg = kBwdTiles[kIndex];
  // The table's figures as constants device code can read (its constexpr functions are host functions).
  static constexpr int kQTile = kCfg.tile_bytes(kCfg.tile_m), kKvTile = kCfg.tile_bytes(kCfg.block_n);
  static constexpr int kV = kCfg.v_offset(), kQ = kCfg.q_offset(), kDo = kCfg.do_offset(), kDs = kCfg.ds_offset();
  static constexpr int kDsBytes = kCfg.ds_bytes(), kDq = kCfg.dq_offset(), kDqBytes = kCfg.dq_bytes();
  static constexpr int kLse = kCfg.lse_offset(), kDelta = kCfg.delta_offset();
  static constexpr int kBarriers = kCfg.barrier_offset(), kConsumers = kCfg.consumers(), kThreads = kCfg.threads();
  uint32_t base;
  __device__ uint32_t k() const { return base; }
  __device__ uint32_t v() const { return base + kV; }
  __device__ uint32_t q(int s) const { return base + kQ + s * kQTile; }
  __device__ uint32_t dout(int s) const { return base + kDo + s * kQTile; }
  __device__ uint32_t ds(int b) const { return base + kDs + b * kDsBytes; }
  __device__ uint32_t lse(int s) const { return base + kLse + s * kCfg.tile_m * 4; }
  __device__ uint32_t delta(int s) const { return base + kDelta + s * kCfg.tile_m * 4; }
  __device__ uint32_t kv_full() const { return base + kBarriers; }
  __device__ uint32_t q_full(int s) const { return kv_full() + 8 + 8 * s; }
  __device__ uint32_t q_empty(int s) const { return q_full(kCfg.stages + s); }
  __device__ uint32_t dq() const { return base + kDq; }
  __device__ uint32_t dq_full() const { return q_full(2 * kCfg.stages); }
  __device__ uint32_t dq_empty() const { return dq_full() + 8; }
};

// The CTA's keys and the query tiles it streams: tiles first .. end - 1 of each query head of the group,
// heads in order. With a causal mask, tiles before the one holding query k0 - causal_offset see none
// of the keys. DETERMINISTIC mode with a causal mask launches the key blocks of a head last first, the
// order their turns go in (dq_turns.cuh, bwd_dkdv_kernel.cuh).
struct BwdBlock {
  int b, h_kv, kb, k0;
  int first, end, total;
};

template <int kIndex>
__device__ __forceinline__ BwdBlock bwd_block(const BackwardParams& bp, bool descending) {
  constexpr BwdTile kCfg = kBwdTiles[kIndex];
  const KernelParams& p = bp.fwd;
  BwdBlock blk;
  const int k_blocks = (p.seqlen_k + kCfg.block_n - 1) / kCfg.block_n;
  const int bh = blockIdx.x / k_blocks;
  blk.b = bh / bp.heads_kv;
  blk.h_kv = bh % bp.heads_kv;
  blk.kb = descending ? k_blocks - 1 - static_cast<int>(blockIdx.x % k_blocks) : static_cast<int>(blockIdx.x % k_blocks);
  blk.k0 = blk.kb * kCfg.block_n;
  blk.first = p.causal ? max(0, blk.k0 - p.causal_offset) / kCfg.tile_m : 0;
  blk.end = (p.seqlen_q + kCfg.tile_m - 1) / kCfg.tile_m;
  blk.total = max(0, blk.end - blk.first) * p.kv_group;
  return blk;
}

// Tile t's (query head, query tile) as the tiles are stepped through (no division per tile).
struct BwdCursor {
  int h, qt;
  __device__ void step(const BwdBlock& blk) {
    if (++qt == blk.end) {
      qt = blk.first;
      ++h;
    }
  }
};

// The producer warp: K and V once, then each tile's Q and dO by TMA (lane 0) with the tile's lse in log2
// units and D staged by the warp's lanes (plain loads: a head's rows of these float arrays need not be
// 16-byte aligned). A row past the sequence's end or one that sees no key (lse = -inf) gets lse = +inf,
// so that its P is exp2(-inf) = 0 without a mask.
template <int kIndex>
__device__ void bwd_produce(const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv,
                            const CUtensorMap* tdo, const BackwardParams& bp, const BwdWorkspace& ws,
                            const BwdSmem<kIndex>& sm, const BwdBlock& blk, int lane) {
  constexpr BwdTile kCfg = kBwdTiles[kIndex];
  constexpr int D = kCfg.head_dim, TM = kCfg.tile_m, BN = kCfg.block_n, kStages = kCfg.stages;
  const KernelParams& p = bp.fwd;
  if (lane == 0) {
    mbar_expect_tx(sm.kv_full(), 2 * BwdSmem<kIndex>::kKvTile);
    for (int c = 0; c < D / 64; ++c) {
      tma_load(sm.k() + c * BN * 128, tk, sm.kv_full(), 64 * c, blk.k0, blk.h_kv, blk.b);
      tma_load(sm.v() + c * BN * 128, tv, sm.kv_full(), 64 * c, blk.k0, blk.h_kv, blk.b);
    }
  }
  BwdCursor cur{blk.h_kv * p.kv_group, blk.first};
  for (int t = 0; t < blk.total; ++t, cur.step(blk)) {
    const int s = t % kStages, q0 = cur.qt * TM;
    if (t >= kStages) mbar_wait(sm.q_empty(s), (t / kStages - 1) & 1);
    if (lane == 0) {
      mbar_expect_tx(sm.q_full(s), 2 * BwdSmem<kIndex>::kQTile);
      for (int c = 0; c < D / 64; ++c) {
        tma_load(sm.q(s) + c * TM * 128, tq, sm.q_full(s), 64 * c, q0, cur.h, blk.b);
        tma_load(sm.dout(s) + c * TM * 128, tdo, sm.q_full(s), 64 * c, q0, cur.h, blk.b);
      }
    }
    const int64_t row0 = (static_cast<int64_t>(blk.b) * p.heads_q + cur.h) * p.seqlen_q + q0;
    for (int i = lane; i < TM; i += 32) {
      float lse = INFINITY, delta = 0.f;
      if (q0 + i < p.seqlen_q) {
        lse = p.lse[row0 + i];
        lse = lse == -INFINITY ? INFINITY : lse * kLog2e;
        delta = ws.delta[row0 + i];
      }
      st_shared(sm.lse(s) + 4 * i, __float_as_uint(lse));
      st_shared(sm.delta(s) + 4 * i, __float_as_uint(delta));
    }
    mbar_arrive(sm.q_full(s));  // each lane after its stores (q_full counts 32 and lane 0's expect_tx)
  }
}

// A warpgroup's accumulator of 64 x N floats: element i of a thread lies in row warp * 16 + lane / 4 +
// 8 ((i >> 1) & 1) and column 8 (i >> 2) + 2 (lane & 3) + (i & 1).
__device__ __forceinline__ int acc_row(int warp, int lane, int i) { return warp * 16 + lane / 4 + 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int acc_col(int lane, int i) { return 8 * (i >> 2) + 2 * (lane & 3) + (i & 1); }

// S^T becomes P^T in place. kMask: the tile holds keys past the end or past a causal diagonal, whose
// P is 0 (selected, not computed: exp2 of a zero K row's score can overflow).
template <bool kMask, int TM>
__device__ __forceinline__ void scores_to_probs_t(float (&sc)[TM / 2], uint32_t lse, const KernelParams& p, int key0,
                                                  int q0, int warp, int lane) {
#pragma unroll
  for (int j = 0; j < TM / 8; ++j) {
    const float2 l = ld_shared_f2(lse + 4 * (8 * j + 2 * (lane & 3)));
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 4 * j + e;
      float x = fast_exp2(sc[i] * p.scale_log2 - ((e & 1) ? l.y : l.x));
      if constexpr (kMask) {
        const int key = key0 + acc_row(warp, lane, i), query = q0 + acc_col(lane, i);
        if (!(key < p.seqlen_k && (!p.causal || key <= query + p.causal_offset))) x = 0.f;
      }
      sc[i] = x;
    }
  }
}

// dP^T becomes dS^T = P^T (dP^T - D) in place.
template <int TM>
__device__ __forceinline__ void grads_of_scores_t(const float (&pr)[TM / 2], float (&dp)[TM / 2], uint32_t delta,
                                                  int lane) {
#pragma unroll
  for (int j = 0; j < TM / 8; ++j) {
    const float2 d = ld_shared_f2(delta + 4 * (8 * j + 2 * (lane & 3)));
#pragma unroll
    for (int e = 0; e < 4; ++e) dp[4 * j + e] = pr[4 * j + e] * (dp[4 * j + e] - ((e & 1) ? d.y : d.x));
  }
}

// dS^T's fragments into the warpgroup's 64 rows (from `row0`) of a [128 keys][TM queries] tile, 64-query
// blocks of [128 x 128 bytes], 128B-swizzled: one stmatrix.x4 per k-step, whose matrices are the
// fragment's registers (rows + 0 / + 8 of query columns 16 kk .. + 7, then 16 kk + 8 ..).
template <int TM>
__device__ __forceinline__ void store_ds_t(uint32_t tile, const uint32_t (&a)[TM / 16][4], int row0, int warp,
                                           int lane) {
  const int m = lane >> 3, row = row0 + warp * 16 + 8 * (m & 1) + (lane & 7);
#pragma unroll
  for (int kk = 0; kk < TM / 16; ++kk) {
    const int chunk = 2 * kk + (m >> 1);  // 16-byte chunk of 8 queries
    stmatrix_x4(tile + (chunk / 8) * 128 * 128 + row * 128 + (((chunk % 8) ^ (row & 7)) << 4), a[kk]);
  }
}

// A consumer's 64 x 64 dQ accumulator (rows from row0, columns from col0 of the tile) into the tile's
// float32 staging: 32-column boxes of [TM rows x 128 bytes], 128B-swizzled as the writer's TMA reads them.
template <int TM>
__device__ __forceinline__ void store_dq(uint32_t tile, const float (&dq)[32], int row0, int col0, int warp, int lane) {
#pragma unroll
  for (int i = 0; i < 32; i += 2) {
    const int row = row0 + acc_row(warp, lane, i), col = col0 + acc_col(lane, i);
    st_shared_v2(tile + (col / 32) * TM * 128 + row * 128 + ((((col % 32) / 4) ^ (row & 7)) << 4) + (col % 4) * 4, dq[i],
                 dq[i + 1]);
  }
}

// The dQ writer (one thread of the producer warpgroup): each tile's dQ, once both consumers have staged
// it, added to the workspace's float32 sums by TMA reduce-adds, whole 128-byte lines at L2. (The
// consumers' own red.global.add.v2, 8 bytes each, left 38% of the kernel's time on the table: H200,
// B4 H16 L4096 D128 fp16 FAST, 3,352 us against 2,074 without any adds; docs/perf-log.md v14.) In
// DETERMINISTIC mode in the key blocks' fixed order: the adds complete before the turn passes on, and the
// first block stores its dQ instead, so that the pre-pass need not zero the sums.
template <int kIndex, bool kDeterministic>
__device__ void bwd_write_dq(const CUtensorMap* tdq, const BackwardParams& bp, const BwdWorkspace& ws,
                             const BwdSmem<kIndex>& sm, const BwdBlock& blk) {
  constexpr BwdTile kCfg = kBwdTiles[kIndex];
  constexpr int D = kCfg.head_dim, TM = kCfg.tile_m, BN = kCfg.block_n;
  const KernelParams& p = bp.fwd;
  BwdCursor cur{blk.h_kv * p.kv_group, blk.first};
  for (int t = 0; t < blk.total; ++t, cur.step(blk)) {
    const int q0 = cur.qt * TM;
    int* turn = nullptr;
    int rank = -1;  // FAST mode: every block adds
    mbar_wait(sm.dq_full(), t & 1);
    if constexpr (kDeterministic) {
      // With a causal mask, the blocks that see tile q0 are 0 .. last; they add from last down.
      turn = ws.dq_turn + (static_cast<int64_t>(blk.b) * p.heads_q + cur.h) * ((p.seqlen_q + TM - 1) / TM) + cur.qt;
      const int k_blocks = (p.seqlen_k + BN - 1) / BN;
      const int last = min(k_blocks, (q0 + TM + p.causal_offset + BN - 1) / BN) - 1;
      rank = p.causal ? last - blk.kb : blk.kb;
      wait_turn(turn, rank);
      fence_async_global();  // the reduce-adds after the acquire
    }
    for (int c = 0; c < D / 32; ++c) {
      if (rank == 0)
        tma_store(tdq, sm.dq() + c * TM * 128, 32 * c, q0, cur.h, blk.b);
      else
        tma_reduce_add(tdq, sm.dq() + c * TM * 128, 32 * c, q0, cur.h, blk.b);
    }
    bulk_commit();
    if constexpr (kDeterministic) {
      bulk_wait();           // the sums written
      fence_async_global();  // before the release that passes the turn
      pass_turn(turn);
    } else {
      bulk_wait_read();
    }
    mbar_arrive(sm.dq_empty());
  }
  bulk_wait();  // the CTA's shared memory outlives the last reads
}

template <typename T, int kIndex, bool kDeterministic>
__device__ void bwd_consume(const BackwardParams& bp, const BwdWorkspace& ws, const BwdSmem<kIndex>& sm,
                            const BwdBlock& blk, int consumer) {
  constexpr BwdTile kCfg = kBwdTiles[kIndex];
  constexpr int D = kCfg.head_dim, TM = kCfg.tile_m, BN = kCfg.block_n, kStages = kCfg.stages;
  const KernelParams& p = bp.fwd;
  const int t128 = threadIdx.x % 128, warp = t128 / 32, lane = t128 % 32;
  const int row0 = 64 * consumer;  // the warpgroup's keys within the block
  // K-major A operands: the warpgroup's 64 rows of each 64-column block of K and V.
  const uint64_t k_desc = matrix_desc(sm.k() + row0 * 128, 16, 1024);
  const uint64_t v_desc = matrix_desc(sm.v() + row0 * 128, 16, 1024);
  // dQ's operands (MN-major): dS [keys][queries] and K [keys][D], 16 keys (2048 bytes) per k-step; the
  // consumer's 64 queries (tile_m = 128) or its 64 columns of D (tile_m = 64).
  constexpr bool kSplitRows = TM == 128;
  const uint32_t dq_a_off = kSplitRows ? consumer * BN * 128 : 0, dq_b_off = kSplitRows ? 0 : consumer * BN * 128;
  const int dq_row0 = kSplitRows ? 64 * consumer : 0, dq_col0 = kSplitRows ? 0 : 64 * consumer;

  float dk[D / 2] = {}, dv[D / 2] = {};
  mbar_wait(sm.kv_full(), 0);
  BwdCursor cur{blk.h_kv * p.kv_group, blk.first};
  for (int t = 0; t < blk.total; ++t, cur.step(blk)) {
    const int s = t % kStages, q0 = cur.qt * TM;
    mbar_wait(sm.q_full(s), (t / kStages) & 1);

    float sc[TM / 2], dp[TM / 2];
    const uint64_t q_desc = matrix_desc(sm.q(s), 16, 1024), do_desc = matrix_desc(sm.dout(s), 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t step = (kk % 4) * 32;
      mma_ss<TM, T>(sc, desc_advance(k_desc, (kk / 4) * BN * 128 + step), desc_advance(q_desc, (kk / 4) * TM * 128 + step),
                    kk > 0);
    }
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t step = (kk % 4) * 32;
      mma_ss<TM, T>(dp, desc_advance(v_desc, (kk / 4) * BN * 128 + step),
                    desc_advance(do_desc, (kk / 4) * TM * 128 + step), kk > 0);
    }
    wgmma_commit();

    wgmma_wait<1>();
    const int key0 = blk.k0 + row0;
    const bool masked = key0 + 64 > p.seqlen_k || (p.causal && key0 + 63 > q0 + p.causal_offset);
    if (masked)
      scores_to_probs_t<true, TM>(sc, sm.lse(s), p, key0, q0, warp, lane);
    else
      scores_to_probs_t<false, TM>(sc, sm.lse(s), p, key0, q0, warp, lane);
    wgmma_wait<0>();
    grads_of_scores_t<TM>(sc, dp, sm.delta(s), lane);

    uint32_t pa[TM / 16][4], dsa[TM / 16][4];
    to_fragments<T, TM>(sc, pa);
    to_fragments<T, TM>(dp, dsa);
    store_ds_t<TM>(sm.ds(t & 1), dsa, row0, warp, lane);
    fence_async_shared();  // dS^T (generic-proxy stores) visible to the dQ product's wgmma

    // dV += P^T dO, then (both consumers' dS^T stored) dQ = dS K, then dK += dS^T Q, so that dQ's adds
    // run under dK's product (FlashAttention-3's order). B of dV and dK: [queries][D], N-major, 64-column
    // blocks TM * 128 bytes apart.
    wgmma_fence();
    const uint64_t do_n = matrix_desc(sm.dout(s), TM * 128, 1024), q_n = matrix_desc(sm.q(s), TM * 128, 1024);
#pragma unroll
    for (int kk = 0; kk < TM / 16; ++kk) mma_rs<D, T>(dv, pa[kk], desc_advance(do_n, kk * 2048));
    wgmma_commit();

    named_sync(1);  // both consumers' dS^T stored
    float dq[32];
    const uint64_t ds_desc = matrix_desc(sm.ds(t & 1) + dq_a_off, BN * 128, 1024);
    const uint64_t kb_desc = matrix_desc(sm.k() + dq_b_off, BN * 128, 1024);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      mma_ss_tt<64, T>(dq, desc_advance(ds_desc, kk * 2048), desc_advance(kb_desc, kk * 2048), kk > 0);
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < TM / 16; ++kk) mma_rs<D, T>(dk, dsa[kk], desc_advance(q_n, kk * 2048));
    wgmma_commit();
    wgmma_wait<1>();  // dV and dQ done, dK running

    // dQ to the writer (bwd_write_dq) once it has read the previous tile's.
    if (t > 0) mbar_wait(sm.dq_empty(), (t - 1) & 1);
    store_dq<TM>(sm.dq(), dq, dq_row0, dq_col0, warp, lane);
    fence_async_shared();  // for the writer's TMA
    mbar_arrive(sm.dq_full());
    wgmma_wait<0>();
    mbar_arrive(sm.q_empty(s));  // Q, dO, lse and D of stage s read
  }

  // dK (times the scale) and dV, rows past the end not written.
#pragma unroll
  for (int i = 0; i < D / 2; i += 2) {
    const int key = blk.k0 + row0 + acc_row(warp, lane, i), col = acc_col(lane, i);
    if (key >= p.seqlen_k) continue;
    T* const dk_row = static_cast<T*>(bp.dk) + blk.b * bp.dk_batch_stride + blk.h_kv * bp.dk_head_stride +
                      static_cast<int64_t>(key) * bp.dk_seq_stride;
    T* const dv_row = static_cast<T*>(bp.dv) + blk.b * bp.dv_batch_stride + blk.h_kv * bp.dv_head_stride +
                      static_cast<int64_t>(key) * bp.dv_seq_stride;
    *reinterpret_cast<uint32_t*>(dk_row + col) = pack2<T>(dk[i] * p.scale, dk[i + 1] * p.scale);
    *reinterpret_cast<uint32_t*>(dv_row + col) = pack2<T>(dv[i], dv[i + 1]);
  }
}

template <typename T, int kIndex, bool kDeterministic>
__global__ void __launch_bounds__(BwdSmem<kIndex>::kThreads, 1)
    bwd_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
               const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_do,
               const __grid_constant__ CUtensorMap tm_dq, const BackwardParams bp, const BwdWorkspace ws) {
  constexpr BwdTile kCfg = kBwdTiles[kIndex];
  extern __shared__ uint8_t smem_raw[];
  const BwdSmem<kIndex> sm{(smem_addr(smem_raw) + 1023u) & ~1023u};  // the 128B swizzle repeats every 1024 bytes
  const BwdBlock blk = bwd_block<kIndex>(bp, kDeterministic && bp.fwd.causal);
  if (threadIdx.x == 0) {
    prefetch_tensor_map(&tm_q);
    prefetch_tensor_map(&tm_k);
    prefetch_tensor_map(&tm_v);
    prefetch_tensor_map(&tm_do);
    prefetch_tensor_map(&tm_dq);
    mbar_init(sm.kv_full(), 1);
    for (int s = 0; s < kCfg.stages; ++s) {
      mbar_init(sm.q_full(s), 33);                       // lane 0's expect_tx, then each producer lane's staging
      mbar_init(sm.q_empty(s), BwdSmem<kIndex>::kConsumers * 128);  // every consumer thread
    }
    mbar_init(sm.dq_full(), BwdSmem<kIndex>::kConsumers * 128);
    mbar_init(sm.dq_empty(), 1);  // the writer
    mbar_init_fence();
  }
  __syncthreads();
  // Warp-uniform from lane 0: wgmma under a branch ptxas cannot prove uniform is serialised.
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  if (wg == 0) {
    regs_release<kCfg.producer_regs>();
    if (threadIdx.x < 32)
      bwd_produce<kIndex>(&tm_q, &tm_k, &tm_v, &tm_do, bp, ws, sm, blk, threadIdx.x);
    else if (threadIdx.x == 32)
      bwd_write_dq<kIndex, kDeterministic>(&tm_dq, bp, ws, sm, blk);
  } else {
    regs_claim<kCfg.consumer_regs>();
    bwd_consume<T, kIndex, kDeterministic>(bp, ws, sm, blk, wg - 1);
  }
}

}  // namespace evosdpa::detail::wgmma_sm90
