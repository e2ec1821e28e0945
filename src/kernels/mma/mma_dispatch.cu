// Chooses the (dtype, tile-table row) instantiation of the sm_80 tensor-core kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/dtype_dispatch.cuh"
#include "kernels/mma/mma_dispatch.hpp"
#include "kernels/mma/mma_instances.hpp"

namespace evosdpa::detail::mma_sm80 {

cudaError_t launch_variant(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream) {
  return with_element_type(dtype, [&](auto t) {
    return with_row<kConfigCount>(variant, [&](auto row) { return launch<decltype(t), row()>(p, stream); });
  });
}

cudaError_t probe_image() {
  cudaFuncAttributes attr;
  return probe_answer(kernel_attributes<__half, config_index(64, false)>(&attr));
}

}  // namespace evosdpa::detail::mma_sm80
