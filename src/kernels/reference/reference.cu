// The reference GPU kernel: one warp per query row, fp32 arithmetic, the textbook two-pass softmax.
// Slow and plain on purpose: it is the baseline the fast kernels are checked against on the GPU, and it
// accepts any 2-byte-aligned pointers and strides.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/launchers.hpp"

namespace evosdpa::detail {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxHeadDim = 256;
constexpr int kMaxPerLane = kMaxHeadDim / 32;

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// Lane `lane` holds dims lane, lane + 32, ... of the query row.
template <typename T>
__device__ float score(const float (&q)[kMaxPerLane], const T* k_row, int head_dim, int lane) {
  float acc = 0.f;
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < head_dim) acc += q[t] * to_float(k_row[d]);
  }
  return warp_sum(acc);
}

template <typename T>
__global__ void reference_kernel(const KernelParams p, int head_dim) {
  const int lane = threadIdx.x % 32;
  const long long row_id = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row_id >= static_cast<long long>(p.batch) * p.heads_q * p.seqlen_q) return;
  const int i = static_cast<int>(row_id % p.seqlen_q);
  const int h = static_cast<int>((row_id / p.seqlen_q) % p.heads_q);
  const int b = static_cast<int>(row_id / (static_cast<long long>(p.seqlen_q) * p.heads_q));
  const int h_kv = h / p.kv_group;

  const T* q_row = static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride + i * p.q_seq_stride;
  const T* k_head = static_cast<const T*>(p.k) + b * p.k_batch_stride + h_kv * p.k_head_stride;
  const T* v_head = static_cast<const T*>(p.v) + b * p.v_batch_stride + h_kv * p.v_head_stride;
  T* o_row = static_cast<T*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride + i * p.o_seq_stride;

  int kv_end = p.seqlen_k;
  if (p.causal) kv_end = max(0, min(kv_end, i + p.causal_offset + 1));

  float q[kMaxPerLane];
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    q[t] = d < head_dim ? to_float(q_row[d]) : 0.f;
  }

  float row_max = -INFINITY;
  for (int j = 0; j < kv_end; ++j)
    row_max = fmaxf(row_max, p.scale * score(q, k_head + j * p.k_seq_stride, head_dim, lane));

  float sum = 0.f;
  float acc[kMaxPerLane] = {};
  for (int j = 0; j < kv_end; ++j) {
    const float w = expf(p.scale * score(q, k_head + j * p.k_seq_stride, head_dim, lane) - row_max);
    sum += w;
    const T* v_row = v_head + j * p.v_seq_stride;
#pragma unroll
    for (int t = 0; t < kMaxPerLane; ++t) {
      const int d = lane + 32 * t;
      if (d < head_dim) acc[t] += w * to_float(v_row[d]);
    }
  }

  const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < head_dim) o_row[d] = from_float<T>(acc[t] * inv);
  }
  if (p.lse != nullptr && lane == 0) p.lse[row_id] = sum > 0.f ? row_max + logf(sum) : -INFINITY;
}

template <typename T>
cudaError_t launch(const KernelParams& p, int head_dim, cudaStream_t stream) {
  const long long rows = static_cast<long long>(p.batch) * p.heads_q * p.seqlen_q;
  const long long blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  reference_kernel<T><<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream>>>(p, head_dim);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_reference(const KernelParams& p, evosdpa_dtype_t dtype, int head_dim,
                             cudaStream_t stream) {
  if (head_dim > kMaxHeadDim) return cudaErrorInvalidValue;
  switch (dtype) {
    case EVOSDPA_DTYPE_FLOAT16: return launch<__half>(p, head_dim, stream);
    case EVOSDPA_DTYPE_BFLOAT16: return launch<__nv_bfloat16>(p, head_dim, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace evosdpa::detail
