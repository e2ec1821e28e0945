// The split-KV attention kernel (splitkv_sm80), for decoding against a KV cache: mma.sync m16n8k16 on
// 16 packed query rows, K/V tiles streamed through a cp.async ring, dense or paged keys, per-sequence
// key counts, and one of num_splits parts of the keys per block (splitkv_config.hpp says why).
//
// The loop is memory-bound by design: each warp does a few mma per tile, so what matters is that the
// copies of `stages - 1` tiles are always in flight. The per-warp math reuses mma_sm80's pieces
// (mma_qk, the online softmax, mma_pv) on the warp's slice of the tile.
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/kernel_params.hpp"
#include "kernels/mma/mma_kernel.cuh"
#include "kernels/sequence.cuh"
#include "kernels/splitkv/splitkv_config.hpp"

namespace evosdpa::detail::splitkv {

using mma_sm80::cp_async_16;
using mma_sm80::cp_async_commit;
using mma_sm80::cp_async_wait;
using mma_sm80::swizzle;

// What one block computes: sequence b, K/V head h_kv, packed rows [row0, row0 + 16), key part `split`.
// Consecutive blocks are the row groups of one part, which read the same keys (L2 hits).
struct Work {
  int b, h_kv, split, row0;
};

__device__ __forceinline__ Work block_work(const KernelParams& p) {
  const int heads_kv = p.heads_q / p.kv_group;
  const int groups = (p.seqlen_q * p.kv_group + kBlockRows - 1) / kBlockRows;
  int i = static_cast<int>(blockIdx.x);
  const int rg = i % groups;
  i /= groups;
  const int split = i % p.num_splits;
  i /= p.num_splits;
  return {i / heads_kv, i % heads_kv, split, rg * kBlockRows};
}

// The pages of the rows a thread copies in one tile (-1 past key_end), read from the page table one
// loop iteration before the tile's copies are issued so that those do not wait on the table (8-warp
// row, H200, paged fp16: B=8 L=128k 1,262 -> 1,060 us, B=1 L=128k 168.5 -> 153.5; it costs the
// shortest caches a little, B=1 L=8k 21.8 -> 23.8; docs/perf-log.md v13.17). The page of each row is
// stepped from the first row's (see load_kv_tile). Unused (0) for a dense cache.
template <int kRows>
struct TilePages {
  int page[kRows];
};
template <int BN, int D, int kThreads>
__device__ __forceinline__ TilePages<BN / (kThreads / (D / 8))> fetch_pages(const KernelParams& p, int b, int key0,
                                                                           int key_end, int tid) {
  constexpr int kStep = kThreads / (D / 8);
  TilePages<BN / kStep> t;
  if (p.page_table == nullptr) {
#pragma unroll
    for (int i = 0; i < BN / kStep; ++i) t.page[i] = 0;
    return t;
  }
  const int* table = p.page_table + static_cast<int64_t>(b) * p.page_table_batch_stride;
  const int first = key0 + tid / (D / 8);
  int column = first / p.page_size;
  int in_page = first - column * p.page_size;
#pragma unroll
  for (int i = 0; i < BN / kStep; ++i) {
    t.page[i] = first + i * kStep < key_end ? table[column] : -1;
    in_page += kStep;
    if (in_page >= p.page_size) {
      in_page -= p.page_size;
      ++column;
    }
  }
  return t;
}

// Copy keys [key0, key0 + BN) of K and V into one stage; keys at or past `key_end` or on a page outside
// [0, num_pages) are zero-filled (and never read: such a page's keys count as masked). Each thread copies
// one 16-byte column of rows `kStep` apart, a paged cache's from the pages fetch_pages read. The page
// and row of each key are stepped from the first key's (kStep <= 16 <= page_size: at most one page
// boundary per step) rather than divided per row: a division by the run-time page size is ~20
// instructions, and 16 of them per thread and tile cost paged decoding 20-27% (H200, B=8 L=128k 1,515
// -> 1,203 us, B=1 L=128k 223 -> 163; docs/perf-log.md v13.17).
template <int BN, int D, int kThreads, typename T>
__device__ __forceinline__ void load_kv_tile(uint32_t sK, uint32_t sV, const KernelParams& p, const T* k_head,
                                             const T* v_head, int b, int key0, int key_end,
                                             const TilePages<BN / (kThreads / (D / 8))>& pages, int tid) {
  constexpr int kChunks = D / 8;
  constexpr int kStep = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0 && BN % kStep == 0, "each thread copies whole rows of one column");
  static_assert(kStep <= 16, "a step crosses at most one page (pages are multiples of 16 keys)");
  const int row0 = tid / kChunks;
  const int chunk = tid % kChunks;
  if (p.page_table == nullptr) {
#pragma unroll
    for (int i = 0; i < BN / kStep; ++i) {
      const int r = row0 + i * kStep;
      const int key = key0 + r;
      const bool ok = key < key_end;
      const uint32_t dst = swizzle<kChunks>(r, chunk);
      const int64_t at = static_cast<int64_t>(b) * p.k_batch_stride + static_cast<int64_t>(key) * p.k_seq_stride;
      const int64_t at_v = static_cast<int64_t>(b) * p.v_batch_stride + static_cast<int64_t>(key) * p.v_seq_stride;
      cp_async_16(sK + dst, ok ? k_head + at + chunk * 8 : k_head, ok);
      cp_async_16(sV + dst, ok ? v_head + at_v + chunk * 8 : v_head, ok);
    }
    return;
  }
  const int first = key0 + row0;
  int in_page = first % p.page_size;
#pragma unroll
  for (int i = 0; i < BN / kStep; ++i) {
    const int r = row0 + i * kStep;
    const int key = key0 + r;
    const int page = key < key_end ? pages.page[i] : -1;
    const bool ok = page >= 0 && page < p.num_pages;
    const uint32_t dst = swizzle<kChunks>(r, chunk);
    const int64_t at = static_cast<int64_t>(page) * p.k_batch_stride + static_cast<int64_t>(in_page) * p.k_seq_stride;
    const int64_t at_v = static_cast<int64_t>(page) * p.v_batch_stride + static_cast<int64_t>(in_page) * p.v_seq_stride;
    cp_async_16(sK + dst, ok ? k_head + at + chunk * 8 : k_head, ok);
    cp_async_16(sV + dst, ok ? v_head + at_v + chunk * 8 : v_head, ok);
    in_page += kStep;
    if (in_page >= p.page_size) in_page -= p.page_size;
  }
}

