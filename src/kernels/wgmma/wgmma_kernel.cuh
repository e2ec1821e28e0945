// The Hopper attention forward kernel: a persistent grid of one CTA per SM, each taking work items of 128
// query rows of one (batch, head) in turn; three warpgroups.
//   Producer (warpgroup 0, one thread): per item, TMA loads of the Q tile (once the consumers are done
//     with the last one's), then K and V tiles into a ring of `stages` buffers, each filling a "full"
//     mbarrier and waiting on the stage's "empty" one: the next item's loads run under this one's end.
//   Consumers (warpgroups 1 and 2, 64 query rows each): per K/V tile, S = Q.K^T by wgmma from shared
//     memory, mask, online softmax in registers, P converted in place to wgmma A fragments, O += P.V by
//     wgmma with P from registers, K and V released as soon as their GEMM is done. The P.V of one tile
//     runs under the softmax of the next, and the two warpgroups take turns with the tensor cores.
//     O is normalised once at the end.
// Registers move from the producer to the consumers with setmaxnreg (40 + 2 x 232 per thread = 64.5K).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"
#include "kernels/wgmma/ptx.cuh"
#include "kernels/wgmma/wgmma_config.hpp"
#include "kernels/wgmma/wgmma_ops.cuh"

namespace evosdpa::detail::wgmma_sm90 {

constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;
static_assert(128 * (kProducerRegs + TileConfig::kConsumers * kConsumerRegs) <= 65536, "register file");

// One work item: 128 query rows of one (batch, head), and how many K/V tiles its rows see (causal: up
// to the last row's diagonal).
struct Work {
  int q0, head, batch, n_tiles;
};

// The grid is persistent: CTA b takes work items b, b + gridDim.x, ... of this order.
__device__ __forceinline__ int work_count(const KernelParams& p) {
  return (p.seqlen_q + TileConfig::kBlockM - 1) / TileConfig::kBlockM * p.batch * p.heads_q;
}

template <int kBlockN>
__device__ __forceinline__ Work work_at(const KernelParams& p, int index) {
  constexpr int BM = TileConfig::kBlockM;
  const int q_blocks = (p.seqlen_q + BM - 1) / BM;
  const int heads = p.batch * p.heads_q;
  int qb, bh;
  if (p.causal) {  // the longest query blocks (the last ones) first, so the work does not end on them
    qb = q_blocks - 1 - index / heads;
    bh = index % heads;
  } else {  // the query blocks of one head side by side: they read the same K and V through L2
    qb = index % q_blocks;
    bh = index / q_blocks;
  }
  Work w;
  w.q0 = qb * BM;
  w.head = bh % p.heads_q;
  w.batch = bh / p.heads_q;
  int keys = p.seqlen_k;
  if (p.causal) keys = min(keys, max(0, min(w.q0 + BM, p.seqlen_q) + p.causal_offset));
  w.n_tiles = (keys + kBlockN - 1) / kBlockN;
  return w;
}

// Shared memory: Q, the K ring, the V ring (each tile D/64 blocks of [rows x 64 columns], 1024-byte
// aligned), then the mbarriers.
template <int kIndex>
struct Smem {
  static constexpr TileConfig kCfg = kConfigs[kIndex];
  // The table's sizes as constants device code can read (its constexpr functions are host functions).
  static constexpr int kQBytes = kCfg.q_bytes();
  static constexpr int kTileBytes = kCfg.kv_tile_bytes();
  static constexpr int kBarriers = kCfg.barrier_offset();
  static constexpr int kDBlocks = kCfg.d_blocks();
  uint32_t base;
  __device__ uint32_t q() const { return base; }
  __device__ uint32_t k(int stage) const { return base + kQBytes + stage * kTileBytes; }
  __device__ uint32_t v(int stage) const { return k(kCfg.stages) + stage * kTileBytes; }
  __device__ uint32_t q_full() const { return base + kBarriers; }
  __device__ uint32_t q_empty() const { return q_full() + 8 * (1 + 4 * kCfg.stages); }
  __device__ uint32_t k_full(int stage) const { return q_full() + 8 * (1 + stage); }
  __device__ uint32_t v_full(int stage) const { return q_full() + 8 * (1 + kCfg.stages + stage); }
  __device__ uint32_t k_empty(int stage) const { return q_full() + 8 * (1 + 2 * kCfg.stages + stage); }
  __device__ uint32_t v_empty(int stage) const { return q_full() + 8 * (1 + 3 * kCfg.stages + stage); }
};

// ---- producer -------------------------------------------------------------------------------------
// For each work item: Q once the consumers are done with the previous one's, then its K and V tiles
// through the ring, whose position carries on from one item to the next.
template <int kIndex>
__device__ void produce(const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv, const KernelParams& p,
                        const Smem<kIndex>& sm) {
  using S = Smem<kIndex>;
  constexpr TileConfig kCfg = kConfigs[kIndex];
  constexpr int kBlockBytes = kCfg.block_n * 128;  // one 64-column block of a K or V tile
  int tiles = 0;                                   // K/V tiles loaded so far
  const int count = work_count(p);
  for (int index = blockIdx.x, iter = 0; index < count; index += gridDim.x, ++iter) {
    const Work w = work_at<kCfg.block_n>(p, index);
    const int kv_head = w.head / p.kv_group;
    if (iter > 0) mbar_wait(sm.q_empty(), (iter - 1) & 1);
    mbar_expect_tx(sm.q_full(), S::kQBytes);
    for (int b = 0; b < S::kDBlocks; ++b)
      tma_load(sm.q() + b * TileConfig::kBlockM * 128, tq, sm.q_full(), 64 * b, w.q0, w.head, w.batch);
    for (int t = 0; t < w.n_tiles; ++t, ++tiles) {
      const int s = tiles % kCfg.stages;
      const uint32_t released = (tiles / kCfg.stages - 1) & 1;  // the phase in which the consumers freed s
      const int key0 = t * kCfg.block_n;
      if (tiles >= kCfg.stages) mbar_wait(sm.k_empty(s), released);
      mbar_expect_tx(sm.k_full(s), S::kTileBytes);
      for (int b = 0; b < S::kDBlocks; ++b)
        tma_load(sm.k(s) + b * kBlockBytes, tk, sm.k_full(s), 64 * b, key0, kv_head, w.batch);
      if (tiles >= kCfg.stages) mbar_wait(sm.v_empty(s), released);
      mbar_expect_tx(sm.v_full(s), S::kTileBytes);
      for (int b = 0; b < S::kDBlocks; ++b)
        tma_load(sm.v(s) + b * kBlockBytes, tv, sm.v_full(s), 64 * b, key0, kv_head, w.batch);
    }
  }
}

// ---- consumer -------------------------------------------------------------------------------------
// The thread's accumulator element i of an m64nN wgmma sits in row 16*warp + lane/4 + 8*((i>>1)&1) and
// column 8*(i>>2) + 2*(lane%4) + (i&1) of its warpgroup's 64 x N tile.

// Scores of keys a row may not see become -inf: keys past seqlen_k (TMA filled them with zeros) and,
// with a causal mask, keys past the row's diagonal.
template <int kBlockN>
__device__ __forceinline__ void mask_tile(float (&s)[kBlockN / 2], const KernelParams& p, int key0, int row_lo,
                                          int lane) {
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) {
    const int key = key0 + 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
    const int row = row_lo + 8 * ((i >> 1) & 1);
    if (key >= p.seqlen_k || (p.causal && key > row + p.causal_offset)) s[i] = -INFINITY;
  }
}

