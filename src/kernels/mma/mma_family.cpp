// The sm_80 tensor-core family in the registry: what it supports (a tile-table row for the head_dim,
// shared memory, alignment, grid size) and its entry points.
#include <cstdint>
#include <string>

#include "dispatch.hpp"
#include "kernels/cuda_archs.hpp"
#include "kernels/family.hpp"
#include "kernels/mma/bwd/bwd_config.hpp"
#include "kernels/mma/bwd/bwd_dispatch.hpp"
#include "kernels/mma/bwd/bwd_workspace.hpp"
#include "kernels/mma/mma_config.hpp"
#include "kernels/mma/mma_dispatch.hpp"

#ifndef EVOSDPA_CUDA_ARCHS
#error "EVOSDPA_CUDA_ARCHS (the CUDA targets this family's kernels are compiled for) is set by src/sources.cmake"
#endif

namespace evosdpa::detail {
namespace {

// cp.async copies and the output stores move 16-byte chunks: every row start must be 16-byte aligned.
constexpr int64_t kChunkBytes = 16;
constexpr long long kMaxGridX = INT32_MAX;

FamilySupport supports(const evosdpa_params_t& p, const DeviceInfo& dev) {
  const std::string who = "mma_sm80: ";
  const auto refuse = [](std::string message) {
    return FamilySupport{fail(EVOSDPA_ERROR_NOT_SUPPORTED, std::move(message))};
  };
  // The instantiations (inst/) are fp16 and bf16 only; a dtype added to the C ABI gets the reference
  // kernel until this family learns it.
  if (p.dtype != EVOSDPA_DTYPE_FLOAT16 && p.dtype != EVOSDPA_DTYPE_BFLOAT16)
    return refuse(who + (p.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ? std::string("FP8 (E4M3) inputs are not supported yet")
                                                               : "dtype " + std::to_string(static_cast<int>(p.dtype))) +
                  " (fp16, bf16)");
  if (const Check c = check_no_page_table(p); !c.ok()) return refuse(who + c.message);
  // Score modifiers (score_mods.cuh): windows, softcaps, mask tensors with either or both, and ALiBi
  // alone or with a mask tensor; a mask's elements read in pairs (mma_mask.cuh).
  if (uses_alibi(p) && (uses_window(p) || uses_softcap(p)))
    return refuse(who + "ALiBi with a sliding window or softcap (reference runs them together)");
  if (const Check c = check_fast_softcap(p, effective_scale(p)); !c.ok()) return refuse(who + c.message);
  if (const Check c = check_tensor_row_alignment(mask_view(p), mask_elem_bytes(p), 2 * mask_elem_bytes(p)); !c.ok())
    return refuse(who + c.message + " (it reads the mask in element pairs; reference takes any alignment)");
  const int64_t elem = static_cast<int64_t>(evosdpa_dtype_size(p.dtype));
  const int variant =
      mma_sm80::choose_config(static_cast<int>(p.head_dim), p.batch * p.heads_q, p.seqlen_q, dev.sm_count,
                              10 * dev.cc_major + dev.cc_minor, uses_score_mods(p));
  if (variant < 0) return refuse(who + "no tile configuration for head_dim " + std::to_string(p.head_dim));
  const mma_sm80::TileConfig& cfg = mma_sm80::kConfigs[variant];
  const long long smem = cfg.smem_bytes(static_cast<int>(elem));
  if (smem > dev.max_smem_per_block_optin)
    return refuse(who + "needs " + std::to_string(smem) + " bytes of shared memory per block, the device allows " +
                  std::to_string(dev.max_smem_per_block_optin));
  if (const Check c = check_row_alignment(p, kChunkBytes); !c.ok()) return refuse(who + c.message);
  // Every factor is below 2^31, but their product can pass 2^63.
  const __int128 blocks = static_cast<__int128>((p.seqlen_q + cfg.block_m() - 1) / cfg.block_m()) * p.batch * p.heads_q;
  if (blocks > kMaxGridX)
    return refuse(who + "batch * heads_q * ceil(seqlen_q / " + std::to_string(cfg.block_m()) +
                  ") exceeds 2^31-1 blocks");
  return {{}, variant};
}

FamilySupport backward_supports(const evosdpa_params_t& p, const DeviceInfo& dev) {
  const std::string who = "mma_sm80 backward: ";
  const auto refuse = [](std::string message) {
    return FamilySupport{fail(EVOSDPA_ERROR_NOT_SUPPORTED, std::move(message))};
  };
  // validate_backward_params admits fp16 and bf16 only, the instantiations of inst/.
  const int head_dim = static_cast<int>(p.head_dim);
  if (mma_sm80::bwd_config_index(head_dim) < 0)
    return refuse(who + "no configuration for head_dim " + std::to_string(p.head_dim));
  // The preferred row that the device runs: every head dim has one for sm_80 with sm_86/sm_89's memory.
  // A row's kernel is compiled only from its min_arch on, so the architecture that counts is the one the
  // device's code was built for (a build for sm_80 alone runs compute_80 PTX on an H100); where the
  // list cannot tell ("native", "all"), the device's own.
  const int code_level = cuda_archs_code_level(EVOSDPA_CUDA_ARCHS, dev.cc_major, dev.cc_minor);
  const int arch = code_level > 0 ? code_level : 10 * dev.cc_major + dev.cc_minor;
  const int variant = mma_sm80::bwd_config_index(head_dim, arch, dev.max_smem_per_block_optin);
  if (variant < 0)
    return refuse(who + "needs " + std::to_string(mma_sm80::bwd_min_smem_bytes(head_dim)) +
                  " bytes of shared memory per block, the device allows " +
                  std::to_string(dev.max_smem_per_block_optin));
  const mma_sm80::BwdConfig& cfg = mma_sm80::kBwdConfigs[variant];
  if (const Check c = check_backward_row_alignment(p, kChunkBytes); !c.ok()) return refuse(who + c.message);
  if (const Check c = check_backward_grid(p, cfg.block_n); !c.ok()) return refuse(who + c.message);
  return {{}, variant};
}

// D, the float32 dQ sums and (DETERMINISTIC) the row's turn counters (bwd_workspace.hpp).
size_t backward_workspace_bytes(const evosdpa_params_t& p, int variant) {
  return static_cast<size_t>(mma_sm80::bwd_workspace_bytes(p.batch * p.heads_q, p.seqlen_q, p.head_dim,
                                                            p.backward_mode != EVOSDPA_BACKWARD_FAST,
                                                            mma_sm80::kBwdConfigs[variant].tile_m));
}

const BackwardEntry kBackward = {backward_supports, backward_workspace_bytes, mma_sm80::launch_backward_variant};

}  // namespace

extern const KernelFamily kMmaSm80Family = {"mma_sm80", EVOSDPA_CUDA_ARCHS, supports, mma_sm80::launch_variant,
                                            mma_sm80::probe_image, nullptr, &kBackward};

}  // namespace evosdpa::detail
