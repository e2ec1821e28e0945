// Explicit instantiations: FP8 kernel, fp16 output, head_dim 64, and the family's image probe.
#include "kernels/mma_fp8/mma_fp8_launch.cuh"

namespace evosdpa::detail::mma_fp8 {
template cudaError_t launch<__half, config_index(64)>(const KernelParams&, cudaStream_t);
template cudaError_t kernel_attributes<__half, config_index(64)>(cudaFuncAttributes*);
}  // namespace evosdpa::detail::mma_fp8
