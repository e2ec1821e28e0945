// TMA tensor maps for the Hopper family: a [batch, heads, seq, head_dim] tensor with element strides,
// tiled as boxes of `row_bytes` bytes of head-dim columns by `box_rows` sequence rows, swizzled over the
// same span: 128 bytes (one 128B-swizzle atom: 64 fp16/bf16 columns, 128 E4M3 ones as UINT8, 32 float32
// ones) or 64 (E4M3 at head_dim 64, 64B swizzle).
// Encoded on the host per call (no allocation, so the call stays graph-capturable) and passed to the
// kernel as a __grid_constant__ parameter.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>

namespace evosdpa::detail::wgmma_sm90 {

struct TensorGeometry {
  const void* ptr;
  int64_t batch, heads, seqlen, head_dim;
  int64_t batch_stride, head_stride, seq_stride;  // elements; head_dim is contiguous
};

// The byte strides of the seq, head and batch dimensions the map is encoded with (`elem_bytes` per
// element): the tensor's own, except that a dimension of size 1 gets the span of those inside it (its
// stride is never used), so that all are non-zero multiples of 16 bytes whenever those of the dimensions
// longer than 1 are (supports() checks those).
std::array<cuuint64_t, 3> tma_strides(const TensorGeometry& t, cuuint64_t elem_bytes);

// cudaSuccess, or the error that stopped the encoding (cudaErrorInvalidValue when the driver refused
// the map: selection's supports() keeps that from happening for accepted calls).
cudaError_t encode_tensor_map(CUtensorMap& map, const TensorGeometry& t, CUtensorMapDataType dtype, int box_rows,
                              int row_bytes = 128);

}  // namespace evosdpa::detail::wgmma_sm90
