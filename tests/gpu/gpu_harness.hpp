// Runs one attention problem on the GPU from host inputs, in a chosen memory layout, with the outputs
// poisoned (all bits set: NaN in fp16, bf16 and fp32) before the call.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/cases.hpp"
#include "evosdpa/evosdpa.hpp"
#include "host/accuracy_check.hpp"
#include "host/cpu_reference.hpp"

namespace gpu_test {

// The run's base seed (printed once; EVOSDPA_TEST_SEED replays it); every case derives its own from it
// and its name.
uint64_t run_seed();
// The float64 results of a case of the shape set, computed once and shared by every kernel and row
// tested on it.
const evosdpa::host::Expected& expected_for(const test_cases::KCase& c);

#define CUDA_OK(expr)                                                                   \
  do {                                                                                  \
    const cudaError_t e_ = (expr);                                                      \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_);              \
  } while (0)

using test_cases::Layout;

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;  // frees what it held, takes other's
  ~DeviceBuffer();
};

struct Strides {
  int64_t batch, head, seq;
};
// The shape fields of `p` (dtype, sizes, causal mode, scale) from a host Shape.
void set_shape(evosdpa_params_t& p, const evosdpa::host::Shape& s, evosdpa_dtype_t dtype);

Strides strides_for(Layout l, int64_t heads, int64_t seqlen, int64_t head_dim);
// A mask tensor's strides in elements: its own rows padded to a multiple of 16 plus 16 (16-byte aligned
// rows), heads 32 elements apart; 0 for each dimension it broadcasts.
Strides mask_strides(const evosdpa::host::Shape& s);
int64_t storage_elems(Layout l, int64_t batch, int64_t heads, int64_t seqlen, int64_t head_dim);
// Copy a BHSD float tensor, rounded to the 16-bit dtype, into `buf` at the layout's strides; storage
// outside the tensor gets a recognisable finite value. Throws on a failed copy.
void upload(DeviceBuffer& buf, const std::vector<float>& x, Layout l, int64_t B, int64_t H, int64_t L, int64_t D,
            evosdpa_dtype_t dtype);

// Runs `kernel` on `p` with the 16-bit O in `o_buf` and the float32 lse in `lse_buf` poisoned (all bits
// set: NaN) before the call; on success O back as floats in storage order and lse, each buffer whole.
evosdpa::Result run_poisoned(const evosdpa_params_t& p, const std::string& kernel, evosdpa_dtype_t dtype,
                             const DeviceBuffer& o_buf, const DeviceBuffer& lse_buf, std::vector<float>& o,
                             std::vector<float>& lse);

// A problem uploaded to the device, ready to run repeatedly.
class DeviceProblem {
 public:
  // FP8 inputs (dtype EVOSDPA_DTYPE_FLOAT8_E4M3): in's E4M3 codes and descales are uploaded and O is
  // o_dtype; o_dtype is read only for FP8 inputs.
  DeviceProblem(const evosdpa::host::Shape& s, evosdpa_dtype_t dtype, Layout layout,
                const evosdpa::host::Inputs& in, bool with_lse, evosdpa_dtype_t o_dtype = EVOSDPA_DTYPE_FLOAT16);
  evosdpa_params_t params() const { return params_; }
  void poison();                             // fill O and lse with NaN bits
  std::vector<float> output() const;         // O as BHSD floats
  std::vector<float> lse() const;            // [B, Hq, Lq]
  // Raw bytes of the whole O allocation, padding included (for bitwise and untouched-padding checks).
  std::vector<uint16_t> raw_output() const;

 private:
  evosdpa::host::Shape shape_;
  evosdpa_dtype_t dtype_, o_dtype_;
  Layout layout_;
  DeviceBuffer q_, k_, v_, o_, lse_;
  DeviceBuffer q_descale_, k_descale_, v_descale_;  // FP8 inputs only
  DeviceBuffer mask_;                               // a mask tensor's elements, rows padded (mask_strides)
  DeviceBuffer alibi_;                              // ALiBi's slopes, batch entries heads_q + 3 apart
  evosdpa_params_t params_;
};

}  // namespace gpu_test
