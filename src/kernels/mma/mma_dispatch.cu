// Chooses the (dtype, tile-table row) instantiation of the sm_80 tensor-core kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/dtype_dispatch.cuh"
#include "kernels/mma/mma_dispatch.hpp"
#include "kernels/mma/mma_instances.hpp"

namespace evosdpa::detail::mma_sm80 {

// Compiled in inst/, one per file.
extern template struct HeadDimRows<__half, 64>;
extern template struct HeadDimRows<__half, 128>;
extern template struct HeadDimRows<__nv_bfloat16, 64>;
extern template struct HeadDimRows<__nv_bfloat16, 128>;

cudaError_t launch_variant(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream) {
  if (variant < 0 || variant >= kConfigCount) return cudaErrorInvalidValue;
  return with_element_type(dtype, [&](auto t) {
    using T = decltype(t);
    switch (kConfigs[variant].head_dim) {
      case 64: return HeadDimRows<T, 64>::launch_row(variant, p, stream);
      case 128: return HeadDimRows<T, 128>::launch_row(variant, p, stream);
      default: return cudaErrorInvalidValue;
    }
  });
}

cudaError_t probe_image() {
  cudaFuncAttributes attr;
  return probe_answer(kernel_attributes<__half, config_index(64, false)>(&attr));
}

}  // namespace evosdpa::detail::mma_sm80
