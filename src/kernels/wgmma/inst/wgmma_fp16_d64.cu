// Explicit instantiation: Hopper kernel, fp16, head_dim 64 (any mask), and the family's image probe.
#include "kernels/wgmma/wgmma_launch.cuh"

namespace evosdpa::detail::wgmma_sm90 {
template cudaError_t launch<__half, config_index(64, true)>(const KernelParams&, cudaStream_t);
template cudaError_t kernel_attributes<__half, config_index(64, true)>(cudaFuncAttributes*);
}  // namespace evosdpa::detail::wgmma_sm90