// Online softmax over one tile for the thread's two rows, S already scaled to the log2 domain: raise the
// running max m, turn S into P = 2^(S - m_new) and fold it into the partial row sums l, rescaled by
// alpha = 2^(m_old - m_new); O must be rescaled by alpha too (rescale_o), once the P.V in flight is done.
// A row that has seen only masked keys keeps m = -inf and exponentiates against 0: P = 0, never NaN.
// The four lanes of a row hold disjoint columns: the max is shared among them, l stays partial.
template <int kBlockN>
__device__ __forceinline__ void softmax_step(float (&s)[kBlockN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2]) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) tile_max[(i >> 1) & 1] = fmaxf(tile_max[(i >> 1) & 1], s[i]);
  float base[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float m_new = fmaxf(m[r], tile_max[r]);
    base[r] = m_new == -INFINITY ? 0.f : m_new;
    alpha[r] = fast_exp2(m[r] - base[r]);
    m[r] = m_new;
    l[r] *= alpha[r];
  }
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) {
    s[i] = fast_exp2(s[i] - base[(i >> 1) & 1]);
    l[(i >> 1) & 1] += s[i];
  }
}

template <int D>
__device__ __forceinline__ void rescale_o(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] *= alpha[(i >> 1) & 1];
}

// P as the A operand of O += P.V: k-step kk (keys 16kk..16kk+15) is the accumulator elements
// 8kk..8kk+7 paired in order, the same fragment layout, so no data moves between threads.
template <typename T, int kBlockN>
__device__ __forceinline__ void to_fragments(const float (&s)[kBlockN / 2], uint32_t (&a)[kBlockN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
    for (int j = 0; j < 4; ++j) a[kk][j] = pack2<T>(s[8 * kk + 2 * j], s[8 * kk + 2 * j + 1]);
}

// Normalise the warpgroup's 64 rows of O and write them (rows past seqlen_q are not), and the lse.
template <typename T, int D>
__device__ __forceinline__ void store_output(const KernelParams& p, const Work& w, int row_lo, int lane,
                                             const float (&o)[D / 2], const float (&m)[2], float (&l)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    const int row = row_lo + 8 * r;
    if (row >= p.seqlen_q) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    T* out = static_cast<T*>(p.o) + w.batch * p.o_batch_stride + w.head * p.o_head_stride +
             static_cast<int64_t>(row) * p.o_seq_stride;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      const int i = 4 * c + 2 * r;
      *reinterpret_cast<uint32_t*>(out + 8 * c + 2 * (lane & 3)) = pack2<T>(o[i] * inv, o[i + 1] * inv);
    }
    if (p.lse != nullptr && (lane & 3) == 0)
      p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + w.head) * p.seqlen_q + row] =
          l[r] > 0.f ? (m[r] + __log2f(l[r])) * 0.6931471805599453f : -INFINITY;
  }
}

