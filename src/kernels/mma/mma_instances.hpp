// The instantiations of the sm_80 tensor-core kernel, each compiled in its own file under inst/.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/kernel_params.hpp"
#include "kernels/mma/mma_config.hpp"

namespace evosdpa::detail::mma_sm80 {

// kIndex: a row of kConfigs (mma_config.hpp). Instantiated for every row in inst/.
template <typename T, int kIndex>
cudaError_t launch(const KernelParams& p, cudaStream_t stream);

// Every row of kConfigs for head dim D, element type T: an explicit instantiation of HeadDimRows<T, D>
// (one per inst/ file) instantiates launch<T, row> for each of them, whichever rows the tuned tables
// added, through the calls in its member (a call, not a constant address: nvcc's device pass compiled the
// kernels of only the rows it saw launched from instantiated host code).
template <typename T, int kIndex, bool kOfHeadDim>
struct RowLaunch {
  static cudaError_t call(const KernelParams&, cudaStream_t) { return cudaErrorInvalidValue; }
};
template <typename T, int kIndex>
struct RowLaunch<T, kIndex, true> {
  static cudaError_t call(const KernelParams& p, cudaStream_t stream) { return launch<T, kIndex>(p, stream); }
};
template <typename T, int D, typename Rows = std::make_integer_sequence<int, kConfigCount>>
struct HeadDimRows;
template <typename T, int D, int... kRows>
struct HeadDimRows<T, D, std::integer_sequence<int, kRows...>> {
  static cudaError_t launch_row(int row, const KernelParams& p, cudaStream_t stream);
};
// Out of the class, so not inline: mma_dispatch.cu's `extern template` then leaves it to inst/.
template <typename T, int D, int... kRows>
cudaError_t HeadDimRows<T, D, std::integer_sequence<int, kRows...>>::launch_row(int row, const KernelParams& p,
                                                                                 cudaStream_t stream) {
  cudaError_t e = cudaErrorInvalidValue;
  ((row == kRows ? (e = RowLaunch<T, kRows, kConfigs[kRows].head_dim == D>::call(p, stream)) : e), ...);
  return e;
}

// Instantiated for one row only (fp16, config_index(64, false), in inst/mma_fp16_d64.cu): every row is
// compiled for the same targets, so one kernel answers the image probe for all.
template <typename T, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr);

}  // namespace evosdpa::detail::mma_sm80
