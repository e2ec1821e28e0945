// mma_sm80's backward (FlashAttention-2's algorithm). One block owns block_n keys of one (batch, K/V
// head) and streams past them every tile of tile_m queries that sees them, of every query head of the
// group (so grouped-query sums need no second pass), double-buffered by cp.async:
//   S = Q K^T,  P = exp2(S scale log2(e) - lse log2(e)),  dP = dO V^T,  dS = P (dP - D),
//   dV += P^T dO,  dK += dS^T Q,  dQ += dS K,
// with dK and dV in fp32 registers for the whole loop, stored once (dK times the scale), and each
// tile's dQ share added to float32 sums in the workspace, rounded by a last pass. P and dS go through
// shared memory between the products, because each product has its own warp layout (the config's
// sdp_warps_m, kv_warps_n, dq_warps_m): warp rectangles of 32 x 32 and more, where the first version's
// 16 keys per warp re-read every B fragment for 2 mma (docs/perf-log.md v10.3).
// dQ's adds: FAST mode, in whatever order the blocks arrive; DETERMINISTIC mode, in a fixed order of
// the key blocks of a (batch, K/V head), through a turn counter per query tile, so every run sums in
// the same order and gives the same bits: ascending without a mask (block kb adds once blocks 0 .. kb-1
// have), descending with a causal one, whose block kb starts at the tile of its diagonal: in ascending
// order it would wait there for block 0 to come down every tile before it (H100, D = 128, L = 4096:
// 2.0x FAST mode's time). A block waits only on blocks launched before it (with a causal mask the
// last key block of a head is launched first), which the GPU starts first, so the waits cannot
// deadlock; the cost is the first tiles' stagger across the blocks of a head.
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/backward_params.hpp"
#include "kernels/device_math.cuh"
#include "kernels/dq_turns.cuh"
#include "kernels/mma/bwd/bwd_config.hpp"
#include "kernels/mma/bwd/bwd_gemm.cuh"
#include "kernels/mma/bwd/bwd_workspace.hpp"
#include "kernels/mma/mma_tiles.cuh"

namespace evosdpa::detail::mma_sm80 {

// Shared-memory layout of the dK/dV kernel (bytes from the dynamic smem base).
template <int D, int TM, int BN>
struct DkdvSmem {
  static constexpr uint32_t kK = 0;
  static constexpr uint32_t kV = kK + BN * D * 2;
  static constexpr uint32_t kQ = kV + BN * D * 2;        // two buffers of TM x D
  static constexpr uint32_t kDo = kQ + 2 * TM * D * 2;   // two buffers of TM x D
  static constexpr uint32_t kP = kDo + 2 * TM * D * 2;   // TM x BN, [query][key]
  static constexpr uint32_t kDs = kP + TM * BN * 2;      // TM x BN, [query][key]
  static constexpr uint32_t kLse = kDs + TM * BN * 2;    // two buffers of TM floats
  static constexpr uint32_t kDelta = kLse + 2 * TM * 4;  // two buffers of TM floats
  static constexpr uint32_t kBytes = kDelta + 2 * TM * 4;
};

// A warp's rectangle of a [kRows x kCols] product split over kWarpsRows x (kWarps / kWarpsRows) warps:
// kMT 16-row m-tiles by kNT 8-column n-tiles, from (row0, col0).
template <int kRows, int kCols, int kWarps, int kWarpsRows>
struct WarpRect {
  static constexpr int kMT = kRows / kWarpsRows / 16;
  static constexpr int kNT = kCols / (kWarps / kWarpsRows) / 8;
  int row0, col0;
  __device__ explicit WarpRect(int warp)
      : row0((warp % kWarpsRows) * kMT * 16), col0((warp / kWarpsRows) * kNT * 8) {}
};

// Adds a warp rectangle of dQ (mma C layout) to float32 sums of rows of D from `sums`, the tile's first
// query row; rows at or past `valid_rows` are skipped. Each lane's address is computed once and every
// fragment's is an immediate offset from it (with 32-bit row indices per fragment, sign-extended, the
// sm_90 adds took 18 SASS instructions per fragment, then 13: docs/perf-log.md v13.20). On sm_90 each
// column pair goes with one red.global.add.v2.f32 (PTX 8.1, sm_90+) straight from the accumulators:
// half the atomic operations of scalar adds, which dominated FAST mode (D = 128, L = 4096 on an H100:
// 5.6 ms against 4.2 ms for the DETERMINISTIC mode's two passes). Not v4 adds after lane pairs swap
// halves (a quarter of the operations): an add holds its source registers until the memory pipe reads
// them, and with the swap's copies into four adjacent registers the next writes to those waited (ncu:
// 10% of the stall samples, long_scoreboard); the v2 form is 0.5-2.5% faster in FAST mode, level to
// 2.5% slower in DETERMINISTIC mode (H200, docs/perf-log.md v13.21).
template <int D, typename Rect, int MT, int NT>
__device__ __forceinline__ void add_dq(float* sums, int valid_rows, const Rect& r, const float (&c)[MT][NT][4],
                                       int lane) {
  const int row = r.row0 + (lane >> 2);
  float* const dst = sums + row * D + r.col0 + 2 * (lane & 3);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Every add addresses `dst` plus an immediate: with an address register per row of adds, rewritten
  // for the next row, each rewrite waited for the adds before to read it (ncu: 9% of the stall
  // samples, long_scoreboard); one address, D = 64 2% faster, D = 128 level (docs/perf-log.md v13.21).
  for_each_index<0, MT * 2 * NT>([&](auto i) {
    constexpr int kI = decltype(i)::value, mt = kI / (2 * NT), h = kI / NT % 2, n = kI % NT;
    asm volatile(
        "{\n .reg .pred p;\n setp.lt.s32 p, %3, %4;\n @p red.global.add.v2.f32 [%0+%5], {%1, %2};\n}" ::"l"(dst),
        "f"(c[mt][n][2 * h]), "f"(c[mt][n][2 * h + 1]), "r"(row + mt * 16 + h * 8), "r"(valid_rows),
        "n"(((mt * 16 + h * 8) * D + n * 8) * 4)
        : "memory");
  });
#else
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int dr = mt * 16 + h * 8;
      if (row + dr >= valid_rows) continue;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        atomicAdd(dst + dr * D + n * 8, c[mt][n][2 * h]);
        atomicAdd(dst + dr * D + n * 8 + 1, c[mt][n][2 * h + 1]);
      }
    }
