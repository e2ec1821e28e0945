// Explicit instantiations: sm_80 tensor-core kernel, fp16, every head_dim 64 row of the tile table, and the
// family's image probe.
#include "kernels/mma/mma_launch.cuh"

namespace evosdpa::detail::mma_sm80 {
template cudaError_t launch<__half, config_index(64, false)>(const KernelParams&, cudaStream_t);
template cudaError_t launch<__half, config_index(64, true)>(const KernelParams&, cudaStream_t);
template cudaError_t kernel_attributes<__half, config_index(64, false)>(cudaFuncAttributes*);
}  // namespace evosdpa::detail::mma_sm80
