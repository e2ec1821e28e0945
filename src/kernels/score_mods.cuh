// Score modifiers as compile-time features of a kernel (evosdpa.h, "Sliding window and softcap", "Mask
// tensors", "ALiBi"): a kernel instantiated without one carries no code and no branch for it in its loops.
#pragma once

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"

namespace evosdpa::detail {

// What a kernel does with a mask tensor (evosdpa.h, "Mask tensors"): nothing, drop the scores whose
// byte is 0, or add the inputs'-dtype bias to them.
enum class MaskKind { kNone, kBool, kAdditive };

template <bool kWindowOn, bool kSoftcapOn, MaskKind kMaskKind = MaskKind::kNone, bool kAlibiOn = false>
struct ScoreMods {
  // Sliding window: a row sees keys diagonal - window_left .. diagonal + window_right (KernelParams);
  // work items skip the tiles before their first row's window, and the window's edges are masked.
  static constexpr bool kWindow = kWindowOn;
  // Softcap: every scaled score s becomes c * tanh(s / c) before the masks and the softmax.
  static constexpr bool kSoftcap = kSoftcapOn;
  // Mask tensor: each tile's elements applied to the scaled (or softcapped) scores, the causal/window/
  // length masks after; with a window, a softcap or both.
  static constexpr MaskKind kMask = kMaskKind;
  // ALiBi: -slope * |diagonal - key| added to each scaled score, before a mask tensor's element; alone or
  // with a mask tensor (BLOOM's padded batches), not with a window or softcap.
  static constexpr bool kAlibi = kAlibiOn;
  static_assert(!kAlibi || (!kWindow && !kSoftcap), "ALiBi's kernels have no window or softcap");
};
using NoMods = ScoreMods<false, false>;

// Whether the call asks for any of them: a kernel without them must never run it (its result would
// ignore them).
inline bool has_score_mods(const KernelParams& p) {
  return p.sliding_window || p.softcap > 0.f || p.mask != nullptr || p.alibi_slopes != nullptr;
}

// Whether with_score_mods has a kernel for the call's combination: ALiBi comes alone or with a mask tensor
// (the families' supports()). The launchers return cudaErrorInvalidValue for the others, which
// with_score_mods would run without their window or softcap.
inline bool score_mods_instantiated(const KernelParams& p) {
  return p.alibi_slopes == nullptr || (!p.sliding_window && !(p.softcap > 0.f));
}

// Runs f(ScoreMods<...>{}) for the features the call asks for (p.sliding_window, p.softcap, p.mask_type,
// p.alibi_slopes): ALiBi alone or with a mask tensor (score_mods_instantiated), any combination of the others.
template <typename F>
decltype(auto) with_score_mods(const KernelParams& p, F&& f) {
  if (p.alibi_slopes != nullptr) {
    if (p.mask_type == EVOSDPA_MASK_BOOL) return f(ScoreMods<false, false, MaskKind::kBool, true>{});
    if (p.mask_type == EVOSDPA_MASK_ADDITIVE) return f(ScoreMods<false, false, MaskKind::kAdditive, true>{});
    return f(ScoreMods<false, false, MaskKind::kNone, true>{});
  }
  const auto windowed = [&](auto mask) -> decltype(auto) {
    constexpr MaskKind kMask = decltype(mask)::kMask;
    if (p.softcap > 0.f) return p.sliding_window ? f(ScoreMods<true, true, kMask>{}) : f(ScoreMods<false, true, kMask>{});
    return p.sliding_window ? f(ScoreMods<true, false, kMask>{}) : f(ScoreMods<false, false, kMask>{});
  };
  if (p.mask_type == EVOSDPA_MASK_BOOL) return windowed(ScoreMods<false, false, MaskKind::kBool>{});
  if (p.mask_type == EVOSDPA_MASK_ADDITIVE) return windowed(ScoreMods<false, false, MaskKind::kAdditive>{});
  return windowed(NoMods{});
}

// The keys query row i of a sequence (diagonal at i + s.causal_offset) may see under the causal mask
// and, with Mods::kWindow, the window: first .. last (an empty range when last < first). Window bounds
// are at most kNoWindowBound, so nothing overflows int.
template <typename Mods>
__device__ __forceinline__ int first_key(const KernelParams& p, int diagonal) {
  if constexpr (Mods::kWindow) return max(0, diagonal - p.window_left);
  return 0;
}
template <typename Mods>
__device__ __forceinline__ int last_key(const KernelParams& p, int len_k, int diagonal) {
  int last = len_k - 1;
  if (p.causal) last = min(last, diagonal);
  if constexpr (Mods::kWindow) last = min(last, diagonal + p.window_right);
  return last;
}

// A softcapped score in the log2 domain from a raw one (q.k): c log2(e) tanh(raw * scale / c), with
// tanh(y) = 1 - 2 / (2^(2 y log2(e)) + 1): one exp2 and one reciprocal (MUFU), within ~1e-6 c of the exact
// value (tanh.approx.f32's 2^-11 relative error would move P by up to ~1% at c = 50, past the 16-bit
// rule). in = 2 scale log2(e) / c, out = c log2(e) (softcap_factors). Saturates to +-out, keeps NaN.
__device__ __forceinline__ float softcap_log2(float raw, float in, float out) {
  return fmaf(-2.f * out, fast_rcp(fast_exp2(raw * in) + 1.f), out);
}
struct SoftcapFactors {
  float in, out;
};
__device__ __forceinline__ SoftcapFactors softcap_factors(const KernelParams& p, float scale_log2) {
  return {2.f * scale_log2 / p.softcap, p.softcap * 1.4426950408889634f};
}

}  // namespace evosdpa::detail
