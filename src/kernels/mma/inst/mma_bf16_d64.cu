// Explicit instantiations: sm_80 tensor-core kernel, bf16, every head_dim 64 row of the tile table.
#include "kernels/mma/mma_launch.cuh"

namespace evosdpa::detail::mma_sm80 {
template cudaError_t launch<__nv_bfloat16, config_index(64, false)>(const KernelParams&, cudaStream_t);
template cudaError_t launch<__nv_bfloat16, config_index(64, true)>(const KernelParams&, cudaStream_t);
}  // namespace evosdpa::detail::mma_sm80
