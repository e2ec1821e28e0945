// The epilogue of a split item (SplitSchedule): the n CTAs of a cluster have each run the item's rows
// over their own run of its K/V tiles, and merge their partial results through distributed shared
// memory, so no workspace is allocated. Per query row, CTA s holds its max m_s (log2 domain), its sum l_s
// and its unnormalised O_s; the result is O = sum_s 2^(m_s - M) O_s / L with M = max_s m_s and
// L = sum_s 2^(m_s - M) l_s. CTA r owns the r-th of n slices of the item's rows:
//   1. the storing consumers (each its 64 rows; with split_keys the item's storer, after its hand-over)
//      stage the CTA's rows (O_s, m_s, l_s) in its own shared memory, over the Q and K/V rings once every
//      GEMM of the CTA is done;
//   2. cluster barrier (relaxed): every CTA's rows are staged and no CTA reads its rings any more;
//   3. one thread per CTA copies each other owner's slice of its staged rows into that owner's slot
//      `rank` with one bulk copy (shared::cta to shared::cluster), completing the owner's merge barrier
//      (its own slice it reads where it is staged);
//   4. the owner waits on its merge barrier, merges its rows from its own shared memory (in slot order:
//      deterministic) and stores them;
//   5. a second cluster barrier, whose arrival is each owner's merge barrier done and whose wait comes
//      after the stores: a CTA leaves only once the copies out of its staged rows have all landed.
// Step 3 as each thread's 8-byte st.async stores of its values (the version of docs/perf-log.md v8.4)
// took 2,200-3,000 cycles at (1,8,512,64) in clusters of 2, of a merge of ~7,500 (clock trace, v13.9).
// The producer warpgroup's threads, and with split_keys the consumer that does not store, join the
// barrier (pass()).
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
  static constexpr int kBlockM = Shape<kIndex>::kBlockM, D = kCfg.head_dim, C = kCfg.consumers;
  static constexpr int kRowBytes = kCfg.partial_row_bytes();
  // The threads that call store(): every consumer's (each its own 64 rows), with split_keys the storer's.
  static constexpr int kStoreThreads = (kCfg.split_keys ? 1 : C) * 128;
  static constexpr int kBarrier = 2 * C + 1;  // after the pingpong's 1..C and the epilogue's C+1..2C

  __device__ void first_s_done(const Smem<kIndex>&) {}

  __device__ void store(const KernelParams& p, const CUtensorMap*, const Work& w, const Smem<kIndex>& sm, int,
                        int consumer, int, int lane, const float (&o)[D / 2], const float (&m)[2], float (&l)[2],
                        float /* o_scale: 1, FP8 rows never split an item */) {
    static_assert(!kCfg.fp8, "FP8 rows take whole items (supports()): O's scale is 1 here");
    const int n = static_cast<int>(cluster_size()), rank = static_cast<int>(cluster_rank());
    const int slice = kBlockM / n;  // rows per owner (n divides 64, 128 and 192)
    const int t = threadIdx.x % 128, warp = t / 32;
    const int at = kCfg.split_keys ? 0 : consumer;  // the warpgroup's 64 rows within the item
    full_row_sum(l[0]);
    full_row_sum(l[1]);
    // The staged rows lie over the rings: with a row split the other consumers may still be in their
    // GEMMs (split_keys: the storer's hand-over has waited for the other's last one). A consumer without
    // a tile reaches this barrier from consume_item's early path, the others after their tiles: another
    // inlined copy of store(), hence the unaligned barrier (synccheck, m192 and m128 rows in clusters of
    // 2 at q = k = 129 top-left, where rank 1's first 128 rows see no key).
    if constexpr (!kCfg.split_keys) named_sync_threads_unaligned(kBarrier, kStoreThreads);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint32_t row = sm.staged(64 * at + 16 * warp + lane / 4 + 8 * r);
#pragma unroll
      for (int c = 0; c < D / 8; ++c) st_shared_v2(row + 4 * (8 * c + 2 * (lane & 3)), o[4 * c + 2 * r], o[4 * c + 2 * r + 1]);
      if ((lane & 3) == 0) st_shared_v2(row + 4 * D, m[r], l[r]);
    }
    fence_async_shared();  // the staged rows, for the bulk copies (async proxy)
    named_sync_threads_unaligned(kBarrier, kStoreThreads);  // ... all of them, before one thread copies them
    const bool issuer = threadIdx.x == (kCfg.split_keys ? 128 * (1 + consumer) : 128);
    if (issuer) mbar_expect_tx(sm.merge_full(), (n - 1) * slice * kRowBytes);  // a slice from each other CTA
    __syncwarp();  // converged for the cluster barrier (.aligned per warp) after the unaligned one
    cluster_sync_relaxed();
    if (issuer)
      for (int owner = 0; owner < n; ++owner)
        if (owner != rank)
          bulk_copy_to_cluster(cluster_map(sm.received(rank * slice), static_cast<uint32_t>(owner)),
                               sm.staged(owner * slice), slice * kRowBytes,
                               cluster_map(sm.merge_full(), static_cast<uint32_t>(owner)));
    mbar_wait(sm.merge_full(), 0);
    __syncwarp();              // (the spin of mbar_wait, inline PTX, leaves no reconvergence point)
    cluster_arrive_relaxed();  // every copy into this CTA has landed (step 5)

    // Row r of the owned slice as CTA s ran it.
    const auto slot_row = [&](int s, int r) { return s == rank ? sm.staged(rank * slice + r) : sm.received(s * slice + r); };
    // The owned rows, 4 columns per step, consecutive threads along a row.
    T* const out = static_cast<T*>(p.o) + w.batch * p.o_batch_stride + w.head * p.o_head_stride +
                   static_cast<int64_t>(w.q_start) * p.o_seq_stride;
    const int first = kCfg.split_keys ? t : static_cast<int>(threadIdx.x) - 128;
    for (int idx = first; idx < slice * (D / 4); idx += kStoreThreads) {
      const int r = idx / (D / 4), col = 4 * (idx % (D / 4));
      float ms[kMaxSplits], weight[kMaxSplits];
      float big = -INFINITY;
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s)
        if (s < n) big = fmaxf(big, ms[s] = ld_shared_f32(slot_row(s, r) + 4 * D));
      const float base = big == -INFINITY ? 0.f : big;  // a row without keys: every l_s is 0
      float sum = 0.f;
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s)
        if (s < n) sum += ld_shared_f32(slot_row(s, r) + 4 * (D + 1)) * (weight[s] = fast_exp2(ms[s] - base));
      const float inv = sum > 0.f ? fast_rcp(sum) : 0.f;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s)
        if (s < n) {
          const float4 v = ld_shared_v4(slot_row(s, r) + 4 * col);
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
    cluster_wait();  // and into the others, which read this CTA's staged rows: it may leave
  }

  // The producer warpgroup's threads once their loads are issued, and with split_keys the consumer that
  // hands its rows over: the two barriers of store().
  __device__ void pass() {
    __syncwarp();  // the producing thread rejoins its warp for the aligned barriers
    cluster_sync_relaxed();
    cluster_sync_relaxed();
  }
  __device__ void idle() { pass(); }
  __device__ void finish() {}
};

}  // namespace evosdpa::detail::wgmma_sm90
