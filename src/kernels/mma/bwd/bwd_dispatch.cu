// Chooses the (dtype, config row) instantiation of mma_sm80's backward.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/dtype_dispatch.cuh"
#include "kernels/mma/bwd/bwd_config.hpp"
#include "kernels/mma/bwd/bwd_dispatch.hpp"

namespace evosdpa::detail::mma_sm80 {

// Compiled in inst/, one per file.
extern template cudaError_t launch_backward<__half, bwd_config_index(64)>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__half, bwd_config_index(128)>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__nv_bfloat16, bwd_config_index(64)>(const BackwardParams&, cudaStream_t);
extern template cudaError_t launch_backward<__nv_bfloat16, bwd_config_index(128)>(const BackwardParams&, cudaStream_t);

cudaError_t launch_backward_variant(const BackwardParams& bp, evosdpa_dtype_t dtype, int variant, cudaStream_t stream) {
  return with_element_type(dtype, [&](auto t) {
    using T = decltype(t);
    switch (variant) {
      case bwd_config_index(64): return launch_backward<T, bwd_config_index(64)>(bp, stream);
      case bwd_config_index(128): return launch_backward<T, bwd_config_index(128)>(bp, stream);
      default: return cudaErrorInvalidValue;
    }
  });
}

}  // namespace evosdpa::detail::mma_sm80
