// Explicit instantiation: sm_80 tensor-core kernel, bf16, head_dim 128.
#include "kernels/mma/mma_launch.cuh"

namespace evosdpa::detail::mma_sm80 {
template cudaError_t launch<__nv_bfloat16, 128>(const KernelParams&, cudaStream_t);
}
