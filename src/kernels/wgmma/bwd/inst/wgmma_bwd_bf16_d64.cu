// Explicit instantiation: Hopper backward, bf16, head_dim 64.
#include "kernels/wgmma/bwd/wgmma_bwd_launch.cuh"

namespace evosdpa::detail::wgmma_sm90 {
static_assert(kBwdTiles[0].head_dim == 64);
template cudaError_t launch_backward<__nv_bfloat16, 0>(const BackwardParams&, cudaStream_t);
}  // namespace evosdpa::detail::wgmma_sm90
