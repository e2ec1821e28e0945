// Explicit instantiation: Hopper kernel, fp16, head_dim 64, three consumers (192-row items), and the
// family's image probe.
#include "kernels/wgmma/wgmma_launch.cuh"

namespace evosdpa::detail::wgmma_sm90 {
template cudaError_t launch<__half, row_of(64, 3)>(const KernelParams&, int, cudaStream_t);
template cudaError_t kernel_attributes<__half, row_of(64, 3)>(cudaFuncAttributes*);
}  // namespace evosdpa::detail::wgmma_sm90
