// Explicit instantiations: FP8 kernel, fp16 output, head_dim 128.
#include "kernels/mma_fp8/mma_fp8_launch.cuh"

namespace evosdpa::detail::mma_fp8 {
template cudaError_t launch<__half, config_index(128)>(const KernelParams&, cudaStream_t);
}  // namespace evosdpa::detail::mma_fp8
