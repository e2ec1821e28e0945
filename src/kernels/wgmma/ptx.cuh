// The Hopper instructions of the wgmma_sm90 family other than the matrix products (wgmma_ops.cuh):
// mbarriers, TMA tile loads and stores, wgmma fences and shared-memory matrix descriptors, named barriers,
// register reallocation, clusters and their distributed shared memory.
// Field values and the hardware check behind them: docs/hopper-notes.md.
#pragma once

#include "kernels/rtc_std.hpp"
#include "kernels/wgmma/cu_tensor_map.hpp"

namespace evosdpa::detail::wgmma_sm90 {

// ---- mbarriers -------------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
// Make the initialised barriers visible to the async (TMA) proxy before any thread uses them.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// One arrival that also announces `bytes` of TMA transactions the phase must wait for.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Wait until the phase of parity `phase` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t phase) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(phase)
      : "memory");
}

// ---- TMA ---------------------------------------------------------------------------------------------
// Fetch a tensor map (a kernel parameter) into the TMA unit's cache ahead of its first use.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// One box of a 4-D [batch, head, seq, dim] tensor map into shared memory (1024-byte aligned for the
// 128-byte swizzle); coordinates innermost first, in elements. Completes `bar`'s transaction count.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int dim, int seq,
                                         int head, int batch) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(dim), "r"(seq), "r"(head), "r"(batch)
      : "memory");
}

// One [rows x 64 columns] box from shared memory (128B-swizzled, 1024-byte aligned) to a 4-D tensor map;
// coordinates past the tensor's end are not written. Completes in this thread's bulk async-group.
__device__ __forceinline__ void tma_store(const CUtensorMap* map, uint32_t src, int dim, int seq, int head,
                                          int batch) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(dim), "r"(seq), "r"(head), "r"(batch)
      : "memory");
}
// Adds a [rows x 128 bytes] box of float32 in shared memory (128B-swizzled, 1024-byte aligned) to a 4-D
// float32 tensor map's elements at L2; coordinates past the tensor's end are skipped. Completes in this
// thread's bulk async-group.
__device__ __forceinline__ void tma_reduce_add(const CUtensorMap* map, uint32_t src, int dim, int seq, int head,
                                               int batch) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(dim), "r"(seq), "r"(head), "r"(batch)
      : "memory");
}
// Orders this thread's global accesses through the async proxy (TMA) with its generic ones around it.
__device__ __forceinline__ void fence_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Until the thread's bulk stores have read their shared memory (it may be overwritten after).
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// Until they have completed (before the CTA's shared memory goes away).
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Shared-memory writes of this thread made visible to the async proxy (a following TMA store).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void st_shared(uint32_t addr, uint32_t value) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(value) : "memory");
}
__device__ __forceinline__ void st_shared_zero16(uint32_t addr) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" ::"r"(addr), "r"(0u) : "memory");
}
__device__ __forceinline__ void st_shared_v2(uint32_t addr, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(a), "f"(b) : "memory");
}

// ---- wgmma -------------------------------------------------------------------------------------------
// Before a wgmma reads registers (accumulators, A fragments) that ordinary instructions wrote.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Shared-memory matrix descriptor for a swizzled tile: rows of `row_bytes` (128: 128B swizzle, layout
// type 1; 64: 64B swizzle, type 2), 8-row groups SBO bytes apart, 64-column blocks LBO bytes apart (used
// by N-major operands only).
__device__ __forceinline__ uint64_t matrix_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, int row_bytes = 128) {
  const uint64_t layout = row_bytes == 128 ? 1 : 2;
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>((lbo & 0x3FFFF) >> 4) << 16) |
         (static_cast<uint64_t>((sbo & 0x3FFFF) >> 4) << 32) | (layout << 62);
}

// The descriptor of the matrix `bytes` (a multiple of 16) further on: the start address is the low 14 bits
// of the first word, and shared-memory addresses (below 2^18) do not carry out of them. One uniform add
// per wgmma instead of rebuilding the descriptor (about 10 uniform instructions each, v8.5).
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

// ---- named barriers ----------------------------------------------------------------------------------
// The consumer warpgroups take turns issuing their GEMMs ("pingpong"): warpgroup c waits on named barrier
// 1 + c, issues, and arrives on its successor's (a ring); while one runs its softmax, the others' GEMMs
// have the tensor cores. Each such barrier joins two warpgroups: the one waiting and the one handing over.
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, 256;" ::"r"(id) : "memory"); }
// One warpgroup alone.
__device__ __forceinline__ void named_sync_warpgroup(int id) {
  asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory");
}
// `threads` threads (a multiple of 128: whole warpgroups).
__device__ __forceinline__ void named_sync_threads(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive_threads(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// The same without .aligned, for a barrier that its threads reach through different instructions: bar.sync
// is barrier.sync.aligned, which requires every thread of the CTA to execute the same instruction, and a
// function inlined at two call sites (e.g. an epilogue's store() after a consumer's tiles or, without any,
// from the early path) is two instructions. synccheck reports that as "Divergent thread(s) in block".
__device__ __forceinline__ void named_sync_threads_unaligned(int id, int threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---- clusters ----------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t cluster_size() {
  uint32_t n;
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Every thread of the cluster's CTAs arrives and waits for the others, warps converged (.aligned).
// Relaxed: no memory ordering, which the release form buys with a GPU-wide fence (MEMBAR.ALL.GPU in the
// SASS); what it orders here is execution (the other CTAs are done with their shared memory, their
// mbarriers are initialised: fence.mbarrier_init before it).
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_sync_relaxed() {
  cluster_arrive_relaxed();
  cluster_wait();
}
// The address of the same shared-memory location in the cluster's CTA `rank`.
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank) {
  uint32_t mapped;
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(addr), "r"(rank));
  return mapped;
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) of this CTA's shared memory into a cluster
// CTA's (dst and bar from cluster_map), completing that many bytes of its mbarrier `bar`'s transactions:
// the receiver waits on it, the sender goes on.
__device__ __forceinline__ void bulk_copy_to_cluster(uint32_t dst, uint32_t src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "r"(src), "r"(bytes), "r"(bar)
               : "memory");
}
__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_shared_u16(uint32_t addr) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ float ld_shared_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ float2 ld_shared_f2(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ float4 ld_shared_v4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint4 ld_shared_u4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
// Four 8 x 8 matrices of 16-bit elements: lanes 8k .. 8k + 7 give the addresses of matrix k's rows (16
// bytes each); register k of lane t receives row t / 4, elements 2 (t % 4) and + 1 of matrix k.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&v)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(addr)
               : "memory");
}
// The same, transposed: register k of lane t receives rows 2 (t % 4) and + 1 (in its low and high half)
// of matrix k's column t / 4.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&v)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(addr)
               : "memory");
}
// stmatrix_x4, ldmatrix_x4's inverse: device_math.cuh (the backward of mma_sm80 uses it too).
// prmt with a selector in a register (where each lane picks its own byte order).
__device__ __forceinline__ uint32_t byte_perm_r(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// ---- registers ---------------------------------------------------------------------------------------
template <int kRegs>
__device__ __forceinline__ void regs_release() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void regs_claim() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

}  // namespace evosdpa::detail::wgmma_sm90
