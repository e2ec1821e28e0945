// Explicit instantiation: sm_80 tensor-core kernel, fp16, head_dim 128.
#include "kernels/mma/mma_launch.cuh"

namespace evosdpa::detail::mma_sm80 {
template cudaError_t launch<__half, 128>(const KernelParams&, cudaStream_t);
}
