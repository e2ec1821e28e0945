// Shared by the kernel families' dispatch files: run a generic callable with the CUDA element type of a
// dtype or with a tile-table row as a constant, and read an image probe's answer without leaving it as
// the thread's last CUDA error.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <utility>

#include "evosdpa/evosdpa.h"

namespace evosdpa::detail {

// f(T{}) with T the dtype's element type; cudaErrorInvalidValue for a dtype no family instantiates.
template <typename F>
cudaError_t with_element_type(evosdpa_dtype_t dtype, F&& f) {
  switch (dtype) {
    case EVOSDPA_DTYPE_FLOAT16: return f(__half{});
    case EVOSDPA_DTYPE_BFLOAT16: return f(__nv_bfloat16{});
    default: return cudaErrorInvalidValue;
  }
}

// f(std::integral_constant<int, row>{}) for a run-time row of a kCount-row tile table, so a family's
// launch reaches every instantiation without a switch to keep in step with its table.
template <int kCount, typename F, int... kRows>
cudaError_t with_row_impl(int row, F&& f, std::integer_sequence<int, kRows...>) {
  cudaError_t err = cudaErrorInvalidValue;
  ((row == kRows ? (err = f(std::integral_constant<int, kRows>{}), true) : false) || ...);
  return err;
}
template <int kCount, typename F>
cudaError_t with_row(int row, F&& f) {
  return with_row_impl<kCount>(row, f, std::make_integer_sequence<int, kCount>{});
}

// cudaFuncGetAttributes records a failure as the thread's last error too; clear it, or the launch of the
// family that selection falls back to would report it (launches return cudaGetLastError()).
inline cudaError_t probe_answer(cudaError_t err) {
  if (err != cudaSuccess) cudaGetLastError();
  return err;
}

}  // namespace evosdpa::detail