#endif
}

// Rows of a [rows][D] output in T from a warp rectangle's accumulators times `scale` (rows from
// row0, columns from col0); rows at or past `valid_rows` are not written.
template <typename T, int MT, int NT>
__device__ __forceinline__ void store_rect(T* out, int64_t seq_stride, const float (&c)[MT][NT][4], float scale,
                                           int row0, int col0, int valid_rows, int lane) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + mt * 16 + (lane >> 2) + h * 8;
      if (row >= valid_rows) continue;
      T* dst = out + row * seq_stride + col0 + 2 * (lane & 3);
#pragma unroll
      for (int n = 0; n < NT; ++n)
        *reinterpret_cast<uint32_t*>(dst + n * 8) = pack2<T>(c[mt][n][2 * h] * scale, c[mt][n][2 * h + 1] * scale);
    }
}

// Stores a warp rectangle of P or dS, rounded to T, into a [query][key] tile of BN keys. On sm_90 one
// stmatrix.x4 per 16 x 16 block (matrix k: rows 8 (k & 1) .., the block's n-tile k >> 1; the thread's
// pair of it is the C fragment's half k & 1), a quarter of the 4-byte stores: with the dQ product
// unrolled, -8% at D = 128, L = 16384 (docs/perf-log.md v13.19).
template <typename T, int BN, typename Rect, int MT, int NT>
__device__ __forceinline__ void store_scores(uint32_t tile, const float (&c)[MT][NT][4], const Rect& r, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int k = lane >> 3;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nn = 0; nn < NT / 2; ++nn) {
      const int row = r.row0 + mt * 16 + (k & 1) * 8 + (lane & 7), chunk = r.col0 / 8 + 2 * nn + (k >> 1);
      const uint32_t v[4] = {pack2<T>(c[mt][2 * nn][0], c[mt][2 * nn][1]), pack2<T>(c[mt][2 * nn][2], c[mt][2 * nn][3]),
                             pack2<T>(c[mt][2 * nn + 1][0], c[mt][2 * nn + 1][1]),
                             pack2<T>(c[mt][2 * nn + 1][2], c[mt][2 * nn + 1][3])};
      stmatrix_x4(tile + swizzle<BN / 8>(row, chunk), v);
    }
