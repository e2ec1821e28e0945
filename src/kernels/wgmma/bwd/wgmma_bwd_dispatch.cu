// Chooses the (dtype, tile row) instantiation of wgmma_sm90's backward.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/dtype_dispatch.cuh"
#include "kernels/wgmma/bwd/wgmma_bwd_config.hpp"
#include "kernels/wgmma/bwd/wgmma_bwd_dispatch.hpp"

namespace evosdpa::detail::wgmma_sm90 {

template <typename T, int kIndex>
cudaError_t launch_backward(const BackwardParams& bp, cudaStream_t stream);

static_assert(kBwdTileCount == 2, "one instantiation file per dtype and row in bwd/inst/, one case per row below");

// Compiled in bwd/inst/, one per file.
extern template cudaError_t launch_backward<__half, 0>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__half, 1>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__nv_bfloat16, 0>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__nv_bfloat16, 1>(const BackwardParams&, cudaStream_t);

cudaError_t launch_backward_variant(const BackwardParams& bp, evosdpa_dtype_t dtype, int variant, cudaStream_t stream) {
  return with_element_type(dtype, [&](auto t) {
    using T = decltype(t);
    switch (variant) {
      case 0: return launch_backward<T, 0>(bp, stream);
      case 1: return launch_backward<T, 1>(bp, stream);
      default: return cudaErrorInvalidValue;
    }
  });
}

}  // namespace evosdpa::detail::wgmma_sm90
