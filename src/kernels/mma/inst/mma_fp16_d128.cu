// Explicit instantiations: sm_80 tensor-core kernel, fp16, every head_dim 128 row of the tile table.
#include "kernels/mma/mma_launch.cuh"

namespace evosdpa::detail::mma_sm80 {
template cudaError_t launch<__half, config_index(128, false)>(const KernelParams&, cudaStream_t);
template cudaError_t launch<__half, config_index(128, true)>(const KernelParams&, cudaStream_t);
}  // namespace evosdpa::detail::mma_sm80
