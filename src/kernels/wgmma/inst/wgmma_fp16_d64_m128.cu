// Explicit instantiation: Hopper kernel, fp16, head_dim 64, two consumers (128-row items).
#include "kernels/wgmma/wgmma_launch.cuh"

namespace evosdpa::detail::wgmma_sm90 {
template cudaError_t launch<__half, row_of(64, 2)>(const KernelParams&, int, cudaStream_t);
}  // namespace evosdpa::detail::wgmma_sm90
