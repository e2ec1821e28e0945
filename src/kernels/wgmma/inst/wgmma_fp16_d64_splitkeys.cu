// Explicit instantiation: Hopper kernel, fp16, head_dim 64, two consumers splitting each item's keys.
#include "kernels/wgmma/wgmma_launch.cuh"

namespace evosdpa::detail::wgmma_sm90 {
template cudaError_t launch<__half, row_of(64, 2, true)>(const KernelParams&, int, cudaStream_t);
}  // namespace evosdpa::detail::wgmma_sm90
