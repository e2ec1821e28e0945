// TMA tensor maps for the Hopper family: a [batch, heads, seq, head_dim] tensor with element strides,
// tiled as boxes of `row_bytes` bytes of head-dim columns by `box_rows` sequence rows, swizzled over the
// same span: 128 bytes (one 128B-swizzle atom: 64 fp16/bf16 columns, 128 E4M3 ones as UINT8) or 64
// (E4M3 at head_dim 64, 64B swizzle).
// Encoded on the host per call (no allocation, so the call stays graph-capturable) and passed to the
// kernel as a __grid_constant__ parameter.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace evosdpa::detail::wgmma_sm90 {

struct TensorGeometry {
  const void* ptr;
  int64_t batch, heads, seqlen, head_dim;
  int64_t batch_stride, head_stride, seq_stride;  // elements; head_dim is contiguous
};

// cudaSuccess, or the error that stopped the encoding (cudaErrorInvalidValue when the driver refused
// the map: selection's supports() keeps that from happening for accepted calls).
cudaError_t encode_tensor_map(CUtensorMap& map, const TensorGeometry& t, CUtensorMapDataType dtype, int box_rows,
                              int row_bytes = 128);

}  // namespace evosdpa::detail::wgmma_sm90
