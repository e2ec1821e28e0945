// The reference GPU kernel: one warp per query row, fp32 arithmetic, the textbook two-pass softmax.
// Slow and plain on purpose: it is the baseline the fast kernels are checked against on the GPU, and it
// accepts any element-aligned pointers and strides. FP8 (E4M3) inputs are dequantised element by element
// as they are read (x * descale) and nothing else changes. Its KernelFamily (supports, launch, image
// probe) is at the end.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/dtype_dispatch.cuh"
#include "kernels/family.hpp"
#include "kernels/reference/reference_math.cuh"
#include "kernels/sequence.cuh"

#ifndef EVOSDPA_CUDA_ARCHS
#error "EVOSDPA_CUDA_ARCHS (the CUDA targets this family's kernels are compiled for) is set by src/sources.cmake"
#endif

namespace evosdpa::detail {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxHeadDim = 256;
constexpr int kMaxPerLane = kMaxHeadDim / 32;
constexpr long long kMaxGridX = INT32_MAX;

// The kernel keeps token indices in ints: i + causal_offset + 1 (the causal key bound, with i < len_q
// and causal_offset = len_k - len_q or 0) stays within EVOSDPA_MAX_SEQLEN + 1.
static_assert(EVOSDPA_MAX_SEQLEN + 1 <= INT32_MAX, "EVOSDPA_MAX_SEQLEN overflows the reference kernel's int indices");

using reference::from_float;
using reference::to_float;
using reference::warp_sum;

// Lane `lane` holds dims lane, lane + 32, ... of the query row; k_descale is 1 for 16-bit inputs.
template <typename T>
__device__ float score(const float (&q)[kMaxPerLane], const T* k_row, float k_descale, int head_dim, int lane) {
  float acc = 0.f;
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < head_dim) acc += q[t] * (to_float(k_row[d]) * k_descale);
  }
  return warp_sum(acc);
}

// T: the inputs' element type; TO: O's (T itself for 16-bit inputs).
template <typename T, typename TO>
__global__ void reference_kernel(const KernelParams p) {
  const int head_dim = p.head_dim;
  const int lane = threadIdx.x % 32;
  const long long row_id = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row_id >= static_cast<long long>(p.batch) * p.heads_q * p.seqlen_q) return;
  const int i = static_cast<int>(row_id % p.seqlen_q);
  const int h = static_cast<int>((row_id / p.seqlen_q) % p.heads_q);
  const int b = static_cast<int>(row_id / (static_cast<long long>(p.seqlen_q) * p.heads_q));
  const int h_kv = h / p.kv_group;
  // The sequence's own rows (packed or padded), keys and diagonal; rows past its end are padding.
  const Sequence seq = sequence_of(p, b);
  if (i >= seq.len_q) return;
  const int64_t q_at = seq.q_start + i;

  const T* q_row = static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride + q_at * p.q_seq_stride;
  const T* k_head = static_cast<const T*>(p.k) + h_kv * p.k_head_stride;
  const T* v_head = static_cast<const T*>(p.v) + h_kv * p.v_head_stride;
  TO* o_row = static_cast<TO*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride + q_at * p.o_seq_stride;
  float q_descale = 1.f, k_descale = 1.f, v_descale = 1.f;
  if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) {
    const int64_t at = b * p.descale_batch_stride + h_kv * p.descale_head_stride;
    q_descale = p.q_descale[at];
    k_descale = p.k_descale[at];
    v_descale = p.v_descale[at];
  }

  // The keys the row sees: kv_begin .. kv_end - 1 (masks, evosdpa.h). Window bounds are at most 2^30
  // (kNoWindowBound), so i + causal_offset +- a bound stays within int.
  int kv_begin = 0, kv_end = seq.len_k;
  if (p.causal) kv_end = max(0, min(kv_end, i + seq.causal_offset + 1));
  if (p.sliding_window) {
    kv_begin = max(0, i + seq.causal_offset - p.window_left);
    kv_end = max(kv_begin, min(kv_end, i + seq.causal_offset + p.window_right + 1));
  }
  // Key j's row in K (in V at v's strides): the sequence's, or its page's; a page index outside
  // [0, num_pages) masks its keys.
  const auto key_offset = [&](int j, int64_t batch_stride, int64_t seq_stride) -> int64_t {
    if (p.page_table == nullptr) return b * batch_stride + (seq.k_start + static_cast<int64_t>(j)) * seq_stride;
    const int page = p.page_table[b * p.page_table_batch_stride + j / p.page_size];
    if (page < 0 || page >= p.num_pages) return -1;
    return page * batch_stride + static_cast<int64_t>(j % p.page_size) * seq_stride;
  };

  float q[kMaxPerLane];
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    q[t] = d < head_dim ? to_float(q_row[d]) * q_descale : 0.f;
  }

  // The mask tensor's row (validation: padded batches only, so key j is column j).
  const char* mask_row = static_cast<const char*>(p.mask);
  if (mask_row != nullptr)
    mask_row += (b * p.mask_batch_stride + h * p.mask_head_stride + i * p.mask_seq_stride) *
                (p.mask_type == EVOSDPA_MASK_BOOL ? 1 : static_cast<int64_t>(sizeof(T)));
  // ALiBi's slope for the row's head (0 without: no bias).
  const float alibi_slope = p.alibi_slopes != nullptr ? p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.f;
  // The scaled score of key j, softcapped (tanhf: exact to a few ulp, as the reference should be), ALiBi's
  // bias added, then masked or biased by the mask tensor.
  const auto scaled = [&](int64_t k_off, int j) {
    const float x = p.scale * score(q, k_head + k_off, k_descale, head_dim, lane);
    float capped = p.softcap > 0.f ? p.softcap * tanhf(x / p.softcap) : x;
    if (p.alibi_slopes != nullptr)
      capped -= alibi_slope * static_cast<float>(llabs(static_cast<long long>(i) + seq.causal_offset - j));
    if (p.mask_type == EVOSDPA_MASK_BOOL) return mask_row[j] != 0 ? capped : -INFINITY;
    if constexpr (!std::is_same_v<T, __nv_fp8_e4m3>)  // validation: no mask with FP8 inputs
      if (p.mask_type == EVOSDPA_MASK_ADDITIVE) return capped + to_float(reinterpret_cast<const T*>(mask_row)[j]);
    return capped;
  };
  float row_max = -INFINITY;
  for (int j = kv_begin; j < kv_end; ++j) {
    const int64_t k_off = key_offset(j, p.k_batch_stride, p.k_seq_stride);
    if (k_off >= 0) row_max = fmaxf(row_max, scaled(k_off, j));
  }

  float sum = 0.f;
  float acc[kMaxPerLane] = {};
  for (int j = kv_begin; j < kv_end && row_max != -INFINITY; ++j) {  // every score -inf: no weights, O = 0
    const int64_t k_off = key_offset(j, p.k_batch_stride, p.k_seq_stride);
    if (k_off < 0) continue;
    const float w = expf(scaled(k_off, j) - row_max);
    sum += w;
    const T* v_row = v_head + key_offset(j, p.v_batch_stride, p.v_seq_stride);
#pragma unroll
    for (int t = 0; t < kMaxPerLane; ++t) {
      const int d = lane + 32 * t;
      if (d < head_dim) acc[t] += w * (to_float(v_row[d]) * v_descale);
    }
  }

  const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < head_dim) o_row[d] = from_float<TO>(acc[t] * inv);
  }
  if (p.lse != nullptr && lane == 0)
    p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + q_at] = sum > 0.f ? row_max + logf(sum) : -INFINITY;
}