#else
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = r.row0 + mt * 16 + (lane >> 2) + h * 8, col = r.col0 + n * 8;
        const uint32_t v = pack2<T>(c[mt][n][2 * h], c[mt][n][2 * h + 1]);
        asm volatile("st.shared.b32 [%0], %1;" ::"r"(tile + swizzle<BN / 8>(row, col / 8) + 4 * (lane & 3)), "r"(v)
                     : "memory");
      }
#endif
}

// S and dP of a warp rectangle become P = exp2(S scale log2(e) - lse) and dS = P (dP - D), in place.
// kMask: the tile holds keys past the end or past a causal diagonal, whose P is 0. Two instantiations
// rather than a runtime test per element, which the compiler turned into ~250 predicate and select
// instructions per tile on every tile (ncu: 1,479 instructions per warp and tile against
// FlashAttention-2's 1,016; docs/perf-log.md v13.20).
template <bool kMask, int SM, int SN, typename Rect>
__device__ __forceinline__ void scores_to_p_ds(float (&s)[SM][SN][4], float (&ds)[SM][SN][4], const float* lse,
                                               const float* delta, const KernelParams& p, const Rect& r, int k0,
                                               int q0, int lane) {
#pragma unroll
  for (int mt = 0; mt < SM; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = r.row0 + mt * 16 + (lane >> 2) + h * 8;
      const float row_lse = lse[row] * kLog2e, row_delta = delta[row];
#pragma unroll
      for (int n = 0; n < SN; ++n)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          float x = fast_exp2(s[mt][n][e] * p.scale_log2 - row_lse);
          if constexpr (kMask) {
            const int key = k0 + r.col0 + n * 8 + 2 * (lane & 3) + (e & 1);
            // Selected, not computed from -inf: a row that sees no key has lse = -inf.
            if (!(key < p.seqlen_k && (!p.causal || key <= q0 + row + p.causal_offset))) x = 0.f;
          }
          s[mt][n][e] = x;
          ds[mt][n][e] = x * (ds[mt][n][e] - row_delta);
        }
    }
}

