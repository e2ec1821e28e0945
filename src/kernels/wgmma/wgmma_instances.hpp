// The instantiations of the Hopper kernel, each compiled in its own file under inst/ (sm_90a only).
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/kernel_params.hpp"
#include "kernels/wgmma/wgmma_config.hpp"

namespace evosdpa::detail::wgmma_sm90 {

// kIndex: a row of kConfigs (wgmma_config.hpp); splits: CTAs per item (Choice, wgmma_config.hpp).
template <typename T, int kIndex>
cudaError_t launch(const KernelParams& p, int splits, cudaStream_t stream);

template <typename T, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr);

// The tuned tables' rows (kConfigs past the hand-made ones, all 16-bit): an explicit instantiation of
// TunedRows<T> (inst/wgmma_<dtype>_tuned.cu) instantiates launch<T, row> for each, whichever rows the
// tables added, through the calls in its member (a call, not a constant address: nvcc's device pass
// compiles the kernels of the rows it sees launched from instantiated host code).
template <typename T, typename Rows = std::make_integer_sequence<int, kConfigCount - kHandCount>>
struct TunedRows;
template <typename T, int... kRows>
struct TunedRows<T, std::integer_sequence<int, kRows...>> {
  static cudaError_t launch_row(int row, const KernelParams& p, int splits, cudaStream_t stream);
};
// Out of the class, so not inline: only inst/ defines it.
template <typename T, int... kRows>
cudaError_t TunedRows<T, std::integer_sequence<int, kRows...>>::launch_row(int row, const KernelParams& p, int splits,
                                                                          cudaStream_t stream) {
  cudaError_t e = cudaErrorInvalidValue;
  ((row == kHandCount + kRows ? (e = launch<T, kHandCount + kRows>(p, splits, stream)) : e), ...);
  return e;
}

}  // namespace evosdpa::detail::wgmma_sm90
