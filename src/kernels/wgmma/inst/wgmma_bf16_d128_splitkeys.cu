// Explicit instantiation: Hopper kernel, bf16, head_dim 128, two consumers splitting each item's keys.
#include "kernels/wgmma/wgmma_launch.cuh"

namespace evosdpa::detail::wgmma_sm90 {
template cudaError_t launch<__nv_bfloat16, row_of(128, 2, true)>(const KernelParams&, int, cudaStream_t);
}  // namespace evosdpa::detail::wgmma_sm90
