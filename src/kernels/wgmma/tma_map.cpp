#include "kernels/wgmma/tma_map.hpp"

#include <cudaTypedefs.h>

namespace evosdpa::detail::wgmma_sm90 {
namespace {

// The driver's encoder, found once through the runtime: the library links cudart statically and does
// not link libcuda, so the symbol comes from the loaded driver.
PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &status) !=
            cudaSuccess ||
        status != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace

std::array<cuuint64_t, 3> tma_strides(const TensorGeometry& t, cuuint64_t elem_bytes) {
  // A size-1 dimension's stride is whatever the caller set (torch's for a [2, 1, 1, D] view of a [2, D]
  // tensor is 1; supports() checks only the longer dimensions'), so it is not used. Rows of a mask
  // (seqlen_k elements) need not span a multiple of 16 bytes: rounded up.
  const cuuint64_t row = (static_cast<cuuint64_t>(t.head_dim) * elem_bytes + 15) / 16 * 16;
  const cuuint64_t seq = t.seqlen > 1 ? static_cast<cuuint64_t>(t.seq_stride) * elem_bytes : row;
  const cuuint64_t head = t.heads > 1 ? static_cast<cuuint64_t>(t.head_stride) * elem_bytes
                                      : seq * static_cast<cuuint64_t>(t.seqlen);
  const cuuint64_t batch = t.batch > 1 ? static_cast<cuuint64_t>(t.batch_stride) * elem_bytes
                                       : head * static_cast<cuuint64_t>(t.heads);
  return {seq, head, batch};
}

cudaError_t encode_tensor_map(CUtensorMap& map, const TensorGeometry& t, CUtensorMapDataType dtype, int box_rows,
                              int row_bytes) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  // E4M3 inputs travel as bytes (UINT8): TMA only moves them. FLOAT32: the backward's dQ sums.
  const cuuint64_t kElem = dtype == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1 : dtype == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 ? 4 : 2;
  // Innermost first.
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(t.head_dim), static_cast<cuuint64_t>(t.seqlen),
                              static_cast<cuuint64_t>(t.heads), static_cast<cuuint64_t>(t.batch)};
  const std::array<cuuint64_t, 3> strides = tma_strides(t, kElem);
  if (row_bytes != 128 && row_bytes != 64) return cudaErrorInvalidValue;
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(row_bytes / kElem), static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  // Rows past seqlen read as zeros (OOB_FILL_NONE fills zeros): the tails need no separate path.
  const CUresult r = encode(&map, dtype, 4, const_cast<void*>(t.ptr), dims, strides.data(), box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE,
                            row_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace evosdpa::detail::wgmma_sm90
