// Explicit instantiation: Hopper kernel, bf16, head_dim 64.
#include "kernels/wgmma/wgmma_launch.cuh"

namespace evosdpa::detail::wgmma_sm90 {
template cudaError_t launch<__nv_bfloat16, config_index(64)>(const KernelParams&, cudaStream_t);
}  // namespace evosdpa::detail::wgmma_sm90
