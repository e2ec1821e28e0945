// Explicit instantiation: Hopper kernel, fp16, head_dim 64, and the family's image probe.
#include "kernels/wgmma/wgmma_launch.cuh"

namespace evosdpa::detail::wgmma_sm90 {
template cudaError_t launch<__half, config_index(64)>(const KernelParams&, cudaStream_t);
template cudaError_t kernel_attributes<__half, config_index(64)>(cudaFuncAttributes*);
}  // namespace evosdpa::detail::wgmma_sm90
