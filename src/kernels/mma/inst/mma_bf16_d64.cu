// Explicit instantiations: sm_80 tensor-core kernel, bf16, every head_dim 64 row of the tile table,
// hand-made and tuned (HeadDimRows).
#include "kernels/mma/mma_instances.hpp"
#include "kernels/mma/mma_launch.cuh"

namespace evosdpa::detail::mma_sm80 {
template struct HeadDimRows<__nv_bfloat16, 64>;
}  // namespace evosdpa::detail::mma_sm80
