// The epilogue of a split item (SplitSchedule): the n CTAs of a cluster have each run the item's rows
// over their own run of its K/V tiles, and merge their partial results through distributed shared
// memory, so no workspace is allocated. Per query row, CTA s holds its max m_s (log2 domain), its sum l_s
// and its unnormalised O_s; the result is O = sum_s 2^(m_s - M) O_s / L with M = max_s m_s and
// L = sum_s 2^(m_s - M) l_s. CTA r owns the r-th of n slices of the item's rows:
//   1. cluster barrier (relaxed): every CTA's GEMMs are done, so every K/V ring is free;
//   2. each thread sends its rows' O_s, m_s and l_s into slot s of the owner's ring with st.async, whose
//      bytes complete the owner's merge barrier (the sender does not wait);
//   3. the owner waits on its merge barrier, merges its rows from its own shared memory (in slot order:
//      deterministic) and stores them. Nothing reads another CTA, so CTAs leave freely.
// One barrier and no remote loads: the fewest round trips of the four versions measured on an H100 at
// (1,8,512,64) (docs/perf-log.md v8.4), though all four took ~9,500-10,000 cycles of a ~15,000-cycle
// CTA; hence a split only where each CTA keeps several tiles (kMinTilesPerSplit).
// The producer warpgroup's threads join the barrier (idle()).
#pragma once

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"
#include "kernels/rtc_std.hpp"
#include "kernels/wgmma/ptx.cuh"
#include "kernels/wgmma/wgmma_epilogue.cuh"
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
    const int n = static_cast<int>(cluster_size()), rank = static_cast<int>(cluster_rank());
    const int slice = kBlockM / n;  // rows per owner (n divides 128 and 192)
    const int warp = (threadIdx.x % 128) / 32;
    full_row_sum(l[0]);
    full_row_sum(l[1]);
    // What this CTA receives: per row of its slice and per CTA, D floats of O and the two statistics.
    if (threadIdx.x == 128) mbar_expect_tx(sm.merge_full(), kBlockM * (4 * D + 8));
    cluster_sync_relaxed();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = 64 * consumer + 16 * warp + lane / 4 + 8 * r;  // within the item
      const uint32_t owner = static_cast<uint32_t>(row / slice);
      const int slot_row = rank * slice + row % slice;
      const uint32_t bar = cluster_map(sm.merge_full(), owner);
      const uint32_t dst = cluster_map(sm.partial(slot_row) + 8 * (lane & 3), owner);
#pragma unroll
      for (int c = 0; c < D / 8; ++c) st_async(dst + 32 * c, o[4 * c + 2 * r], o[4 * c + 2 * r + 1], bar);
      if ((lane & 3) == 0) {
        st_async(cluster_map(sm.stat(0, slot_row), owner), m[r], bar);
        st_async(cluster_map(sm.stat(1, slot_row), owner), l[r], bar);
      }
    }
    mbar_wait(sm.merge_full(), 0);

    // The owned rows, 4 columns per step, consecutive threads along a row.
    T* const out = static_cast<T*>(p.o) + w.batch * p.o_batch_stride + w.head * p.o_head_stride +
                   static_cast<int64_t>(w.q_start) * p.o_seq_stride;
    for (int idx = threadIdx.x - 128; idx < slice * (D / 4); idx += 128 * kCfg.consumers) {
      const int r = idx / (D / 4), col = 4 * (idx % (D / 4));
      float ms[kMaxSplits], weight[kMaxSplits];
      float big = -INFINITY;
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s)
        if (s < n) big = fmaxf(big, ms[s] = ld_shared_f32(sm.stat(0, s * slice + r)));
      const float base = big == -INFINITY ? 0.f : big;  // a row without keys: every l_s is 0
      float sum = 0.f;
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s)
        if (s < n) sum += ld_shared_f32(sm.stat(1, s * slice + r)) * (weight[s] = fast_exp2(ms[s] - base));
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s)
        if (s < n) {
          const float4 v = ld_shared_v4(sm.partial(s * slice + r) + 4 * col);
          const float f = weight[s] * inv;
          acc.x += f * v.x, acc.y += f * v.y, acc.z += f * v.z, acc.w += f * v.w;
        }
      const int q = w.q0 + rank * slice + r;
      if (q < w.len_q) {
        *reinterpret_cast<uint2*>(out + q * p.o_seq_stride + col) =
            make_uint2(pack2<T>(acc.x, acc.y), pack2<T>(acc.z, acc.w));
        if (p.lse != nullptr && col == 0) *lse_row(p, w, q) = lse_of(base, sum);
      }
    }
  }

  // The producer warpgroup's threads, once their loads are issued: the barrier of store().
  __device__ void idle() {
    __syncwarp();  // the producing thread rejoins its warp for the aligned barrier
    cluster_sync_relaxed();
  }
  __device__ void finish() {}
};

}  // namespace evosdpa::detail::wgmma_sm90
