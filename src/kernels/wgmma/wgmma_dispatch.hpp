// The Hopper family's entry points compiled by nvcc (wgmma_dispatch.cu), for its KernelFamily
// (wgmma_family.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include "evosdpa/evosdpa.h"
#include "kernels/kernel_params.hpp"

namespace evosdpa::detail::wgmma_sm90 {

// `variant`: the Choice (row of the tile table and splits, wgmma_config.hpp) that supports() made.
cudaError_t launch_variant(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream);

// KernelFamily::probe_image.
cudaError_t probe_image();

}  // namespace evosdpa::detail::wgmma_sm90
