// Explicit instantiations: sm_80 tensor-core kernel, fp16, every head_dim 64 row of the tile table,
// hand-made and tuned (HeadDimRows), and the family's image probe.
#include "kernels/mma/mma_instances.hpp"
#include "kernels/mma/mma_launch.cuh"

namespace evosdpa::detail::mma_sm80 {
template struct HeadDimRows<__half, 64>;
template cudaError_t kernel_attributes<__half, config_index(64, false)>(cudaFuncAttributes*);
}  // namespace evosdpa::detail::mma_sm80
