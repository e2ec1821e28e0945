// The Hopper family in the registry (wgmma + TMA + warp specialisation, sm_90a): what it supports (TMA's
// rules on addresses and strides, shared memory, grid size), when "auto" prefers it, and its entry
// points. It is the registry's first family: "auto" takes it on Hopper for grids of at least one wave.
#include <cmath>
#include <cstdint>
#include <string>

#include "dispatch.hpp"
#include "kernels/family.hpp"
#include "kernels/mma/bwd/bwd_workspace.hpp"
#include "kernels/wgmma/bwd/wgmma_bwd_config.hpp"
#include "kernels/wgmma/bwd/wgmma_bwd_dispatch.hpp"
#include "kernels/wgmma/wgmma_config.hpp"
#include "kernels/wgmma/wgmma_dispatch.hpp"

#ifndef EVOSDPA_CUDA_ARCHS
#error "EVOSDPA_CUDA_ARCHS (the CUDA targets this family's kernels are compiled for) is set by src/sources.cmake"
#endif

namespace evosdpa::detail {
namespace {

// TMA reads from 16-byte-aligned addresses with strides that are non-zero multiples of 16 bytes below
// 2^40; the output is written with 4-byte stores of element pairs.
constexpr int64_t kTmaAlign = 16;
constexpr int64_t kMaxTmaStride = int64_t{1} << 40;
constexpr long long kMaxGridX = INT32_MAX;
// DynamicSchedule's counter (wgmma_scheduler.cuh), one unsigned in a 16-byte unit of the workspace.
constexpr size_t kCounterBytes = 16;

// A tensor TMA reads or writes: a 16-byte aligned start, strides of the dimensions longer than 1 non-zero
// multiples of 16 bytes below 2^40.
Check check_tma_view(const TensorView& t, size_t elem_bytes) {
  if (t.empty()) return {};
  const int64_t elem = static_cast<int64_t>(elem_bytes);
  if (reinterpret_cast<uintptr_t>(t.ptr) % kTmaAlign != 0)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, std::string(t.name) + " is not " + std::to_string(kTmaAlign) + "-byte aligned");
  for (int d = 0; d < 3; ++d) {
    if (t.sizes[d] <= 1) continue;
    if (t.strides[d] == 0 || t.strides[d] % (kTmaAlign / elem) != 0 || t.strides[d] >= kMaxTmaStride / elem)
      return fail(EVOSDPA_ERROR_NOT_SUPPORTED, std::string(t.name) + " " + kDimNames[d] + " stride " +
                                                   std::to_string(t.strides[d]) + " is not a non-zero multiple of " +
                                                   std::to_string(kTmaAlign / elem) + " elements below 2^40 bytes (TMA)");
  }
  return {};
}

wgmma_sm90::Choice choice_for(const evosdpa_params_t& p, const DeviceInfo& dev) {
  return wgmma_sm90::choose_config(static_cast<int>(p.head_dim), p.batch * p.heads_q, p.seqlen_q, p.seqlen_k,
                                   p.causal != EVOSDPA_CAUSAL_NONE, dev.sm_count, p.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3,
                                   10 * dev.cc_major + dev.cc_minor, uses_score_mods(p));
}

FamilySupport supports(const evosdpa_params_t& p, const DeviceInfo& dev) {
  const std::string who = "wgmma_sm90: ";
  const auto refuse = [](std::string message) {
    return FamilySupport{fail(EVOSDPA_ERROR_NOT_SUPPORTED, std::move(message))};
  };
  if (dev.cc_major != 9) return refuse(who + "needs a Hopper GPU (compute capability 9.x)");
  const bool fp8 = p.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3;
  if (p.dtype != EVOSDPA_DTYPE_FLOAT16 && p.dtype != EVOSDPA_DTYPE_BFLOAT16 && !fp8)
    return refuse(who + "dtype " + std::to_string(static_cast<int>(p.dtype)) + " (fp16, bf16, FP8 E4M3)");
  // FP8 rows: padded batches of the call's lengths only (their registers have no room for per-sequence
  // ones, and packed queries leave through the threads' own stores, which their O staging does not have).
  if (const Check c = fp8 ? check_no_kv_cache(p) : check_no_page_table(p); !c.ok()) return refuse(who + c.message);
  if (fp8 && uses_varlen(p)) return refuse(who + "variable-length batches take fp16 or bf16 inputs");
  if (fp8 && uses_score_mods(p)) return refuse(who + "a sliding window or softcap takes fp16 or bf16 inputs");
  // ALiBi's kernels (score_mods.cuh) have it alone or with a mask tensor.
  if (uses_alibi(p) && (uses_window(p) || uses_softcap(p)))
    return refuse(who + "ALiBi with a sliding window or softcap (reference runs them together)");
  if (const Check c = check_fast_softcap(p, effective_scale(p)); !c.ok()) return refuse(who + c.message);
  // They preload the bias into S in raw score units, times log2(e) / scale_log2 (wgmma_mask.cuh,
  // wgmma_alibi.cuh): where that is infinite (a scale of 0 or a subnormal one), a zero bias would be NaN.
  if (uses_mask(p) || uses_alibi(p)) {
    const float scale_log2 = make_kernel_params(p).scale_log2;
    if (!std::isfinite(static_cast<float>(kLog2e) / scale_log2))
      return refuse(who + (uses_mask(p) ? "a mask tensor" : "ALiBi") +
                    " with a softmax_scale whose reciprocal is infinite (0, or below about 2e-39 in magnitude; "
                    "reference runs it)");
  }
  if (const Check c = check_tensor_row_alignment(mask_view(p), mask_elem_bytes(p), kTmaAlign); !c.ok())
    return refuse(who + c.message + " (TMA loads the mask; reference takes any alignment)");
  const wgmma_sm90::Choice choice = choice_for(p, dev);
  const int variant = choice.row;
  if (variant < 0)
    return refuse(who + "no tile configuration for head_dim " + std::to_string(p.head_dim) +
                  (fp8 ? " with FP8 (E4M3) inputs (64 and 128)" : ""));
  const long long smem = wgmma_sm90::kConfigs[variant].smem_bytes(static_cast<int>(mask_elem_bytes(p)));
  if (smem > dev.max_smem_per_block_optin)
    return refuse(who + "needs " + std::to_string(smem) + " bytes of shared memory per block, the device allows " +
                  std::to_string(dev.max_smem_per_block_optin));
  const auto views = tensors(p);  // q, k, v, o
  for (size_t i = 0; i < views.size(); ++i)  // O's elements are o_dtype's with FP8 inputs
    if (const Check c = check_tma_view(views[i], i == 3 ? output_elem_bytes(p) : input_elem_bytes(p)); !c.ok())
      return refuse(who + c.message);
  const int block_m = wgmma_sm90::kConfigs[variant].block_m();
  const __int128 blocks = static_cast<__int128>((p.seqlen_q + block_m - 1) / block_m) * p.batch * p.heads_q;
  if (blocks > kMaxGridX)
    return refuse(who + "batch * heads_q * ceil(seqlen_q / " + std::to_string(block_m) +
                  ") work items exceed 2^31-1");
  FamilySupport s{{}, choice.variant()};
  // Sequences of their own lengths on the persistent grid with more items than CTAs: items claimed from
  // a counter in the caller's workspace when there is one (a fixed deal otherwise; with at most one item
  // per CTA there is nothing to balance, and the counter's memset would only cost time).
  // (Not with score modifiers, whose kernels run the fixed deal alone: wgmma_sm90::kScoreModRow.)
  if (!fp8 && !uses_score_mods(p) && !wgmma_sm90::kConfigs[variant].split_keys && choice.splits == 1 &&
      blocks > dev.sm_count &&
      (uses_varlen(p) || p.seqused_k != nullptr)) {
    s.workspace_wanted = kCounterBytes;
    if (p.workspace != nullptr && p.workspace_size >= kCounterBytes) s.workspace_bytes = kCounterBytes;
  }
  return s;
}

// One CTA per SM (up to 214 KB of shared memory, 384 or 512 threads). With its CTAs on fewer than half
// the SMs, D = 64 runs faster on mma_sm80's small-grid variant, which spreads the rows over more SMs;
// D = 128 does not. Measured on an H100 under graph replay (docs/perf-log.md v8.4): (1,8,512,64), 32
// CTAs, 12.1 us here against 9.9; (1,8,1024,64) unsplit, 64 CTAs, 15.2 against 15.5; (1,8,512,128),
// 32 CTAs, 12.0 against 15.2.
// A call with score modifiers stays here: mma_sm80 takes them on its default rows only (score_mod_row),
// not on the small-grid variant this preference is about.
bool auto_prefers(const evosdpa_params_t& p, const DeviceInfo& dev) {
  if (uses_score_mods(p)) return true;
  const wgmma_sm90::Choice choice = choice_for(p, dev);
  if (choice.row < 0) return false;
  const long long block_m = wgmma_sm90::kConfigs[choice.row].block_m();
  const long long ctas = (p.seqlen_q + block_m - 1) / block_m * p.batch * p.heads_q * choice.splits;
  return p.head_dim != 64 || wgmma_sm90::kConfigs[choice.row].split_keys || 2 * ctas >= dev.sm_count;
}

// The backward pass (bwd/): TMA loads Q, K, V and dO; mma_sm80's pre- and post-passes move O, dO and dQ
// in 16-byte chunks and the kernel writes dK and dV in element pairs.
FamilySupport backward_supports(const evosdpa_params_t& p, const DeviceInfo& dev) {
  const std::string who = "wgmma_sm90 backward: ";
  const auto refuse = [](std::string message) {
    return FamilySupport{fail(EVOSDPA_ERROR_NOT_SUPPORTED, std::move(message))};
  };
  if (dev.cc_major != 9) return refuse(who + "needs a Hopper GPU (compute capability 9.x)");
  // validate_backward_params admits fp16 and bf16 only, the instantiations of bwd/inst/.
  const int variant = wgmma_sm90::bwd_tile_index(static_cast<int>(p.head_dim));
  if (variant < 0) return refuse(who + "no tile configuration for head_dim " + std::to_string(p.head_dim) + " (64, 128)");
  const long long smem = wgmma_sm90::kBwdTiles[variant].smem_bytes();
  if (smem > dev.max_smem_per_block_optin)
    return refuse(who + "needs " + std::to_string(smem) + " bytes of shared memory per block, the device allows " +
                  std::to_string(dev.max_smem_per_block_optin));
  const auto views = tensors(p);
  const auto grads = backward_tensors(p);
  for (const TensorView& t : {views[0], views[1], views[2], grads[0]})
    if (const Check c = check_tma_view(t, input_elem_bytes(p)); !c.ok()) return refuse(who + c.message);
  if (const Check c = check_backward_row_alignment(p, kTmaAlign); !c.ok()) return refuse(who + c.message);
  if (const Check c = check_backward_grid(p, wgmma_sm90::kBwdTiles[variant].block_n); !c.ok())
    return refuse(who + c.message);
  return {{}, variant};
}

// mma_sm80's workspace layout (D, the float32 dQ sums, the turn counters per query tile of tile_m rows).
size_t backward_workspace_bytes(const evosdpa_params_t& p, int variant) {
  return static_cast<size_t>(mma_sm80::bwd_workspace_bytes(p.batch * p.heads_q, p.seqlen_q, p.head_dim,
                                                            p.backward_mode != EVOSDPA_BACKWARD_FAST,
                                                            wgmma_sm90::kBwdTiles[variant].tile_m));
}

// "auto"'s backward on Hopper: faster than mma_sm80's at every point of the fa3 grid (H200, fp16, FAST:
// 1.31-1.84x; docs/perf-log.md v14).
const BackwardEntry kBackward = {backward_supports, backward_workspace_bytes, wgmma_sm90::launch_backward_variant};

}  // namespace

extern const KernelFamily kWgmmaSm90Family = {"wgmma_sm90", EVOSDPA_CUDA_ARCHS, supports, wgmma_sm90::launch_variant,
                                              wgmma_sm90::probe_image, auto_prefers, &kBackward};

}  // namespace evosdpa::detail
