// Entry points of the kernel families, called by dispatch. Each checks nothing: selection has already
// established that the kernel supports the arguments and the device.
#pragma once

#include <cuda_runtime_api.h>

#include "evosdpa/evosdpa.h"
#include "kernels/kernel_params.hpp"

namespace evosdpa::detail {

cudaError_t launch_reference(const KernelParams& p, evosdpa_dtype_t dtype, int head_dim,
                             cudaStream_t stream);

// `variant`: the row of the tile table (mma_config.hpp) that selection chose.
cudaError_t launch_mma_sm80(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream);

}  // namespace evosdpa::detail
