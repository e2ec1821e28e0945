// Chooses the (dtype, tile-table row) instantiation of the Hopper kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/wgmma/wgmma_dispatch.hpp"
#include "kernels/wgmma/wgmma_instances.hpp"

namespace evosdpa::detail::wgmma_sm90 {
namespace {

static_assert(kConfigCount == 2, "a tile-table row was added or removed: update the switch below");

template <typename T>
cudaError_t launch_row(const KernelParams& p, int row, cudaStream_t stream) {
  switch (row) {
    case 0: return launch<T, 0>(p, stream);
    case 1: return launch<T, 1>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_variant(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream) {
  switch (dtype) {
    case EVOSDPA_DTYPE_FLOAT16: return launch_row<__half>(p, variant, stream);
    case EVOSDPA_DTYPE_BFLOAT16: return launch_row<__nv_bfloat16>(p, variant, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t probe_image() {
  cudaFuncAttributes attr;
  const cudaError_t err = kernel_attributes<__half, config_index(64)>(&attr);
  if (err != cudaSuccess) cudaGetLastError();  // not left as the thread's last error (see mma_dispatch.cu)
  return err;
}

}  // namespace evosdpa::detail::wgmma_sm90