// The two consumer warpgroups take turns issuing their GEMMs (named barriers 1 and 2, "pingpong"): while
// one runs its softmax, the other's GEMMs have the tensor cores.
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, 256;" ::"r"(id) : "memory"); }

// S = Q.K^T for the stage's K tile: D/16 k-steps, k-step kk 32 bytes into 64-column block kk/4 of both.
template <typename T, int kIndex>
__device__ __forceinline__ void issue_qk(float (&sc)[kConfigs[kIndex].block_n / 2], uint32_t q_rows, uint32_t k_tile) {
  constexpr int D = kConfigs[kIndex].head_dim, BN = kConfigs[kIndex].block_n;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t step = (kk & 3) * 32;
    const uint64_t a = matrix_desc(q_rows + (kk >> 2) * TileConfig::kBlockM * 128 + step, 16, 1024);
    const uint64_t b = matrix_desc(k_tile + (kk >> 2) * BN * 128 + step, 16, 1024);
    mma_ss<BN, T>(sc, a, b, kk > 0);
  }
  wgmma_commit();
}

// O += P.V: V is [keys][D], so B is N-major (transpose bit): 8-key groups 1024 bytes apart, 64-column
// blocks BN*128 bytes apart, 16 keys (2048 bytes) per k-step.
template <typename T, int kIndex>
__device__ __forceinline__ void issue_pv(float (&o)[kConfigs[kIndex].head_dim / 2],
                                         const uint32_t (&pa)[kConfigs[kIndex].block_n / 16][4], uint32_t v_tile) {
  constexpr int D = kConfigs[kIndex].head_dim, BN = kConfigs[kIndex].block_n;
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) mma_rs<D, T>(o, pa[kk], matrix_desc(v_tile + kk * 2048, BN * 128, 1024));
  wgmma_commit();
}

