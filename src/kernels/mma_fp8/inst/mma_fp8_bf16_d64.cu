// Explicit instantiations: FP8 kernel, bf16 output, head_dim 64.
#include "kernels/mma_fp8/mma_fp8_launch.cuh"

namespace evosdpa::detail::mma_fp8 {
template cudaError_t launch<__nv_bfloat16, config_index(64)>(const KernelParams&, cudaStream_t);
}  // namespace evosdpa::detail::mma_fp8
