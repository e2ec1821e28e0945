// Chooses the (dtype, config row) instantiation of mma_sm80's backward.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/dtype_dispatch.cuh"
#include "kernels/mma/bwd/bwd_config.hpp"
#include "kernels/mma/bwd/bwd_dispatch.hpp"

namespace evosdpa::detail::mma_sm80 {

static_assert(kBwdConfigCount == 4, "one instantiation file per dtype and row in inst/, one case per row below");

// Compiled in inst/, one per file.
extern template cudaError_t launch_backward<__half, 0>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__half, 1>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__half, 2>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__half, 3>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__nv_bfloat16, 0>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__nv_bfloat16, 1>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__nv_bfloat16, 2>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__nv_bfloat16, 3>(const BackwardParams&, cudaStream_t);

cudaError_t launch_backward_variant(const BackwardParams& bp, evosdpa_dtype_t dtype, int variant, cudaStream_t stream) {
  return with_element_type(dtype, [&](auto t) {
    using T = decltype(t);
    switch (variant) {
      case 0: return launch_backward<T, 0>(bp, stream);
      case 1: return launch_backward<T, 1>(bp, stream);
      case 2: return launch_backward<T, 2>(bp, stream);
      case 3: return launch_backward<T, 3>(bp, stream);
      default: return cudaErrorInvalidValue;
    }
  });
}

}  // namespace evosdpa::detail::mma_sm80