// Scale S_j to the log2 domain, mask it, and run its softmax (O's rescale is left to the caller).
template <int kBlockN>
__device__ __forceinline__ void scores_to_probs(float (&sc)[kBlockN / 2], const KernelParams& p, int key0, int row0,
                                                int row_lo, int lane, float (&m)[2], float (&l)[2],
                                                float (&alpha)[2]) {
  // Scale before masking: -inf times a negative or zero scale would be +inf or NaN.
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) sc[i] *= p.scale_log2;
  if (key0 + kBlockN > p.seqlen_k || (p.causal && key0 + kBlockN - 1 > row0 + p.causal_offset))
    mask_tile<kBlockN>(sc, p, key0, row_lo, lane);
  softmax_step<kBlockN>(sc, m, l, alpha);
}

// Per tile j, in one turn of the pingpong: issue S_j = Q.K_j^T and O += P_{j-1}.V_{j-1}; then, while the
// second runs, the softmax of S_j; then rescale O and turn S_j into the fragments P_j. Tile 0 (no P.V
// yet) and the last P.V are peeled off the loop: wgmma issues and waits under a condition make ptxas
// serialise every wgmma (C7518, "compiler-inserted WG.DP in divergent path"). `tiles` is the ring
// position (K/V tiles consumed before this item); `last_turn`: this item holds the CTA's last tile, whose
// turn consumer 1 keeps (consumer 0 never waits for it).
template <typename T, int kIndex>
__device__ void consume_item(const KernelParams& p, const Work& w, int consumer, const Smem<kIndex>& sm, int iter,
                             int tiles, bool last_turn) {
  constexpr TileConfig kCfg = kConfigs[kIndex];
  constexpr int D = kCfg.head_dim, BN = kCfg.block_n, kStages = kCfg.stages;
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int row0 = w.q0 + 64 * consumer;               // the warpgroup's first query row
  const int row_lo = row0 + 16 * warp + lane / 4;      // the thread's rows: row_lo, row_lo + 8
  const uint32_t q_rows = sm.q() + consumer * 64 * 128;  // its 64 rows within each 64-column block of Q
  const int my_turn = 1 + consumer, other_turn = 2 - consumer;

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];
  float sc[BN / 2];
  uint32_t pa[BN / 16][4];
  mbar_wait(sm.q_full(), iter & 1);
  if (w.n_tiles == 0) {
    mbar_arrive(sm.q_empty());
    store_output<T, D>(p, w, row_lo, lane, o, m, l);
    return;
  }
  const bool keep_last = consumer == 1 && last_turn;

  // Tile 0: S_0 alone.
  named_sync(my_turn);
  mbar_wait(sm.k_full(tiles % kStages), (tiles / kStages) & 1);
  wgmma_fence();
  issue_qk<T, kIndex>(sc, q_rows, sm.k(tiles % kStages));
  if (!(keep_last && w.n_tiles == 1)) named_arrive(other_turn);
  wgmma_wait<0>();
  mbar_arrive(sm.k_empty(tiles % kStages));
  if (w.n_tiles == 1) mbar_arrive(sm.q_empty());  // Q is read by S GEMMs only
  scores_to_probs<BN>(sc, p, 0, row0, row_lo, lane, m, l, alpha);
  to_fragments<T, BN>(sc, pa);

  for (int it = 1; it < w.n_tiles; ++it) {
    const int c = tiles + it, s = c % kStages, prev = (c - 1) % kStages;
    named_sync(my_turn);
    mbar_wait(sm.k_full(s), (c / kStages) & 1);
    wgmma_fence();
    issue_qk<T, kIndex>(sc, q_rows, sm.k(s));
    mbar_wait(sm.v_full(prev), ((c - 1) / kStages) & 1);
    issue_pv<T, kIndex>(o, pa, sm.v(prev));
    if (!(keep_last && it + 1 == w.n_tiles)) named_arrive(other_turn);
    wgmma_wait<1>();  // S_j is done (groups complete in order); P_{j-1}.V_{j-1} may still run
    mbar_arrive(sm.k_empty(s));
    if (it + 1 == w.n_tiles) mbar_arrive(sm.q_empty());
    scores_to_probs<BN>(sc, p, it * BN, row0, row_lo, lane, m, l, alpha);
    wgmma_wait<0>();  // O and the fragments are free again
    mbar_arrive(sm.v_empty(prev));
    rescale_o<D>(o, alpha);
    to_fragments<T, BN>(sc, pa);
  }

  const int last = (tiles + w.n_tiles - 1) % kStages;
  mbar_wait(sm.v_full(last), ((tiles + w.n_tiles - 1) / kStages) & 1);
  wgmma_fence();
  issue_pv<T, kIndex>(o, pa, sm.v(last));
  wgmma_wait<0>();
  mbar_arrive(sm.v_empty(last));
  store_output<T, D>(p, w, row_lo, lane, o, m, l);
}

