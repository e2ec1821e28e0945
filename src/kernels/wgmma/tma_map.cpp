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

cudaError_t encode_tensor_map(CUtensorMap& map, const TensorGeometry& t, CUtensorMapDataType dtype, int box_rows,
                              int row_bytes) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  // E4M3 inputs travel as bytes (UINT8): TMA only moves them.
  const cuuint64_t kElem = dtype == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1 : 2;
  // Innermost first. A dimension of size 1 is never stepped over; give it the span of the dimensions
  // inside it so that the stride TMA checks (a multiple of 16 bytes) is valid whatever the caller set.
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(t.head_dim), static_cast<cuuint64_t>(t.seqlen),
                              static_cast<cuuint64_t>(t.heads), static_cast<cuuint64_t>(t.batch)};
  const cuuint64_t seq = static_cast<cuuint64_t>(t.seq_stride) * kElem;
  const cuuint64_t head = t.heads > 1 ? static_cast<cuuint64_t>(t.head_stride) * kElem : seq * dims[1];
  const cuuint64_t batch = t.batch > 1 ? static_cast<cuuint64_t>(t.batch_stride) * kElem : head * dims[2];
  const cuuint64_t strides[3] = {t.seqlen > 1 ? seq : 128, head, batch};
  if (row_bytes != 128 && row_bytes != 64) return cudaErrorInvalidValue;
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(row_bytes / kElem), static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  // Rows past seqlen read as zeros (OOB_FILL_NONE fills zeros): the tails need no separate path.
  const CUresult r = encode(&map, dtype, 4, const_cast<void*>(t.ptr), dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE,
                            row_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace evosdpa::detail::wgmma_sm90
