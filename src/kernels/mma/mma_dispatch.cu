// Chooses the (dtype, head_dim) instantiation of the sm_80 tensor-core kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/launchers.hpp"
#include "kernels/mma/mma_instances.hpp"

namespace evosdpa::detail {

cudaError_t launch_mma_sm80(const KernelParams& p, evosdpa_dtype_t dtype, int head_dim,
                            cudaStream_t stream) {
  switch (dtype) {
    case EVOSDPA_DTYPE_FLOAT16:
      switch (head_dim) {
        case 64: return mma_sm80::launch<__half, 64>(p, stream);
        case 128: return mma_sm80::launch<__half, 128>(p, stream);
        default: return cudaErrorInvalidValue;
      }
    case EVOSDPA_DTYPE_BFLOAT16:
      switch (head_dim) {
        case 64: return mma_sm80::launch<__nv_bfloat16, 64>(p, stream);
        case 128: return mma_sm80::launch<__nv_bfloat16, 128>(p, stream);
        default: return cudaErrorInvalidValue;
      }
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace evosdpa::detail