// The consumer warpgroup's work items, with the ring position and the pingpong carried across them.
template <typename T, int kIndex>
__device__ void consume(const KernelParams& p, int consumer, const Smem<kIndex>& sm) {
  constexpr int BN = kConfigs[kIndex].block_n;
  const int count = work_count(p);
  int total = 0;  // the CTA's K/V tiles over all its items: the last one's turn is kept
  for (int index = blockIdx.x; index < count; index += gridDim.x) total += work_at<BN>(p, index).n_tiles;
  if (total > 0 && consumer == 1) named_arrive(1);  // consumer 0 takes the first turn
  int tiles = 0;
  for (int index = blockIdx.x, iter = 0; index < count; index += gridDim.x, ++iter) {
    const Work w = work_at<BN>(p, index);
    consume_item<T, kIndex>(p, w, consumer, sm, iter, tiles, tiles + w.n_tiles == total);
    tiles += w.n_tiles;
  }
}

template <typename T, int kIndex>
__global__ void __launch_bounds__(TileConfig::kThreads, 1)
    attention_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                     const __grid_constant__ CUtensorMap tm_v, const KernelParams p) {
  constexpr TileConfig kCfg = kConfigs[kIndex];
  extern __shared__ uint8_t smem_raw[];
  const Smem<kIndex> sm{(smem_addr(smem_raw) + 1023u) & ~1023u};  // the 128B swizzle repeats every 1024 bytes
  if (threadIdx.x == 0) {
    mbar_init(sm.q_full(), 1);
    mbar_init(sm.q_empty(), TileConfig::kConsumers * 128);
    for (int s = 0; s < kCfg.stages; ++s) {
      mbar_init(sm.k_full(s), 1);
      mbar_init(sm.v_full(s), 1);
      mbar_init(sm.k_empty(s), TileConfig::kConsumers * 128);  // every consumer thread releases a stage
      mbar_init(sm.v_empty(s), TileConfig::kConsumers * 128);
    }
    mbar_init_fence();
  }
  __syncthreads();
  // Broadcast from lane 0 so that ptxas sees a warp-uniform value: wgmma under a branch it cannot prove
  // uniform is serialised (C7518/C7520, "... in divergent path").
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  if (wg == 0) {
    regs_release<kProducerRegs>();
    if (threadIdx.x == 0) produce<kIndex>(&tm_q, &tm_k, &tm_v, p, sm);
  } else {
    regs_claim<kConsumerRegs>();
    consume<T, kIndex>(p, wg - 1, sm);
  }
}

}  // namespace evosdpa::detail::wgmma_sm90
