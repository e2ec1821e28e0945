// Explicit instantiation: mma_sm80's backward, bf16, row 0 of kBwdConfigs (head_dim 64, 128-query tiles (sm_90)).
#include "kernels/mma/bwd/bwd_dispatch.hpp"
#include "kernels/mma/bwd/bwd_launch.cuh"

namespace evosdpa::detail::mma_sm80 {
template cudaError_t launch_backward<__nv_bfloat16, 0>(const BackwardParams&, cudaStream_t);
}  // namespace evosdpa::detail::mma_sm80
