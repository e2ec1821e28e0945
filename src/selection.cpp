#include "selection.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/mma/mma_config.hpp"

namespace evosdpa::detail {
namespace {

constexpr int kReferenceMaxHeadDim = 256;
constexpr int kReferenceRowsPerBlock = 4;  // kWarpsPerBlock in kernels/reference/reference.cu
constexpr long long kMaxGridX = INT32_MAX;

}  // namespace

const char* kernel_name(KernelId id) {
  switch (id) {
    case KernelId::MmaSm80: return "mma_sm80";
    case KernelId::Reference: return "reference";
  }
  return "unknown";
}

std::optional<KernelId> kernel_from_name(std::string_view name) {
  for (int i = 0; i < kKernelCount; ++i)
    if (name == kernel_name(static_cast<KernelId>(i))) return static_cast<KernelId>(i);
  return std::nullopt;
}

Check kernel_supports(KernelId id, const evosdpa_params_t& p, const DeviceInfo& dev) {
  const std::string who = std::string(kernel_name(id)) + ": ";
  switch (id) {
    case KernelId::MmaSm80: {
      if (dev.cc_major < 8)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "needs sm_80 or newer");
      const int variant = mma_sm80_variant(p, dev);
      if (variant < 0)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "no tile configuration for head_dim " + std::to_string(p.head_dim));
      const mma_sm80::TileConfig* cfg = &mma_sm80::kConfigs[variant];
      if (cfg->smem_bytes() > dev.max_smem_per_block_optin)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "needs " + std::to_string(cfg->smem_bytes()) +
                                                     " bytes of shared memory per block, the device allows " +
                                                     std::to_string(dev.max_smem_per_block_optin));
      for (const TensorView& t : tensors(p)) {
        if (t.empty()) continue;
        if (reinterpret_cast<uintptr_t>(t.ptr) % 16 != 0)
          return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + std::string(t.name) + " is not 16-byte aligned");
        for (int d = 0; d < 3; ++d)
          if (t.sizes[d] > 1 && t.strides[d] % 8 != 0)
            return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + std::string(t.name) + " " + kDimNames[d] + " stride " +
                                                         std::to_string(t.strides[d]) +
                                                         " is not a multiple of 8 elements (16 bytes)");
      }
      const long long q_blocks = (p.seqlen_q + cfg->block_m() - 1) / cfg->block_m();
      if (static_cast<__int128>(q_blocks) * p.batch * p.heads_q > kMaxGridX)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "batch * heads_q * ceil(seqlen_q / " +
                                                     std::to_string(cfg->block_m()) + ") exceeds 2^31-1 blocks");
      return {};
    }
    case KernelId::Reference: {
      if (dev.cc_major < 8) return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "needs sm_80 or newer");
      if (p.head_dim > kReferenceMaxHeadDim)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "head_dim above " + std::to_string(kReferenceMaxHeadDim));
      const __int128 rows = static_cast<__int128>(p.batch) * p.heads_q * p.seqlen_q;
      if ((rows + kReferenceRowsPerBlock - 1) / kReferenceRowsPerBlock > kMaxGridX)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "batch * heads_q * seqlen_q exceeds " +
                                                     std::to_string(kMaxGridX * kReferenceRowsPerBlock) + " rows");
      return {};
    }
  }
  return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "unknown kernel id " + std::to_string(static_cast<int>(id)));
}

bool is_auto(const char* requested) {
  return requested == nullptr || requested[0] == '\0' || std::string_view(requested) == "auto";
}

Check check_kernel_name(const char* requested) {
  if (is_auto(requested) || kernel_from_name(requested)) return {};
  std::string names;
  for (int i = 0; i < kKernelCount; ++i) names += std::string(", ") + kernel_name(static_cast<KernelId>(i));
  return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "unknown kernel \"" + std::string(requested) + "\" (known: auto" + names + ")");
}

int mma_sm80_variant(const evosdpa_params_t& p, const DeviceInfo& dev) {
  return mma_sm80::choose_config(static_cast<int>(p.head_dim), p.batch * p.heads_q, p.seqlen_q, dev.sm_count);
}

Selection select_kernel(const evosdpa_params_t& p, const DeviceInfo& dev, const char* requested) {
  if (Check c = check_kernel_name(requested); !c.ok()) return {c};
  const std::optional<KernelId> named = is_auto(requested) ? std::nullopt : kernel_from_name(requested);
  if (Check c = validate_params(p); !c.ok()) return {c};
  if (dev.cc_major < 8)
    return {fail(EVOSDPA_ERROR_DEVICE, "device " + std::to_string(dev.ordinal) + " has compute capability " +
                                           std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor) +
                                           "; evosdpa needs 8.0 (sm_80) or newer")};
  auto selection = [&](Check c, KernelId id) {
    return Selection{std::move(c), id, id == KernelId::MmaSm80 ? mma_sm80_variant(p, dev) : 0};
  };
  if (named) return selection(kernel_supports(*named, p, dev), *named);
  std::string reasons;
  for (int i = 0; i < kKernelCount; ++i) {
    const auto id = static_cast<KernelId>(i);
    Check c = kernel_supports(id, p, dev);
    if (c.ok()) return selection(std::move(c), id);
    reasons += (reasons.empty() ? "" : "; ") + c.message;
  }
  return {fail(EVOSDPA_ERROR_NOT_SUPPORTED, "no kernel supports these arguments: " + reasons)};
}

}  // namespace evosdpa::detail
