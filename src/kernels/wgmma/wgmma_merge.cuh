// The epilogue of a split item (SplitSchedule): the CTAs of a cluster have each run the item's rows over
// their own run of its K/V tiles, and merge the partial results through distributed shared memory, so no
// workspace is allocated. Per query row, each CTA holds its max m_s (log2 domain), its sum l_s and its
// unnormalised O_s; the result is O = sum_s 2^(m_s - M) O_s / L with M = max_s m_s and
// L = sum_s 2^(m_s - M) l_s.
//   1. Each CTA publishes its rows' m_s and l_s in its shared memory; cluster barrier.
//   2. Each thread reads its rows' statistics from every CTA, and writes its O_s scaled by
//      2^(m_s - M) / L over its CTA's K/V ring (every GEMM of the CTA is done once all its threads have
//      passed the barrier); cluster barrier.
//   3. CTA r sums the r-th of n slices of the rows over the cluster (in rank order: deterministic),
//      converts them and stores them; cluster barrier, so that no CTA leaves while others read it.
// The producer warpgroup's threads join the three barriers (idle()).
#pragma once

#include <cstdint>

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"
#include "kernels/wgmma/ptx.cuh"
#include "kernels/wgmma/wgmma_scheduler.cuh"
#include "kernels/wgmma/wgmma_smem.cuh"

namespace evosdpa::detail::wgmma_sm90 {

template <typename T, int kIndex>
struct MergeEpilogue {
  static constexpr TileConfig kCfg = kConfigs[kIndex];
  static constexpr uint32_t kQReleases = 1;  // one item per CTA: its Q buffer is never reused
  static constexpr int kBlockM = Shape<kIndex>::kBlockM, D = kCfg.head_dim;

  __device__ void first_s_done(const Smem<kIndex>&) {}

  __device__ void store(const KernelParams& p, const CUtensorMap*, const Work& w, const Smem<kIndex>& sm, int,
                        int consumer, int, int lane, const float (&o)[D / 2], const float (&m)[2], float (&l)[2]) {
    const uint32_t n = cluster_size(), rank = cluster_rank();
    const int rows_per_cta = (kBlockM + static_cast<int>(n) - 1) / static_cast<int>(n);
    const int warp = (threadIdx.x % 128) / 32;
    int row[2];  // the thread's rows within the item
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row[r] = 64 * consumer + 16 * warp + lane / 4 + 8 * r;
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
      if ((lane & 3) == 0) {
        st_shared(sm.stat(0, row[r]), m[r]);
        st_shared(sm.stat(1, row[r]), l[r]);
      }
    }
    cluster_sync();

    float factor[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float ms[kMaxSplits], ls[kMaxSplits];
      float big = -INFINITY;
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s) {
        if (s >= static_cast<int>(n)) break;
        ms[s] = ld_cluster(cluster_map(sm.stat(0, row[r]), s));
        ls[s] = ld_cluster(cluster_map(sm.stat(1, row[r]), s));
        big = fmaxf(big, ms[s]);
      }
      const float base = big == -INFINITY ? 0.f : big;  // rows without keys: every l_s is 0
      float sum = 0.f;
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s) {
        if (s >= static_cast<int>(n)) break;
        sum += ls[s] * fast_exp2(ms[s] - base);
      }
      factor[r] = sum > 0.f ? fast_exp2(m[r] - base) / sum : 0.f;
      const int q = w.q0 + row[r];
      if (p.lse != nullptr && (lane & 3) == 0 && q < p.seqlen_q && row[r] / rows_per_cta == static_cast<int>(rank))
        p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + w.head) * p.seqlen_q + q] =
            sum > 0.f ? (base + __log2f(sum)) * 0.6931471805599453f : -INFINITY;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int c = 0; c < D / 8; ++c) {  // columns 8c + 2 (lane % 4), + 1
        const int i = 4 * c + 2 * r;
        st_shared(sm.partial(row[r]) + 4 * (8 * c + 2 * (lane & 3)), o[i] * factor[r], o[i + 1] * factor[r]);
      }
    cluster_sync();

    // This CTA's slice of rows, 4 columns per step, consecutive threads along a row.
    const int first = static_cast<int>(rank) * rows_per_cta;
    const int count = (min(kBlockM, first + rows_per_cta) - first) * (D / 4);
    T* const out = static_cast<T*>(p.o) + w.batch * p.o_batch_stride + w.head * p.o_head_stride;
    for (int idx = threadIdx.x - 128; idx < count; idx += 128 * kCfg.consumers) {
      const int r = first + idx / (D / 4), col = 4 * (idx % (D / 4));
      float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int s = 0; s < static_cast<int>(n); ++s) {
        const float4 v = ld_cluster_v4(cluster_map(sm.partial(r) + 4 * col, s));
        sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
      }
      if (w.q0 + r < p.seqlen_q)
        *reinterpret_cast<uint2*>(out + (w.q0 + r) * p.o_seq_stride + col) =
            make_uint2(pack2<T>(sum.x, sum.y), pack2<T>(sum.z, sum.w));
    }
    cluster_sync();
  }

  // The producer warpgroup's threads, once their loads are issued: the three barriers of store().
  __device__ void idle() {
    cluster_sync();
    cluster_sync();
    cluster_sync();
  }
  __device__ void finish() {}
};

}  // namespace evosdpa::detail::wgmma_sm90
