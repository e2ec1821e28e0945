// Chooses the (dtype, tile-table row) instantiation of the sm_80 tensor-core kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/launchers.hpp"
#include "kernels/mma/mma_instances.hpp"

namespace evosdpa::detail {
namespace {

static_assert(mma_sm80::kConfigCount == 4, "a tile-table row was added or removed: update the switch below");

template <typename T>
cudaError_t launch_row(const KernelParams& p, int row, cudaStream_t stream) {
  switch (row) {
    case 0: return mma_sm80::launch<T, 0>(p, stream);
    case 1: return mma_sm80::launch<T, 1>(p, stream);
    case 2: return mma_sm80::launch<T, 2>(p, stream);
    case 3: return mma_sm80::launch<T, 3>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_mma_sm80(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream) {
  switch (dtype) {
    case EVOSDPA_DTYPE_FLOAT16: return launch_row<__half>(p, variant, stream);
    case EVOSDPA_DTYPE_BFLOAT16: return launch_row<__nv_bfloat16>(p, variant, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace evosdpa::detail
