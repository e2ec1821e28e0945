// The FP8 (E4M3) tensor-core family for sm_89 and sm_90 in the registry: what it supports and its entry
// points. "auto" takes it for every FP8 call it supports. On an H100 (2026-11-23, `evosdpa-bench --dtype
// fp8 --graph`) it ran (1,8,512,64) in 10.7 us against the reference kernel's 538 us, and (2,16,4096,128)
// at 233 TFLOP/s; sm_90 has no FP8 mma.sync and ptxas emulates it with fp16 HMMA, so FP8 there is slower
// than the 16-bit wgmma_sm90 until a wgmma E4M3 kernel exists (docs/fp8-design.md, step 3).
#include <cstdint>
#include <string>

#include "kernels/family.hpp"
#include "kernels/mma_fp8/mma_fp8_config.hpp"
#include "kernels/mma_fp8/mma_fp8_dispatch.hpp"

#ifndef EVOSDPA_CUDA_ARCHS
#error "EVOSDPA_CUDA_ARCHS (the CUDA targets this family's kernels are compiled for) is set by src/sources.cmake"
#endif

namespace evosdpa::detail {
namespace {

// cp.async copies 16-byte chunks of Q, K and V; O leaves in 8-byte stores: every row start 16-byte
// aligned keeps both simple.
constexpr int64_t kChunkBytes = 16;
constexpr long long kMaxGridX = INT32_MAX;

FamilySupport supports(const evosdpa_params_t& p, const DeviceInfo& dev) {
  const std::string who = "mma_fp8_sm89: ";
  const auto refuse = [](std::string message) {
    return FamilySupport{fail(EVOSDPA_ERROR_NOT_SUPPORTED, std::move(message))};
  };
  if (p.dtype != EVOSDPA_DTYPE_FLOAT8_E4M3) return refuse(who + "FP8 (E4M3) inputs only");
  if (const Check c = check_no_kv_cache(p); !c.ok()) return refuse(who + c.message);
  if (const Check c = check_no_varlen(p); !c.ok()) return refuse(who + c.message);
  if (const Check c = check_no_score_mods(p); !c.ok()) return refuse(who + c.message);
  if (dev.cc_major * 10 + dev.cc_minor < 89)
    return refuse(who + "needs compute capability 8.9 or newer (mma.sync with E4M3 operands)");
  const int variant = mma_fp8::config_index(static_cast<int>(p.head_dim));
  if (variant < 0) return refuse(who + "no tile configuration for head_dim " + std::to_string(p.head_dim));
  const mma_fp8::TileConfig& cfg = mma_fp8::kConfigs[variant];
  if (cfg.smem_bytes() > dev.max_smem_per_block_optin)
    return refuse(who + "needs " + std::to_string(cfg.smem_bytes()) +
                  " bytes of shared memory per block, the device allows " + std::to_string(dev.max_smem_per_block_optin));
  if (const Check c = check_row_alignment(p, kChunkBytes); !c.ok()) return refuse(who + c.message);
  const __int128 blocks = static_cast<__int128>((p.seqlen_q + cfg.block_m() - 1) / cfg.block_m()) * p.batch * p.heads_q;
  if (blocks > kMaxGridX)
    return refuse(who + "batch * heads_q * ceil(seqlen_q / " + std::to_string(cfg.block_m()) +
                  ") exceeds 2^31-1 blocks");
  return {{}, variant};
}

}  // namespace

extern const KernelFamily kMmaFp8Family = {"mma_fp8_sm89", EVOSDPA_CUDA_ARCHS, supports, mma_fp8::launch_variant,
                                           mma_fp8::probe_image, nullptr};

}  // namespace evosdpa::detail
