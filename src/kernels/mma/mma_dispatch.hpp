// The sm_80 tensor-core family's entry points compiled by nvcc (mma_dispatch.cu), for its KernelFamily
// (mma_family.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include "evosdpa/evosdpa.h"
#include "kernels/kernel_params.hpp"

namespace evosdpa::detail::mma_sm80 {

// `variant`: the row of the tile table (mma_config.hpp) that supports() chose.
cudaError_t launch_variant(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream);

// KernelFamily::probe_image.
cudaError_t probe_image();

}  // namespace evosdpa::detail::mma_sm80
