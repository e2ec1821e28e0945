// Chooses the (output type, tile-table row) instantiation of the FP8 kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/dtype_dispatch.cuh"
#include "kernels/mma_fp8/mma_fp8_dispatch.hpp"
#include "kernels/mma_fp8/mma_fp8_instances.hpp"

namespace evosdpa::detail::mma_fp8 {

cudaError_t launch_variant(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream) {
  if (dtype != EVOSDPA_DTYPE_FLOAT8_E4M3) return cudaErrorInvalidValue;
  return with_element_type(p.o_dtype, [&](auto t) {
    return with_row<kConfigCount>(variant, [&](auto row) { return launch<decltype(t), row()>(p, stream); });
  });
}

cudaError_t probe_image() {
  cudaFuncAttributes attr;
  return probe_answer(kernel_attributes<__half, config_index(64)>(&attr));
}

}  // namespace evosdpa::detail::mma_fp8
