// Explicit instantiations: Hopper kernel, bf16, every row the tuned tables (tuned/) add to the hand-made
// ones (none while no model's table differs from them).
#include "kernels/wgmma/wgmma_instances.hpp"
#include "kernels/wgmma/wgmma_launch.cuh"

namespace evosdpa::detail::wgmma_sm90 {
template struct TunedRows<__nv_bfloat16>;
}  // namespace evosdpa::detail::wgmma_sm90
