// Kernel selection. One function, select_kernel, decides which kernel family runs;
// evosdpa_supports() and evosdpa_attention_forward() both call it, so they cannot disagree. It walks the
// registry's table of families (kernels/registry.hpp) and knows none of them. It needs no GPU: the
// device is described by a DeviceInfo, which tests can make up.
#pragma once

#include "evosdpa/evosdpa.h"
#include "kernels/family.hpp"
#include "kernels/registry.hpp"
#include "validation.hpp"

namespace evosdpa::detail {

// nullptr, "" and "auto" ask for automatic selection.
bool is_auto(const char* requested);

// INVALID_ARGUMENT naming the known kernels when `requested` is neither automatic nor a family's name.
Check check_kernel_name(const char* requested, FamilyTable families = registry());

// Which call is being served: the forward (KernelFamily::supports) or the backward
// (KernelFamily::backward, validated by validate_backward_params).
enum class Pass { kForward, kBackward };

struct Selection {
  Check check;
  const KernelFamily* family = nullptr;  // set when check is ok
  int variant = 0;                       // the family's choice, for its launch
  int splits = 1;                        // key splits through the workspace (FamilySupport::splits)
  size_t workspace_bytes = 0;            // the forward workspace this call uses (FamilySupport)
  size_t workspace_wanted = 0;           // what it would use with any workspace (FamilySupport)
};

// The single selection function: the kernel name, validation, device generation, then the requested
// family ("auto", "" or nullptr for the first of `families` that supports the call). A family supports
// a call when its supports() says so and the build holds code for the device (KernelFamily::cuda_archs,
// or its probe_image on a real device when the list cannot tell). `families` is the registry except in
// tests that make a family up. For the backward pass a family without one refuses with NOT_SUPPORTED,
// and auto_prefers (a forward measurement) is not consulted.
Selection select_kernel(const evosdpa_params_t& p, const DeviceInfo& dev, const char* requested,
                        FamilyTable families = registry(), Pass pass = Pass::kForward);

}  // namespace evosdpa::detail