template <typename T, int kIndex, bool kDeterministic>
__device__ __forceinline__ void bwd_dkdv(const BackwardParams& bp, const BwdWorkspace& ws) {
  using Cfg = BwdKernel<kIndex>;
  constexpr int D = Cfg::kD, TM = Cfg::kTM, BN = Cfg::kBN, kThreads = Cfg::kThreads, kWarps = Cfg::kWarps;
  using L = DkdvSmem<D, TM, BN>;
  using SdpRect = WarpRect<TM, BN, kWarps, Cfg::kSdpWarpsM>;   // S, dP, P, dS: queries x keys
  using KvRect = WarpRect<BN, D, kWarps, Cfg::kKvWarpsN>;      // dK, dV: keys x D
  using DqRect = WarpRect<TM, D, kWarps, Cfg::kDqWarpsM>;      // dQ: queries x D
  constexpr int SM = SdpRect::kMT, SN = SdpRect::kNT, KM = KvRect::kMT, KN = KvRect::kNT;
  // S = Q K^T, dP = dO V^T: A [query][d], B [key][d]. dV += P^T dO, dK += dS^T Q: A read transposed from
  // [query][key], B [query][d]. dQ += dS K: A [query][key], B [key][d].
  using SdpOps = Operands<D / 8, false, D / 8, false>;
  using KvOps = Operands<BN / 8, true, D / 8, true>;
  using DqOps = Operands<BN / 8, false, D / 8, true>;
  constexpr uint32_t kQTileBytes = TM * D * 2;
  const KernelParams& p = bp.fwd;

  extern __shared__ __align__(128) char smem[];
  const uint32_t base = smem_addr(smem);
  float* const s_lse = reinterpret_cast<float*>(smem + L::kLse);
  float* const s_delta = reinterpret_cast<float*>(smem + L::kDelta);

  const int num_k_blocks = (p.seqlen_k + BN - 1) / BN;
  const int bh = blockIdx.x / num_k_blocks;
  const int b = bh / bp.heads_kv, h_kv = bh % bp.heads_kv;
  const int kb = kDeterministic && p.causal ? num_k_blocks - 1 - blockIdx.x % num_k_blocks : blockIdx.x % num_k_blocks;
  const int k0 = kb * BN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const SdpRect sr(warp);
  const KvRect kr(warp);

  load_tile<BN, D, kThreads>(base + L::kK,
                             static_cast<const T*>(p.k) + b * p.k_batch_stride + h_kv * p.k_head_stride +
                                 static_cast<int64_t>(k0) * p.k_seq_stride,
                             p.k_seq_stride, p.seqlen_k - k0, tid);
  load_tile<BN, D, kThreads>(base + L::kV,
                             static_cast<const T*>(p.v) + b * p.v_batch_stride + h_kv * p.v_head_stride +
                                 static_cast<int64_t>(k0) * p.v_seq_stride,
                             p.v_seq_stride, p.seqlen_k - k0, tid);

  // Query tiles that see a key of this block: from the one holding query k0 - causal_offset (causal),
  // for each query head of the group, in order: a tile is (query head, query tile), stepped by next_tile
  // (the divisions by the tile count it replaces sat on every tile's critical path: H200, fp16, 1.5-4%
  // of the time; docs/perf-log.md v13.21).
  const int first = p.causal ? max(0, k0 - p.causal_offset) / TM : 0;
  const int end = (p.seqlen_q + TM - 1) / TM;
  const int total = max(0, end - first) * p.kv_group;
  struct Tile {
    int h, qt;  // query head, query tile
  };
  const auto next_tile = [&](Tile x) { return x.qt + 1 < end ? Tile{x.h, x.qt + 1} : Tile{x.h + 1, first}; };

  const auto load_queries = [&](Tile x, int buf) {
    // The thread index read afresh (volatile, so not hoisted): with the offsets derived from it kept
    // across the loop, the D = 64 row spilled 8 bytes in DETERMINISTIC mode.
    int thread;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(thread));
    const int h = x.h, q0 = x.qt * TM;
    load_tile<TM, D, kThreads>(base + L::kQ + buf * kQTileBytes,
                               static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride +
                                   static_cast<int64_t>(q0) * p.q_seq_stride,
                               p.q_seq_stride, p.seqlen_q - q0, thread);
    load_tile<TM, D, kThreads>(base + L::kDo + buf * kQTileBytes,
                               static_cast<const T*>(bp.dout) + b * bp.dout_batch_stride + h * bp.dout_head_stride +
                                   static_cast<int64_t>(q0) * bp.dout_seq_stride,
                               bp.dout_seq_stride, p.seqlen_q - q0, thread);
    // lse and D by 4-byte cp.async: a head's rows of these float arrays need not start 16-byte aligned,
    // and plain loads stalled the loading warps a global-memory latency every tile with the block's
    // barrier behind them (ncu: 1.3% of all stall samples on one FMUL). Rows past the end get 0 (zero
    // fill): their Q and dO rows are zero, so P = 1, dP = 0 and dS = 0 add nothing.
    if (thread < TM) {
      const int64_t row = (static_cast<int64_t>(b) * p.heads_q + h) * p.seqlen_q + q0 + thread;
      const bool valid = q0 + thread < p.seqlen_q;
      cp_async_4(base + L::kLse + (buf * TM + thread) * 4, valid ? p.lse + row : p.lse, valid);
      cp_async_4(base + L::kDelta + (buf * TM + thread) * 4, valid ? ws.delta + row : ws.delta, valid);
    }
  };

  float dk[KM][KN][4] = {}, dv[KM][KN][4] = {};
  Tile cur{h_kv * p.kv_group, first};
  if (total > 0) load_queries(cur, 0);
  cp_async_commit();  // K, V, and query tile 0

  for (int t = 0; t < total; ++t) {
    cp_async_wait<0>();
    // Tile t visible to all; every warp is past tile t-1, so its buffers and the P and dS tiles are free.
    __syncthreads();
    const int buf = t & 1, q0 = cur.qt * TM;
    const Tile next = next_tile(cur);
    const uint32_t sQ = base + L::kQ + buf * kQTileBytes, sDo = base + L::kDo + buf * kQTileBytes;

    float s[SM][SN][4] = {}, ds[SM][SN][4] = {};  // S then P; dP then dS
    warp_gemm_pair<T, SdpOps, SM, SN, D, Cfg::kSdpUnroll>(s, sQ, base + L::kK, ds, sDo, base + L::kV, sr.row0, sr.col0, lane);
    // The next tile's loads issue here, while the products' mma complete (H200, fp16: 1-3% faster than
    // at the top of the tile; docs/perf-log.md v13.21).
    if (t + 1 < total) load_queries(next, buf ^ 1);
    cp_async_commit();
    // Keys past the end must be masked: their zero K rows give S = 0, and exp2(-lse) can overflow.
    const bool needs_mask = k0 + BN > p.seqlen_k || (p.causal && k0 + BN - 1 > q0 + p.causal_offset);
    const float* const lse = s_lse + buf * TM;
    const float* const delta = s_delta + buf * TM;
    if (needs_mask)
      scores_to_p_ds<true>(s, ds, lse, delta, p, sr, k0, q0, lane);
    else
      scores_to_p_ds<false>(s, ds, lse, delta, p, sr, k0, q0, lane);
    store_scores<T, BN>(base + L::kP, s, sr, lane);
    store_scores<T, BN>(base + L::kDs, ds, sr, lane);
    __syncthreads();  // P and dS whole

    // dV += P^T dO, dK += dS^T Q: in FAST mode before dQ's product and adds, in DETERMINISTIC mode after,
    // so that the block passes dQ's turn a product sooner (H200, fp16: DETERMINISTIC 3-13% faster, FAST
    // mostly 1-5% slower in that order; docs/perf-log.md v13.21).
    const auto dk_dv = [&] {
      warp_gemm_pair<T, KvOps, KM, KN, TM, Cfg::kKvUnroll>(dv, base + L::kP, sDo, dk, base + L::kDs, sQ, kr.row0, kr.col0,
                                                           lane);
    };
    if constexpr (!kDeterministic) dk_dv();

    const DqRect qr(warp);
    float dq[DqRect::kMT][DqRect::kNT][4] = {};
    warp_gemm<T, DqOps, DqRect::kMT, DqRect::kNT, BN, Cfg::kDqUnroll>(dq, base + L::kDs, base + L::kK, qr.row0, qr.col0,
                                                                      lane);
    const int64_t head_row = (static_cast<int64_t>(b) * p.heads_q + cur.h);
    int* const turn = kDeterministic ? ws.dq_turn + head_row * ((p.seqlen_q + TM - 1) / TM) + q0 / TM : nullptr;
    if constexpr (kDeterministic) {
      // With a causal mask, the blocks that see tile q0 are 0 .. last; they add from last down.
      const int last = min(num_k_blocks, (q0 + TM + p.causal_offset + BN - 1) / BN) - 1;
      if (tid == 0) wait_turn(turn, p.causal ? last - kb : kb);
      __syncthreads();
    }
    add_dq<D>(ws.dq_accum + (head_row * p.seqlen_q + q0) * D, p.seqlen_q - q0, qr, dq, lane);
    if constexpr (kDeterministic) {
      __syncthreads();
      if (tid == 0) pass_turn(turn);
    }
    if constexpr (kDeterministic) dk_dv();
    cur = next;
  }
  cp_async_wait<0>();

  const int valid = p.seqlen_k - k0;
  store_rect<T>(static_cast<T*>(bp.dk) + b * bp.dk_batch_stride + h_kv * bp.dk_head_stride +
                    static_cast<int64_t>(k0) * bp.dk_seq_stride,
                bp.dk_seq_stride, dk, p.scale, kr.row0, kr.col0, valid, lane);
  store_rect<T>(static_cast<T*>(bp.dv) + b * bp.dv_batch_stride + h_kv * bp.dv_head_stride +
                    static_cast<int64_t>(k0) * bp.dv_seq_stride,
                bp.dv_seq_stride, dv, 1.f, kr.row0, kr.col0, valid, lane);
}

// One block of 8 warps per SM at most: the rows' dK and dV alone take 128 registers a thread at D = 128.
template <typename T, int kIndex, bool kDeterministic>
__global__ void __launch_bounds__(BwdKernel<kIndex>::kThreads, 1)
    bwd_dkdv_kernel(const BackwardParams bp, const BwdWorkspace ws) {
#if defined(__CUDA_ARCH__)
  if constexpr (__CUDA_ARCH__ < 10 * BwdKernel<kIndex>::kMinArch)
    __trap();  // selection never gives the row to this architecture (bwd_config_index)
  else
    bwd_dkdv<T, kIndex, kDeterministic>(bp, ws);
#endif
}

}  // namespace evosdpa::detail::mma_sm80
