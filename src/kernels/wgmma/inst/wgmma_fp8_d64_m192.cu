// Explicit instantiation: Hopper kernel, E4M3 inputs, head_dim 64, three consumers.
#include "kernels/wgmma/wgmma_launch.cuh"

namespace evosdpa::detail::wgmma_sm90 {
template cudaError_t launch<__nv_fp8_e4m3, row_of(64, 3, false, true)>(const KernelParams&, int, cudaStream_t);
}  // namespace evosdpa::detail::wgmma_sm90
