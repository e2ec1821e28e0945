// Explicit instantiation: split-KV kernel, bf16, head_dim 128.
#include "kernels/splitkv/splitkv_dispatch.hpp"
#include "kernels/splitkv/splitkv_launch.cuh"

namespace evosdpa::detail::splitkv {
template cudaError_t launch<__nv_bfloat16, kRowD128>(const KernelParams&, cudaStream_t);
}  // namespace evosdpa::detail::splitkv
