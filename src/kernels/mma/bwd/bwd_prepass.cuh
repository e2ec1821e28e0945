// The elementwise passes around mma_sm80's and wgmma_sm90's backward kernels: D = rowsum(dO * O) before
// it (zeroing the float32 dQ sums, only those the kernel does not write where its tiles' first key block
// stores them, and in DETERMINISTIC mode the turn counters), and dQ = scale * sums rounded to the dtype
// after it. D / 8 threads per row, each on one 16-byte chunk (both families require 16-byte rows).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/rtc_std.hpp"

#include "kernels/backward_params.hpp"
#include "kernels/device_math.cuh"
#include "kernels/mma/bwd/bwd_config.hpp"
#include "kernels/mma/bwd/bwd_workspace.hpp"

namespace evosdpa::detail::mma_sm80 {

// The row and 16-byte chunk of this thread; false past the last row.
template <int D>
__device__ __forceinline__ bool prepass_row(const KernelParams& p, int64_t& row, int& chunk, int& b, int& h, int& i) {
  constexpr int kChunks = D / 8;
  row = static_cast<int64_t>(blockIdx.x) * (kPrepassThreads / kChunks) + threadIdx.x / kChunks;
  chunk = threadIdx.x % kChunks;
  if (row >= static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q) return false;
  i = static_cast<int>(row % p.seqlen_q);
  h = static_cast<int>((row / p.seqlen_q) % p.heads_q);
  b = static_cast<int>(row / (static_cast<int64_t>(p.seqlen_q) * p.heads_q));
  return true;
}

template <typename T, int D>
__global__ void __launch_bounds__(kPrepassThreads) bwd_prepass_kernel(const BackwardParams bp, const BwdWorkspace ws) {
  constexpr int kChunks = D / 8;
  const KernelParams& p = bp.fwd;
  int64_t row;
  int chunk, b, h, i;
  // Whole groups of kChunks lanes leave together, so the shuffles below see only live lanes.
  if (!prepass_row<D>(p, row, chunk, b, h, i)) return;
  const uint4 o = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.o) + b * p.o_batch_stride +
                                                  h * p.o_head_stride + i * p.o_seq_stride + chunk * 8);
  const uint4 g = *reinterpret_cast<const uint4*>(static_cast<const T*>(bp.dout) + b * bp.dout_batch_stride +
                                                  h * bp.dout_head_stride + i * bp.dout_seq_stride + chunk * 8);
  const uint32_t ow[4] = {o.x, o.y, o.z, o.w}, gw[4] = {g.x, g.y, g.z, g.w};
  float sum = 0.f;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const float2 a = unpack2<T>(ow[w]), c = unpack2<T>(gw[w]);
    sum += a.x * c.x + a.y * c.y;
  }
  const unsigned group = (kChunks == 32 ? 0xffffffffu : ((1u << kChunks) - 1u) << (threadIdx.x % 32 / kChunks * kChunks));
#pragma unroll
  for (int off = kChunks / 2; off > 0; off /= 2) sum += __shfl_xor_sync(group, sum, off);
  if (chunk == 0) ws.delta[row] = sum;
  // With first_block_stores, a tile's sums are written by the kernel unless no key block sees the tile
  // (its last row sees no key).
  if (!ws.first_block_stores || p.seqlen_k == 0 ||
      (p.causal && (i / ws.turn_rows + 1) * ws.turn_rows - 1 + p.causal_offset < 0)) {
    float4* acc = reinterpret_cast<float4*>(ws.dq_accum + row * D + chunk * 8);
    acc[0] = acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  if (ws.dq_turn != nullptr && chunk == 0 && i % ws.turn_rows == 0)
    ws.dq_turn[(static_cast<int64_t>(b) * p.heads_q + h) * ((p.seqlen_q + ws.turn_rows - 1) / ws.turn_rows) +
               i / ws.turn_rows] = 0;
}

// dQ = scale * the float32 sums, rounded to T once.
template <typename T, int D>
__global__ void __launch_bounds__(kPrepassThreads) bwd_dq_convert_kernel(const BackwardParams bp, const BwdWorkspace ws) {
  const KernelParams& p = bp.fwd;
  int64_t row;
  int chunk, b, h, i;
  if (!prepass_row<D>(p, row, chunk, b, h, i)) return;
  const float4* acc = reinterpret_cast<const float4*>(ws.dq_accum + row * D + chunk * 8);
  const float4 lo = acc[0], hi = acc[1];
  const float s = p.scale;
  const uint4 out = {pack2<T>(lo.x * s, lo.y * s), pack2<T>(lo.z * s, lo.w * s), pack2<T>(hi.x * s, hi.y * s),
                     pack2<T>(hi.z * s, hi.w * s)};
  *reinterpret_cast<uint4*>(static_cast<T*>(bp.dq) + b * bp.dq_batch_stride + h * bp.dq_head_stride +
                            i * bp.dq_seq_stride + chunk * 8) = out;
}

// Blocks of the two passes over the call's query rows (0: none to launch).
template <int D>
int64_t prepass_blocks(const KernelParams& p) {
  constexpr int kRowsPerBlock = kPrepassThreads / (D / 8);
  return (static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q + kRowsPerBlock - 1) / kRowsPerBlock;
}

template <typename T, int D>
void launch_prepass(const BackwardParams& bp, const BwdWorkspace& ws, cudaStream_t stream) {
  if (const int64_t blocks = prepass_blocks<D>(bp.fwd); blocks > 0)
    bwd_prepass_kernel<T, D><<<static_cast<unsigned>(blocks), kPrepassThreads, 0, stream>>>(bp, ws);
}

template <typename T, int D>
void launch_dq_convert(const BackwardParams& bp, const BwdWorkspace& ws, cudaStream_t stream) {
  if (const int64_t blocks = prepass_blocks<D>(bp.fwd); blocks > 0)
    bwd_dq_convert_kernel<T, D><<<static_cast<unsigned>(blocks), kPrepassThreads, 0, stream>>>(bp, ws);
}

}  // namespace evosdpa::detail::mma_sm80
