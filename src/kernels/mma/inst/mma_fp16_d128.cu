// Explicit instantiations: sm_80 tensor-core kernel, fp16, every head_dim 128 row of the tile table,
// hand-made and tuned (HeadDimRows).
#include "kernels/mma/mma_instances.hpp"
#include "kernels/mma/mma_launch.cuh"

namespace evosdpa::detail::mma_sm80 {
template struct HeadDimRows<__half, 128>;
}  // namespace evosdpa::detail::mma_sm80
