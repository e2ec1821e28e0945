// Explicit instantiation: split-KV kernel, fp16, head_dim 128, the 48 KiB row (four blocks per SM, sm_90).
#include "kernels/splitkv/splitkv_dispatch.hpp"
#include "kernels/splitkv/splitkv_launch.cuh"

namespace evosdpa::detail::splitkv {
template cudaError_t launch<__half, kRowD128Short>(const KernelParams&, cudaStream_t);
}  // namespace evosdpa::detail::splitkv