// Whether the page of key `key` of sequence b is one the cache holds (always, dense).
__device__ __forceinline__ bool page_valid(const KernelParams& p, int b, int key) {
  if (p.page_table == nullptr) return true;
  const int page = p.page_table[static_cast<int64_t>(b) * p.page_table_batch_stride + key / p.page_size];
  return page >= 0 && page < p.num_pages;
}

// Q fragments of the block's 16 rows straight from global memory into the mma A layout (4-byte loads: Q
// is 16 rows, read once). Rows past the packed row count are zero.
template <typename T, int D>
__device__ __forceinline__ void load_q_fragments(uint32_t (&q)[1][D / 16][4], const KernelParams& p, const Work& w,
                                                 int lane) {
  const int rows = p.seqlen_q * p.kv_group;
  const T* ptr[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = w.row0 + lane / 4 + 8 * half;
    const int qi = r / p.kv_group;
    const int h = w.h_kv * p.kv_group + r % p.kv_group;
    ptr[half] = r < rows ? static_cast<const T*>(p.q) + w.b * p.q_batch_stride + h * p.q_head_stride +
                               static_cast<int64_t>(qi) * p.q_seq_stride + 2 * (lane % 4)
                         : nullptr;
  }
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const T* row = ptr[i & 1];
      q[0][kk][i] = row != nullptr ? *reinterpret_cast<const uint32_t*>(row + kk * 16 + 8 * (i >> 1)) : 0u;
    }
}

// Scale one warp's scores (16 rows x WK keys from key0) into the log2 domain and mask keys at or past
// key_end, above a row's causal limit, or on an invalid page (page_ok: bit g for the warp's 16-key group g).
template <int WK>
__device__ __forceinline__ void scale_and_mask(float (&s)[WK / 8][4], float scale_log2, int key0, int key_end,
                                               const int (&limit)[2], unsigned page_ok, int lane) {
#pragma unroll
  for (int n = 0; n < WK / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + n * 8 + 2 * (lane & 3) + (e & 1);
      const bool visible = key < key_end && key <= limit[e >> 1] && ((page_ok >> (n / 2)) & 1u);
      s[n][e] = visible ? s[n][e] * scale_log2 : -INFINITY;
    }
}