template <typename T, typename TO>
cudaError_t launch(const KernelParams& p, cudaStream_t stream) {
  const long long rows = static_cast<long long>(p.batch) * p.heads_q * p.seqlen_q;
  const long long blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  reference_kernel<T, TO><<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

FamilySupport supports(const evosdpa_params_t& p, const DeviceInfo& dev) {
  const auto refuse = [](std::string message) {
    return FamilySupport{fail(EVOSDPA_ERROR_NOT_SUPPORTED, "reference: " + std::move(message))};
  };
  // Instantiated for fp16, bf16 and FP8 inputs (launch_dtype below).
  if (p.dtype != EVOSDPA_DTYPE_FLOAT16 && p.dtype != EVOSDPA_DTYPE_BFLOAT16 && p.dtype != EVOSDPA_DTYPE_FLOAT8_E4M3)
    return refuse("dtype " + std::to_string(static_cast<int>(p.dtype)) + " is not fp16, bf16 or fp8_e4m3");
  // The library offers FP8 where the GPU has FP8 tensor cores, so that "auto" never answers an FP8 call
  // with this slow kernel on a device no fast FP8 kernel can serve.
  if (p.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 && dev.cc_major * 10 + dev.cc_minor < 89)
    return refuse("FP8 (E4M3) inputs need compute capability 8.9 or newer (FP8 tensor cores); device " +
                  std::to_string(dev.ordinal) + " is sm_" + std::to_string(dev.cc_major * 10 + dev.cc_minor));
  if (p.head_dim > kMaxHeadDim) return refuse("head_dim above " + std::to_string(kMaxHeadDim));
  if (const Check c = check_no_splits(p); !c.ok()) return refuse(c.message);
  // Every factor is below 2^31, but their product can pass 2^63.
  const __int128 rows = static_cast<__int128>(p.batch) * p.heads_q * p.seqlen_q;
  if ((rows + kWarpsPerBlock - 1) / kWarpsPerBlock > kMaxGridX)
    return refuse("batch * heads_q * seqlen_q exceeds " + std::to_string(kMaxGridX * kWarpsPerBlock) + " rows");
  return {};
}

cudaError_t launch_dtype(const KernelParams& p, evosdpa_dtype_t dtype, int /*variant: one only*/, cudaStream_t stream) {
  if (dtype == EVOSDPA_DTYPE_FLOAT8_E4M3)
    return with_element_type(p.o_dtype, [&](auto t) { return launch<__nv_fp8_e4m3, decltype(t)>(p, stream); });
  return with_element_type(dtype, [&](auto t) { return launch<decltype(t), decltype(t)>(p, stream); });
}

cudaError_t probe_image() {
  cudaFuncAttributes attr;
  return probe_answer(cudaFuncGetAttributes(&attr, reference_kernel<__half, __half>));
}

}  // namespace

extern const BackwardEntry kReferenceBackward;  // reference_backward.cu

extern const KernelFamily kReferenceFamily = {"reference", EVOSDPA_CUDA_ARCHS, supports,         launch_dtype,
                                             probe_image, nullptr,           &kReferenceBackward};

}  // namespace evosdpa::detail
