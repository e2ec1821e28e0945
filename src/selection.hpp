// Argument validation and kernel selection. One function, select_kernel, decides which kernel runs;
// evosdpa_supports() and evosdpa_attention_forward() both call it, so they cannot disagree. It needs no
// GPU: the device is described by a DeviceInfo, which tests can make up.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "evosdpa/evosdpa.h"
#include "validation.hpp"

namespace evosdpa::detail {

// Kernel families, fastest first: "auto" takes the first that supports the arguments.
enum class KernelId : int { MmaSm80 = 0, Reference = 1 };
inline constexpr int kKernelCount = 2;

const char* kernel_name(KernelId id);
// nullopt for an unknown name; "auto" is not a kernel name.
std::optional<KernelId> kernel_from_name(std::string_view name);

// nullptr, "" and "auto" ask for automatic selection.
bool is_auto(const char* requested);

// INVALID_ARGUMENT naming the known kernels when `requested` is neither automatic nor a kernel name.
Check check_kernel_name(const char* requested);

struct DeviceInfo {
  int ordinal = 0;
  int cc_major = 0;
  int cc_minor = 0;
  long long max_smem_per_block_optin = 0;  // bytes a block may use after opting in
  int sm_count = 1;
};

// Whether one kernel can run these (already validated) arguments on this device; the message says why not.
Check kernel_supports(KernelId id, const evosdpa_params_t& p, const DeviceInfo& dev);

struct Selection {
  Check check;
  KernelId kernel = KernelId::Reference;
  int variant = 0;  // the kernel family's tile-table row (mma_sm80), chosen from the problem and device
};

// The row of the tile table the sm_80 tensor-core kernel would run (-1 for an unsupported head_dim).
int mma_sm80_variant(const evosdpa_params_t& p, const DeviceInfo& dev);

// The single selection function: validation, device generation, then the requested kernel ("auto",
// "" or nullptr for the fastest supporting one).
Selection select_kernel(const evosdpa_params_t& p, const DeviceInfo& dev, const char* requested);

}  // namespace evosdpa::detail
