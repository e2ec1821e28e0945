// Explicit instantiation: mma_sm80's backward, fp16, row 1 of kBwdConfigs (head_dim 64, 64-query tiles).
#include "kernels/mma/bwd/bwd_dispatch.hpp"
#include "kernels/mma/bwd/bwd_launch.cuh"

namespace evosdpa::detail::mma_sm80 {
template cudaError_t launch_backward<__half, 1>(const BackwardParams&, cudaStream_t);
}  // namespace evosdpa::detail::mma_sm80