// Programmatic dependent launch (sm_90): the kernel lets its merge be scheduled as soon as every block
// has started, and the merge waits here until the kernel has finished and its stores are visible, so
// the second launch's latency overlaps the first kernel's tail. Both compile to nothing in an image
// built for an architecture before sm_90 (which is then launched without the attribute, since its
// merge could not wait: splitkv_launch.cuh), and the wait returns at once when the merge was launched
// without it.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_primary_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <typename T, int kIndex>
struct Kernel {
  static constexpr SplitKvConfig kCfg = kConfigs[kIndex];
  static constexpr int kD = kCfg.head_dim;
  static constexpr int kBN = kCfg.block_n;
  static constexpr int kWK = kCfg.warp_keys();
  static constexpr int kStages = kCfg.stages;
  static constexpr int kThreads = kCfg.threads();
  static constexpr uint32_t kTileBytes = kBN * kD * sizeof(T);
};

// Merge the warps' (m, l, O) of every row (each warp saw its own keys of every tile), then write O
// normalised and the lse: to O and lse with one part, to the workspace's part `split` otherwise.
template <typename T, int kIndex>
__device__ __forceinline__ void merge_warps_and_store(const float (&o)[Kernel<T, kIndex>::kD / 8][4], const float (&m)[2],
                                                      float (&l)[2], char* smem, const KernelParams& p, const Work& w,
                                                      int warp, int lane) {
  using K = Kernel<T, kIndex>;
  constexpr int D = K::kD;
  constexpr int kWarps = K::kCfg.warps;
  float* s_o = reinterpret_cast<float*>(smem);         // [warp][row][D]
  float* s_m = s_o + kWarps * kBlockRows * D;           // [warp][row]
  float* s_l = s_m + kWarps * kBlockRows;               // [warp][row]
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  __syncthreads();  // every warp is done with the K/V stages this reuses
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = lane / 4 + 8 * (e >> 1);
      s_o[(warp * kBlockRows + row) * D + n * 8 + 2 * (lane & 3) + (e & 1)] = o[n][e];
    }
  if ((lane & 3) == 0)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      s_m[warp * kBlockRows + lane / 4 + 8 * r] = m[r];
      s_l[warp * kBlockRows + lane / 4 + 8 * r] = l[r];
    }
  __syncthreads();

  // Each thread then owns 8 consecutive dims of one row: a 16-byte store of O.
  const int rows = p.seqlen_q * p.kv_group;
  for (int item = threadIdx.x; item < kBlockRows * D / 8; item += K::kThreads) {
    const int row = item / (D / 8);
    const int d0 = (item % (D / 8)) * 8;
    const int r = w.row0 + row;
    if (r >= rows) continue;
    float mx = -INFINITY;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) mx = fmaxf(mx, s_m[v * kBlockRows + row]);
    const float base = mx == -INFINITY ? 0.f : mx;  // a row with no key: every weight 0, O = 0
    float sum = 0.f, acc[8] = {};
#pragma unroll
    for (int v = 0; v < kWarps; ++v) {
      const float wgt = fast_exp2(s_m[v * kBlockRows + row] - base);
      sum += wgt * s_l[v * kBlockRows + row];
#pragma unroll
      for (int d = 0; d < 8; ++d) acc[d] += wgt * s_o[(v * kBlockRows + row) * D + d0 + d];
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    // Natural-log lse of the scaled scores: m and the sum are in the log2 domain of scale * log2(e).
    const float lse = sum > 0.f ? (mx + __log2f(sum)) * 0.69314718055994531f : -INFINITY;
    const int qi = r / p.kv_group;
    const int h = w.h_kv * p.kv_group + r % p.kv_group;
    const int64_t out_row = (static_cast<int64_t>(w.b) * p.heads_q + h) * p.seqlen_q + qi;
    if (p.num_splits == 1) {
      uint32_t packed[4];
#pragma unroll
      for (int d = 0; d < 4; ++d) packed[d] = pack2<T>(acc[2 * d] * inv, acc[2 * d + 1] * inv);
      T* dst = static_cast<T*>(p.o) + w.b * p.o_batch_stride + h * p.o_head_stride +
               static_cast<int64_t>(qi) * p.o_seq_stride + d0;
      *reinterpret_cast<uint4*>(dst) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
      if (p.lse != nullptr && d0 == 0) p.lse[out_row] = lse;
    } else {
      const int64_t total_rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
      float* part_o = static_cast<float*>(p.workspace) + (w.split * total_rows + out_row) * D + d0;
      *reinterpret_cast<float4*>(part_o) = make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
      *reinterpret_cast<float4*>(part_o + 4) = make_float4(acc[4] * inv, acc[5] * inv, acc[6] * inv, acc[7] * inv);
      if (d0 == 0) {
        float* part_lse = static_cast<float*>(p.workspace) + p.num_splits * total_rows * D;
        part_lse[w.split * total_rows + out_row] = lse;
      }
    }
  }
}

