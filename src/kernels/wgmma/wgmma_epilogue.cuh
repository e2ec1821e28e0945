// The epilogue of the Hopper kernel's persistent grid: how a consumer warpgroup's 64 rows of O (normalised
// by the row sums) and their lse leave the kernel, and when the item's Q buffer, which O passes through,
// is free again. The consumer calls it at two points of an item: first_s_done (its first S GEMM has
// completed, or it has none) and store (after its last P.V); the producer warpgroup's threads call idle()
// when their loads are issued. (A split item's epilogue: wgmma_merge.cuh.)
#pragma once

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"
#include "kernels/rtc_std.hpp"
#include "kernels/wgmma/cu_tensor_map.hpp"
#include "kernels/wgmma/ptx.cuh"
#include "kernels/wgmma/wgmma_scheduler.cuh"
#include "kernels/wgmma/wgmma_smem.cuh"

namespace evosdpa::detail::wgmma_sm90 {

// The full row sum from the four lanes' partial ones.
__device__ __forceinline__ void full_row_sum(float& l) {
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
}

// 1/l after full_row_sum, or 0 for a row that saw no key (O = 0).
__device__ __forceinline__ float inverse_row_sum(float& l) {
  full_row_sum(l);
  return l > 0.f ? fast_rcp(l) : 0.f;
}

// lse = ln(sum exp(s)) of a row from its log2-domain max m and full sum l; -inf for a row without keys.
__device__ __forceinline__ float lse_of(float m, float l) {
  return l > 0.f ? (m + __log2f(l)) * 0.6931471805599453f : -INFINITY;
}
__device__ __forceinline__ float* lse_row(const KernelParams& p, const Work& w, int row) {
  return p.lse + w.batch * p.lse_batch_stride + w.head * p.lse_head_stride + w.q_start + row;
}

__device__ __forceinline__ void store_lse(const KernelParams& p, const Work& w, int row, int lane, float m, float l) {
  if (p.lse != nullptr && (lane & 3) == 0 && row < w.len_q) *lse_row(p, w, row) = lse_of(m, l);
}

// Packed queries, a sequence's last block: TMA would clip the store at total_q, not at the sequence's
// end, and write over the next sequence's rows; the warpgroup copies its staged rows (rows_at: their
// 64 x 128-byte blocks, swizzled as st_shared put them) to global memory itself, 16 bytes per thread and
// step, rows past the end left out. 16-bit O only (FP8 inputs are refused with packed queries).
template <typename T, int D, int kBlockBytes>
__device__ __forceinline__ void copy_rows_out(const KernelParams& p, const Work& w, uint32_t rows_at, int row0, int t) {
  constexpr int kChunks = D / 8;  // 16-byte chunks of a row
  T* const out = static_cast<T*>(p.o) + w.batch * p.o_batch_stride + w.head * p.o_head_stride +
                 (static_cast<int64_t>(w.q_start) + row0) * p.o_seq_stride;
  const int rows = min(64, w.len_q - row0);
  for (int i = t; i < rows * kChunks; i += 128) {
    const int row = i / kChunks, c = i % kChunks;
    const uint4 v = ld_shared_u4(rows_at + (c / 8) * kBlockBytes + row * 128 + (((c % 8) ^ (row % 8)) * 16));
    *reinterpret_cast<uint4*>(out + row * p.o_seq_stride + 8 * c) = v;
  }
}

// O through shared memory: the warpgroup writes its rows into the item's Q buffer (Q's swizzled layout,
// conflict-free: the 8 rows of a store instruction fall in 8 different 16-byte units), one thread stores
// them with TMA (rows past seqlen_q are not written) and moves on. The buffer is released once TMA has
// read it, which that thread checks after the next item's first S GEMM: by then it has long happened, and
// no warp of the warpgroup waits for it (waiting right after the store cost 10% at D=64, L=512). Against
// 4-byte global stores from the registers (8 rows per warp instruction), +4% at causal D=128, L=512
// with the wait, +10% with it deferred. FP8 rows: O (fp16 or bf16, o_dtype) is twice Q's bytes, so each
// consumer has a buffer of its own (o_stage), which the warpgroup writes once the storing thread has seen
// the previous store read it (the barrier at the start of store: that thread passed first_s_done).
// Seqs: the kernel's sequence policy (sequence.cuh); only OwnSequences has packed queries.
template <typename T, int kIndex, typename Seqs>
struct StoreEpilogue {
  static constexpr TileConfig kCfg = kConfigs[kIndex];
  static_assert(!(kCfg.fp8 && Seqs::kOwn), "FP8 rows serve calls without sequences of their own (supports())");
  // Every thread of each storing warpgroup (split_keys: the item's one storing consumer): besides the
  // store, the buffer's slot holds the item's Work, which all of them read. With the storing thread's
  // arrival alone, their reads were ordered before the next load only through the warpgroup's barrier in
  // store, which compute-sanitizer's racecheck does not follow: runs of items without tiles (seqused_k
  // 0), where no K/V stage release orders them either, were reported as WAR hazards on the slot.
  static constexpr uint32_t kQReleases = (kCfg.split_keys ? 1 : kCfg.consumers) * 128;
  int pending = -1;  // the Q buffer of the warpgroup's last store, which TMA may still be reading

