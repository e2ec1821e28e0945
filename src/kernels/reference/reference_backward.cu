// The reference backward pass: one warp per query row for D = rowsum(dO * O) and dQ, one warp per key
// row for dK and dV, fp32 arithmetic, the textbook formulas:
//   P = exp(scale Q K^T - lse),  dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),
//   dQ = scale dS K,  dK = scale dS^T Q.
// Slow and plain on purpose, like the forward reference: the baseline on the GPU, for any element-aligned
// pointers and strides. Every gradient element is summed by one warp in a fixed order, so it is
// deterministic in both modes; it needs D (one float per query row) as workspace.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/dtype_dispatch.cuh"
#include "kernels/family.hpp"
#include "kernels/reference/reference_math.cuh"
#include "validation.hpp"

namespace evosdpa::detail {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxHeadDim = 128;  // head dims the library takes (validation.cpp)
constexpr int kPerLane = kMaxHeadDim / 32;
constexpr long long kMaxGridX = INT32_MAX;

using reference::from_float;
using reference::to_float;
using reference::warp_sum;

// Lane `lane` holds dims lane, lane + 32, ... of a row.
template <typename T>
__device__ __forceinline__ void load_row(float (&r)[kPerLane], const T* row, int head_dim, int lane) {
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int d = lane + 32 * t;
    r[t] = d < head_dim ? to_float(row[d]) : 0.f;
  }
}

template <typename T>
__device__ __forceinline__ float dot(const float (&a)[kPerLane], const T* row, int head_dim, int lane) {
  float acc = 0.f;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < head_dim) acc += a[t] * to_float(row[d]);
  }
  return warp_sum(acc);
}

template <typename T>
__device__ __forceinline__ void store_row(T* row, const float (&r)[kPerLane], float scale, int head_dim, int lane) {
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < head_dim) row[d] = from_float<T>(r[t] * scale);
  }
}

struct QueryRow {
  int b, h, i;
  long long id;  // (b * heads_q + h) * seqlen_q + i: the lse and D index
};

__device__ __forceinline__ bool query_row(const KernelParams& p, QueryRow& r) {
  r.id = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (r.id >= static_cast<long long>(p.batch) * p.heads_q * p.seqlen_q) return false;
  r.i = static_cast<int>(r.id % p.seqlen_q);
  r.h = static_cast<int>((r.id / p.seqlen_q) % p.heads_q);
  r.b = static_cast<int>(r.id / (static_cast<long long>(p.seqlen_q) * p.heads_q));
  return true;
}

// D[row] = dO[row] . O[row].
template <typename T>
__global__ void reference_delta_kernel(const BackwardParams bp) {
  const KernelParams& p = bp.fwd;
  QueryRow r;
  if (!query_row(p, r)) return;
  const int lane = threadIdx.x % 32;
  const T* o = static_cast<const T*>(p.o) + r.b * p.o_batch_stride + r.h * p.o_head_stride + r.i * p.o_seq_stride;
  const T* dout = static_cast<const T*>(bp.dout) + r.b * bp.dout_batch_stride + r.h * bp.dout_head_stride +
                  r.i * bp.dout_seq_stride;
  float o_row[kPerLane];
  load_row(o_row, o, p.head_dim, lane);
  const float d = dot(o_row, dout, p.head_dim, lane);
  if (lane == 0) static_cast<float*>(bp.workspace)[r.id] = d;
}

// dQ of one query row: the sum over its visible keys of dS_ij K_j, times the scale. A row with no
// visible key (lse = -inf) gets 0.
template <typename T>
__global__ void reference_dq_kernel(const BackwardParams bp) {
  const KernelParams& p = bp.fwd;
  QueryRow r;
  if (!query_row(p, r)) return;
  const int lane = threadIdx.x % 32;
  const int h_kv = r.h / p.kv_group;
  const T* q = static_cast<const T*>(p.q) + r.b * p.q_batch_stride + r.h * p.q_head_stride + r.i * p.q_seq_stride;
  const T* dout = static_cast<const T*>(bp.dout) + r.b * bp.dout_batch_stride + r.h * bp.dout_head_stride +
                  r.i * bp.dout_seq_stride;
  const T* k_head = static_cast<const T*>(p.k) + r.b * p.k_batch_stride + h_kv * p.k_head_stride;
  const T* v_head = static_cast<const T*>(p.v) + r.b * p.v_batch_stride + h_kv * p.v_head_stride;
  const float lse = p.lse[r.id];
  const float delta = static_cast<const float*>(bp.workspace)[r.id];
  int kv_end = p.seqlen_k;
  if (p.causal) kv_end = max(0, min(kv_end, r.i + p.causal_offset + 1));

  float q_row[kPerLane], do_row[kPerLane], dq[kPerLane] = {};
  load_row(q_row, q, p.head_dim, lane);
  load_row(do_row, dout, p.head_dim, lane);
  for (int j = 0; j < kv_end; ++j) {
    const T* k_row = k_head + j * p.k_seq_stride;
    const float prob = expf(p.scale * dot(q_row, k_row, p.head_dim, lane) - lse);
    const float ds = prob * (dot(do_row, v_head + j * p.v_seq_stride, p.head_dim, lane) - delta);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int d = lane + 32 * t;
      if (d < p.head_dim) dq[t] += ds * to_float(k_row[d]);
    }
  }
  store_row(static_cast<T*>(bp.dq) + r.b * bp.dq_batch_stride + r.h * bp.dq_head_stride + r.i * bp.dq_seq_stride, dq,
            p.scale, p.head_dim, lane);
}