template <typename T, int kIndex>
__global__ void __launch_bounds__(Kernel<T, kIndex>::kThreads) splitkv_kernel(const KernelParams p) {
  using K = Kernel<T, kIndex>;
  constexpr int D = K::kD;
  constexpr int kBN = K::kBN;
  constexpr int kWK = K::kWK;
  constexpr int kStages = K::kStages;

  extern __shared__ __align__(128) char smem[];
  const uint32_t s_base = smem_addr(smem);
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const Work w = block_work(p);
  allow_dependent_launch();

  // Keys of this row group: the sequence's (seqused_k, sequence.cuh), cut at the causal limit of its last
  // query.
  const Sequence seq = sequence_of(p, w.b);
  const int offset = seq.causal_offset;
  const int rows = p.seqlen_q * p.kv_group;
  int key_end = seq.len_k;
  if (p.causal) {
    const int last_query = (min(w.row0 + kBlockRows, rows) - 1) / p.kv_group;
    key_end = max(0, min(key_end, last_query + offset + 1));
  }
  // This part's key blocks: an even share of the row group's.
  const int key_blocks = (key_end + kBN - 1) / kBN;
  const int per_split = (key_blocks + p.num_splits - 1) / p.num_splits;
  const int block_begin = min(key_blocks, w.split * per_split);
  const int num_tiles = min(key_blocks, block_begin + per_split) - block_begin;

  // Causal limit of the thread's two rows (rows lane/4 and lane/4 + 8 of the group).
  int limit[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    limit[r] = p.causal ? (w.row0 + lane / 4 + 8 * r) / p.kv_group + offset : INT_MAX;

  const T* k_head = static_cast<const T*>(p.k) + w.h_kv * p.k_head_stride;
  const T* v_head = static_cast<const T*>(p.v) + w.h_kv * p.v_head_stride;
  auto stage_k = [&](int tile) { return s_base + (tile % kStages) * 2 * K::kTileBytes; };
  auto pages_of = [&](int tile) { return fetch_pages<kBN, D, K::kThreads>(p, w.b, (block_begin + tile) * kBN, key_end, tid); };
  auto load = [&](int tile, const auto& pages) {
    load_kv_tile<kBN, D, K::kThreads>(stage_k(tile), stage_k(tile) + K::kTileBytes, p, k_head, v_head, w.b,
                                      (block_begin + tile) * kBN, key_end, pages, tid);
  };

  float o[1][D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[0][n][0] = o[0][n][1] = o[0][n][2] = o[0][n][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  if (num_tiles > 0) {
    // Groups: one per tile, the first kStages - 1 issued here; each iteration issues one more (empty
    // past the end), so "all but the newest kStages - 2" is exactly the tile about to be used.
#pragma unroll
    for (int t = 0; t < kStages - 1; ++t) {
      if (t < num_tiles) load(t, pages_of(t));
      cp_async_commit();
    }
    auto next_pages = pages_of(kStages - 1);
    uint32_t q_frag[1][D / 16][4];
    load_q_fragments<T, D>(q_frag, p, w, lane);

    for (int j = 0; j < num_tiles; ++j) {
      cp_async_wait<kStages - 2>();
      // Tile j visible to all; every warp is past tile j - 1, whose stage the next copy refills.
      __syncthreads();
      if (j + kStages - 1 < num_tiles) load(j + kStages - 1, next_pages);
      cp_async_commit();
      next_pages = pages_of(j + kStages);

      const uint32_t sK = stage_k(j) + warp * kWK * (D / 8) * 16;
      const uint32_t sV = stage_k(j) + K::kTileBytes + warp * kWK * (D / 8) * 16;
      const int key0 = (block_begin + j) * kBN + warp * kWK;
      float s[1][kWK / 8][4];
      mma_sm80::mma_qk<T, D, kWK, 1, true>(s, q_frag, 0u, sK, 0, lane);
      unsigned page_ok = ~0u;
      if (p.page_table != nullptr) {
#pragma unroll
        for (int g = 0; g < kWK / 16; ++g)
          if (key0 + 16 * g < key_end && !page_valid(p, w.b, key0 + 16 * g)) page_ok &= ~(1u << g);
      }
      scale_and_mask<kWK>(s[0], p.scale_log2, key0, key_end, limit, page_ok, lane);
      mma_sm80::rescale<kWK, D, 0>(s[0], o[0], m, l);
      mma_sm80::mma_pv<T, D, kWK, 1>(o, s, sV, lane);
    }
    cp_async_wait<0>();
  }
  merge_warps_and_store<T, kIndex>(o[0], m, l, smem, p, w, warp, lane);
}

// Combine the parts of every output row (one warp per row): lse = log sum exp(lse_s), O = sum
// exp(lse_s - lse) O_s. Rows whose parts all saw no key keep O = 0 and lse = -inf (a part without keys
// wrote O = 0, so its weight 0 adds nothing). Lane s holds part s's weight and the parts' O rows are read
// eight at a time with no dependence between them: a loop that waited for each part's load in turn
// spent one L2 round trip per part; the first eight go out with the lse reads (H200, B=8 L=1k 21.6 ->
// 19.5 us; docs/perf-log.md v13.18). One instantiation per row, not per head dim: the two D=128 rows'
// files are compiled for different architectures (src/sources.cmake), and a kernel instantiated in
// both would register one host stub with two images, one of which the older GPUs cannot load.
template <typename T, int kIndex>
__global__ void __launch_bounds__(128) merge_kernel(const KernelParams p) {
  constexpr int D = Kernel<T, kIndex>::kD;
  wait_for_primary_grid();
  const int64_t total_rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 4 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= total_rows) return;
  const int splits = p.num_splits;
  const float* part_o = static_cast<const float*>(p.workspace);
  const float* part_lse = part_o + splits * total_rows * D;
  constexpr int kPerLane = D / 32;  // 2 or 4 consecutive dims per lane: one 8- or 16-byte load per part
  struct alignas(4 * kPerLane) Chunk {
    float e[kPerLane];
  };
  static_assert(kPerLane == 2 || kPerLane == 4, "D is 64 or 128");
  // The first eight parts' O chunks, loaded before the weights are known: their round trip overlaps the
  // lse reads' instead of following it. Past the last part a load repeats it (a valid address, finite
  // values) and the weight is 0: lanes at or past the part count hold weight 0.
  const float* src0 = part_o + row * D + lane * kPerLane;
  const int n0 = min(32, splits);
  Chunk first[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) first[j] = *reinterpret_cast<const Chunk*>(src0 + min(j, n0 - 1) * total_rows * D);
  float mx = -INFINITY;
  for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, part_lse[s * total_rows + row]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  const float base = mx == -INFINITY ? 0.f : mx;
  float sum = 0.f;
  for (int s = lane; s < splits; s += 32) sum += __expf(part_lse[s * total_rows + row] - base);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float lse = sum > 0.f ? base + __logf(sum) : -INFINITY;

  float acc[kPerLane] = {};
  for (int s0 = 0; s0 < splits; s0 += 32) {
    const int s = s0 + lane;
    const float ls = s < splits ? part_lse[s * total_rows + row] : -INFINITY;
    const float wgt = ls == -INFINITY ? 0.f : __expf(ls - lse);
    const int n = min(32, splits - s0);
    const float* src = part_o + (s0 * total_rows + row) * D + lane * kPerLane;
    for (int i0 = 0; i0 < n; i0 += 8) {
      Chunk c[8];
      if (s0 == 0 && i0 == 0) {
#pragma unroll
        for (int j = 0; j < 8; ++j) c[j] = first[j];
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) c[j] = *reinterpret_cast<const Chunk*>(src + min(i0 + j, n - 1) * total_rows * D);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float wj = __shfl_sync(0xffffffffu, wgt, i0 + j);
#pragma unroll
        for (int d = 0; d < kPerLane; ++d) acc[d] += wj * c[j].e[d];
      }
    }
  }
  const int qi = static_cast<int>(row % p.seqlen_q);
  const int h = static_cast<int>((row / p.seqlen_q) % p.heads_q);
  const int b = static_cast<int>(row / (static_cast<int64_t>(p.seqlen_q) * p.heads_q));
  T* dst = static_cast<T*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride + static_cast<int64_t>(qi) * p.o_seq_stride +
           lane * kPerLane;
#pragma unroll
  for (int d = 0; d < kPerLane; d += 2) *reinterpret_cast<uint32_t*>(dst + d) = pack2<T>(acc[d], acc[d + 1]);
  if (p.lse != nullptr && lane == 0) p.lse[row] = lse;
}

}  // namespace evosdpa::detail::splitkv
