// What a kernel family brings to the registry (kernels/registry.cpp): its name, the CUDA targets its
// kernels were compiled for, whether it supports a call, and how to launch it. Each family defines one
// KernelFamily in its own folder; selection (selection.cpp) walks the registry's table and knows no family.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "evosdpa/evosdpa.h"
#include "kernels/backward_params.hpp"
#include "kernels/kernel_params.hpp"
#include "validation.hpp"

namespace evosdpa::detail {

// The device a call would run on. api.cpp fills it from the CUDA runtime; CPU tests make it up.
struct DeviceInfo {
  int ordinal = 0;
  int cc_major = 0;
  int cc_minor = 0;
  long long max_smem_per_block_optin = 0;  // bytes a block may use after opting in
  int sm_count = 1;
  // Set only by api.cpp, for the current device: selection may then ask the CUDA runtime about it
  // (KernelFamily::probe_image). A made-up device must never reach CUDA.
  bool is_real = false;
};

struct FamilySupport {
  Check check;      // NOT_SUPPORTED with "<family>: <reason>" when the family cannot run the call
  int variant = 0;  // the family's own choice among its instantiations, handed back to launch
  // The forward's use of the caller's workspace: key splits (splitkv_sm80: the count that runs within the
  // workspace given, 1 for none, no split without a workspace pointer unless num_splits asks) or a work
  // counter (wgmma_sm90); the bytes it uses, which the call checks against the workspace and hands to
  // the kernel (none: a null workspace); and the bytes the family's own choice would use with any
  // workspace, which evosdpa_forward_workspace_size reports.
  int splits = 1;
  size_t workspace_bytes = 0;
  size_t workspace_wanted = 0;
};

// A family's backward pass (evosdpa_attention_backward), chosen by the same selection as its forward.
struct BackwardEntry {
  // As KernelFamily::supports, for the backward call (validated by validate_backward_params).
  FamilySupport (*supports)(const evosdpa_params_t& p, const DeviceInfo& dev);
  // Workspace bytes the variant needs for these arguments.
  size_t (*workspace_bytes)(const evosdpa_params_t& p, int variant);
  cudaError_t (*launch)(const BackwardParams& k, evosdpa_dtype_t dtype, int variant, cudaStream_t stream);
};

struct KernelFamily {
  const char* name;
  // The CMake CUDA_ARCHITECTURES the family's kernels were compiled for, entries separated by ',' or ';'
  // ("80,89,90", "90a", "80-real,90-virtual", "native"); see kernels/cuda_archs.hpp.
  const char* cuda_archs;
  // Whether the family runs these arguments on this device, and with which variant. Called only with
  // validated arguments and a device of sm_80 or newer (selection checks both first).
  FamilySupport (*supports)(const evosdpa_params_t& p, const DeviceInfo& dev);
  // Launches the variant supports() chose; checks nothing more.
  cudaError_t (*launch)(const KernelParams& k, evosdpa_dtype_t dtype, int variant, cudaStream_t stream);
  // cudaFuncGetAttributes on one of the family's kernels on the current device (all of them are compiled
  // for the same targets): how selection learns whether the build holds code for the device when
  // cuda_archs cannot tell ("native", "all"). cudaErrorInvalidDeviceFunction or
  // cudaErrorNoKernelImageForDevice mean it does not.
  cudaError_t (*probe_image)();
  // For "auto" only: whether the family should take a call it supports, or leave it to a later family
  // in the table that measured faster there (nullptr: always take it). A family passed over still runs
  // by name, and "auto" comes back to it when no later family supports the call.
  bool (*auto_prefers)(const evosdpa_params_t& p, const DeviceInfo& dev);
  // The family's backward pass; nullptr when it has none.
  const BackwardEntry* backward = nullptr;
};

// Families in selection order, fastest first: "auto" takes the first that supports the call.
struct FamilyTable {
  const KernelFamily* const* families;
  std::size_t count;
  const KernelFamily* const* begin() const { return families; }
  const KernelFamily* const* end() const { return families + count; }
};

}  // namespace evosdpa::detail
