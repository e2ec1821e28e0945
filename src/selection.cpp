#include "selection.hpp"

#include <string>
#include <string_view>

#include "kernels/cuda_archs.hpp"

namespace evosdpa::detail {
namespace {

std::string device_arch(const DeviceInfo& dev) { return std::to_string(dev.cc_major * 10 + dev.cc_minor); }

// Whether the build holds code for the device that the family's kernels can run from: decided from
// the family's target list when it names targets, else by asking the runtime, which only a real device
// may be asked (a made-up one is assumed to be covered, as nothing can tell).
Check check_code_for_device(const KernelFamily& f, const DeviceInfo& dev) {
  const ArchMatch match = cuda_archs_run_on(f.cuda_archs, dev.cc_major, dev.cc_minor);
  if (match == ArchMatch::kRuns || (match == ArchMatch::kUnknown && !dev.is_real)) return {};
  const std::string built = std::string(f.name) + ": built for " + describe_cuda_archs(f.cuda_archs);
  const std::string device = "device " + std::to_string(dev.ordinal) + " is sm_" + device_arch(dev);
  const std::string rebuild = " (rebuild with CMAKE_CUDA_ARCHITECTURES including " + device_arch(dev) + ")";
  if (match == ArchMatch::kNoCode) return fail(EVOSDPA_ERROR_NOT_SUPPORTED, built + " only; " + device + rebuild);
  const cudaError_t err = f.probe_image();
  if (err == cudaSuccess) return {};
  const std::string why = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorInvalidDeviceFunction || err == cudaErrorNoKernelImageForDevice)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                built + ", which holds no code for it; " + device + " (" + why + ")" + rebuild);
  return fail(EVOSDPA_ERROR_CUDA, std::string(f.name) + ": cannot query its kernel image (" + why + ")");
}

Selection try_family(const KernelFamily& f, const evosdpa_params_t& p, const DeviceInfo& dev, Pass pass) {
  if (pass == Pass::kBackward && f.backward == nullptr)
    return {fail(EVOSDPA_ERROR_NOT_SUPPORTED, std::string(f.name) + ": has no backward pass")};
  FamilySupport s = pass == Pass::kForward ? f.supports(p, dev) : f.backward->supports(p, dev);
  // The family's own refusal first: it is more specific, and the runtime probe is then not needed.
  if (s.check.ok()) s.check = check_code_for_device(f, dev);
  if (!s.check.ok()) return {std::move(s.check)};
  return {{}, &f, s.variant, s.splits, s.workspace_bytes, s.workspace_wanted};
}

}  // namespace

bool is_auto(const char* requested) {
  return requested == nullptr || requested[0] == '\0' || std::string_view(requested) == "auto";
}

Check check_kernel_name(const char* requested, FamilyTable families) {
  if (is_auto(requested) || find_family(requested, families) != nullptr) return {};
  std::string names;
  for (const KernelFamily* f : families) names += std::string(", ") + f->name;
  return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "unknown kernel \"" + std::string(requested) + "\" (known: auto" + names + ")");
}

Selection select_kernel(const evosdpa_params_t& p, const DeviceInfo& dev, const char* requested,
                        FamilyTable families, Pass pass) {
  if (Check c = check_kernel_name(requested, families); !c.ok()) return {c};
  if (Check c = pass == Pass::kForward ? validate_params(p) : validate_backward_params(p); !c.ok()) return {c};
  if (dev.cc_major < 8)
    return {fail(EVOSDPA_ERROR_DEVICE, "device " + std::to_string(dev.ordinal) + " has compute capability " +
                                           std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor) +
                                           "; evosdpa needs 8.0 (sm_80) or newer")};
  if (!is_auto(requested)) return try_family(*find_family(requested, families), p, dev, pass);
  std::string reasons;
  Selection passed_over;  // the first family that supports the call but left it to a later one
  for (const KernelFamily* f : families) {
    Selection s = try_family(*f, p, dev, pass);
    if (s.check.ok() && pass == Pass::kForward && f->auto_prefers != nullptr && !f->auto_prefers(p, dev)) {
      if (passed_over.family == nullptr) passed_over = std::move(s);
      continue;
    }
    // NOT_SUPPORTED passes the call on to the next family; anything else (a failed CUDA query) is an
    // error of its own, not a reason to run something slower.
    if (s.check.status != EVOSDPA_ERROR_NOT_SUPPORTED) return s;
    reasons += (reasons.empty() ? "" : "; ") + s.check.message;
  }
  if (passed_over.family != nullptr) return passed_over;
  return {fail(EVOSDPA_ERROR_NOT_SUPPORTED, "no kernel supports these arguments: " + reasons)};
}

}  // namespace evosdpa::detail
