// wgmma_sm90's backward entry point compiled by nvcc (wgmma_bwd_dispatch.cu), for the family's
// BackwardEntry (wgmma_family.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include "evosdpa/evosdpa.h"
#include "kernels/backward_params.hpp"

namespace evosdpa::detail::wgmma_sm90 {

// `variant`: the row of kBwdTiles (wgmma_bwd_config.hpp) that supports() chose.
cudaError_t launch_backward_variant(const BackwardParams& bp, evosdpa_dtype_t dtype, int variant, cudaStream_t stream);

}  // namespace evosdpa::detail::wgmma_sm90
