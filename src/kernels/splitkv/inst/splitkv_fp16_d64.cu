// Explicit instantiation: split-KV kernel, fp16, head_dim 64, and the family's image probe.
#include "kernels/splitkv/splitkv_dispatch.hpp"
#include "kernels/splitkv/splitkv_launch.cuh"

namespace evosdpa::detail::splitkv {
template cudaError_t launch<__half, kRowD64>(const KernelParams&, cudaStream_t);
template cudaError_t kernel_attributes<__half, kRowD64>(cudaFuncAttributes*);
}  // namespace evosdpa::detail::splitkv