  __device__ void first_s_done(const Smem<kIndex>& sm) {
    if (pending >= 0) {
      if (threadIdx.x % 128 == 0) bulk_wait_read();  // the storing thread's bulk group
      mbar_arrive(sm.q_empty(pending));
      pending = -1;
    }
  }

  __device__ void store(const KernelParams& p, const CUtensorMap* to, const Work& w, const Smem<kIndex>& sm,
                        int q_buf, int consumer, int row_lo, int lane, const float (&o)[kCfg.head_dim / 2],
                        const float (&m)[2], float (&l)[2], float o_scale) {
    constexpr int D = kCfg.head_dim;
    // One 64-column block of O: in Q's buffer, block_m rows; in an FP8 row's o_stage, the consumer's 64.
    constexpr int kBlockBytes = (kCfg.fp8 ? 64 : Shape<kIndex>::kBlockM) * 128;
    const int t = threadIdx.x % 128;
    // The warpgroup's 64 rows in each block (split_keys: the item's only 64, whichever consumer stores).
    const int at = kCfg.split_keys ? 0 : consumer;
    const uint32_t rows = kCfg.fp8 ? sm.o_stage(consumer) : sm.q(q_buf) + at * 64 * 128;
    if constexpr (kCfg.fp8) named_sync_warpgroup(kCfg.consumers + 1 + consumer);
    const bool bf16_out = kCfg.fp8 && p.o_dtype == EVOSDPA_DTYPE_BFLOAT16;
    float inv[2];  // 1 / l, times O's scale (FP8: v_descale)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      inv[r] = inverse_row_sum(l[r]) * o_scale;
      store_lse(p, w, row_lo + 8 * r, lane, m[r], l[r]);
    }
    // By stmatrix.x4: 16 columns of the warp's 16 rows per instruction, D / 16 per thread (4-byte stores
    // were D / 4). Matrix j of step c (even) holds 8-column chunk c + (j >> 1) of rows 8 (j & 1) + 0..7,
    // which is each thread's accumulator pair 4 (c + (j >> 1)) + 2 (j & 1). Lane L gives the address of
    // row L % 8 of matrix L / 8: in block c / 8, 16-byte unit ((c + (j >> 1)) % 8) ^ (L % 8), which for
    // even c is (c % 8) ^ u with u = (j >> 1) ^ (L % 8): a per-lane base XOR a constant per step. Each
    // matrix's 8 rows fall in 8 different units (no bank conflict).
    const int mat = lane / 8, i = lane % 8;
    const uint32_t lane_row =
        rows + (16 * (t / 32) + 8 * (mat & 1) + i) * 128 + (static_cast<uint32_t>((mat >> 1) ^ i) << 4);
#pragma unroll
    for (int c = 0; c < D / 8; c += 2) {
      uint32_t v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int e = 4 * (c + (j >> 1)) + 2 * (j & 1);
        const float a = o[e] * inv[j & 1], b = o[e + 1] * inv[j & 1];
        if constexpr (kCfg.fp8)
          v[j] = bf16_out ? pack2<__nv_bfloat16>(a, b) : pack2<__half>(a, b);
        else
          v[j] = pack2<T>(a, b);
      }
      stmatrix_x4((lane_row ^ ((c % 8) << 4)) + (c / 8) * kBlockBytes, v);
    }
    const int row0 = w.q0 + 64 * at;  // the warpgroup's first row in its sequence
    if constexpr (Seqs::kOwn) {
      // Packed queries: the 64 rows of a sequence's last block may run into the next sequence.
      if (p.cu_seqlens_q != nullptr && row0 + 64 > w.len_q) {
        named_sync_warpgroup(kCfg.consumers + 1 + consumer);
        if (row0 < w.len_q) copy_rows_out<T, D, kBlockBytes>(p, w, rows, row0, t);
        named_sync_warpgroup(kCfg.consumers + 1 + consumer);  // every read of the buffer is done
        pending = q_buf;  // released at the next first_s_done, as after a TMA store
        return;
      }
    }
    fence_async_shared();
    named_sync_warpgroup(kCfg.consumers + 1 + consumer);  // ids after the pingpong's 1..consumers
    if (t == 0) {
      for (int b = 0; b < D / 64; ++b)
        tma_store(to, rows + b * kBlockBytes, 64 * b, w.q_start + row0, w.head, q_map_batch<Seqs>(p, w));
      bulk_commit();
    }
    pending = q_buf;
  }
  __device__ void idle() {}
  __device__ void pass() {}  // a split_keys consumer that hands its rows over
  // The stores complete before the CTA's shared memory goes away.
  __device__ void finish() {
    if (threadIdx.x % 128 == 0) bulk_wait();
  }
};

}  // namespace evosdpa::detail::wgmma_sm90
