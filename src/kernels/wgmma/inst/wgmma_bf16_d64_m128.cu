// Explicit instantiation: Hopper kernel, bf16, head_dim 64, two consumers (128-row items).
#include "kernels/wgmma/wgmma_launch.cuh"

namespace evosdpa::detail::wgmma_sm90 {
template cudaError_t launch<__nv_bfloat16, row_of(64, 2)>(const KernelParams&, int, cudaStream_t);
}  // namespace evosdpa::detail::wgmma_sm90