// dK and dV of one key row: sums over every query head of its group and every query that sees it.
template <typename T>
__global__ void reference_dkdv_kernel(const BackwardParams bp) {
  const KernelParams& p = bp.fwd;
  const long long id = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (id >= static_cast<long long>(p.batch) * bp.heads_kv * p.seqlen_k) return;
  const int lane = threadIdx.x % 32;
  const int j = static_cast<int>(id % p.seqlen_k);
  const int h_kv = static_cast<int>((id / p.seqlen_k) % bp.heads_kv);
  const int b = static_cast<int>(id / (static_cast<long long>(p.seqlen_k) * bp.heads_kv));
  float k_row[kPerLane], v_row[kPerLane], dk[kPerLane] = {}, dv[kPerLane] = {};
  load_row(k_row, static_cast<const T*>(p.k) + b * p.k_batch_stride + h_kv * p.k_head_stride + j * p.k_seq_stride,
           p.head_dim, lane);
  load_row(v_row, static_cast<const T*>(p.v) + b * p.v_batch_stride + h_kv * p.v_head_stride + j * p.v_seq_stride,
           p.head_dim, lane);
  // Query i sees key j when j <= i + causal_offset.
  const int i_begin = p.causal ? max(0, j - p.causal_offset) : 0;
  for (int h = h_kv * p.kv_group; h < (h_kv + 1) * p.kv_group; ++h) {
    const long long row0 = (static_cast<long long>(b) * p.heads_q + h) * p.seqlen_q;
    const T* q_head = static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
    const T* do_head = static_cast<const T*>(bp.dout) + b * bp.dout_batch_stride + h * bp.dout_head_stride;
    for (int i = i_begin; i < p.seqlen_q; ++i) {
      const T* q_row = q_head + i * p.q_seq_stride;
      const T* do_row = do_head + i * bp.dout_seq_stride;
      const float prob = expf(p.scale * dot(k_row, q_row, p.head_dim, lane) - p.lse[row0 + i]);
      const float ds = prob * (dot(v_row, do_row, p.head_dim, lane) - static_cast<const float*>(bp.workspace)[row0 + i]);
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        const int d = lane + 32 * t;
        if (d < p.head_dim) {
          dv[t] += prob * to_float(do_row[d]);
          dk[t] += ds * to_float(q_row[d]);
        }
      }
    }
  }
  store_row(static_cast<T*>(bp.dk) + b * bp.dk_batch_stride + h_kv * bp.dk_head_stride + j * bp.dk_seq_stride, dk,
            p.scale, p.head_dim, lane);
  store_row(static_cast<T*>(bp.dv) + b * bp.dv_batch_stride + h_kv * bp.dv_head_stride + j * bp.dv_seq_stride, dv,
            1.f, p.head_dim, lane);
}

unsigned blocks_for(long long rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

template <typename T>
cudaError_t launch(const BackwardParams& bp, cudaStream_t stream) {
  const KernelParams& p = bp.fwd;
  const long long q_rows = static_cast<long long>(p.batch) * p.heads_q * p.seqlen_q;
  const long long k_rows = static_cast<long long>(p.batch) * bp.heads_kv * p.seqlen_k;
  if (q_rows > 0) {
    reference_delta_kernel<T><<<blocks_for(q_rows), kWarpsPerBlock * 32, 0, stream>>>(bp);
    reference_dq_kernel<T><<<blocks_for(q_rows), kWarpsPerBlock * 32, 0, stream>>>(bp);
  }
  if (k_rows > 0) reference_dkdv_kernel<T><<<blocks_for(k_rows), kWarpsPerBlock * 32, 0, stream>>>(bp);
  return cudaGetLastError();
}

FamilySupport supports(const evosdpa_params_t& p, const DeviceInfo&) {
  const __int128 q_rows = static_cast<__int128>(p.batch) * p.heads_q * p.seqlen_q;
  const __int128 k_rows = static_cast<__int128>(p.batch) * p.heads_kv * p.seqlen_k;
  if ((q_rows > k_rows ? q_rows : k_rows) > kMaxGridX * kWarpsPerBlock)
    return {fail(EVOSDPA_ERROR_NOT_SUPPORTED, "reference: batch * heads * seqlen exceeds " +
                                                  std::to_string(kMaxGridX * kWarpsPerBlock) + " rows")};
  return {};
}

// D, one float per query row.
size_t workspace_bytes(const evosdpa_params_t& p, int /*variant: one only*/) {
  const size_t bytes = static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q) * sizeof(float);
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

cudaError_t launch_dtype(const BackwardParams& bp, evosdpa_dtype_t dtype, int /*variant*/, cudaStream_t stream) {
  return with_element_type(dtype, [&](auto t) { return launch<decltype(t)>(bp, stream); });
}

}  // namespace

extern const BackwardEntry kReferenceBackward = {supports, workspace_bytes, launch_dtype};

}  // namespace evosdpa::detail
