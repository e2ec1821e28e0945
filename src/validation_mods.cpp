// The score modifiers' fields (evosdpa.h, "Sliding window and softcap", "Mask tensors", "ALiBi"): their own rules,
// and the refusal of the families and passes that do not implement them.
#include <cmath>
#include <limits>
#include <string>

#include "validation.hpp"

namespace evosdpa::detail {

bool uses_window(const evosdpa_params_t& p) { return p.sliding_window != 0; }
bool uses_softcap(const evosdpa_params_t& p) { return p.softcap != 0.f; }
bool uses_mask(const evosdpa_params_t& p) { return p.mask != nullptr || p.mask_type != EVOSDPA_MASK_NONE; }
bool uses_alibi(const evosdpa_params_t& p) { return p.alibi_slopes != nullptr; }
bool uses_score_mods(const evosdpa_params_t& p) {
  return uses_window(p) || uses_softcap(p) || uses_mask(p) || uses_alibi(p);
}

size_t mask_elem_bytes(const evosdpa_params_t& p) {
  switch (p.mask_type) {
    case EVOSDPA_MASK_BOOL: return 1;
    case EVOSDPA_MASK_ADDITIVE: return input_elem_bytes(p);
    default: return 0;
  }
}

TensorView mask_view(const evosdpa_params_t& p) {
  if (p.mask_type == EVOSDPA_MASK_NONE) return {"mask", nullptr, {0, 0, 0, 0}, {0, 0, 0, 1}};
  return {"mask",
          p.mask,
          {p.batch, p.heads_q, p.seqlen_q, p.seqlen_k},
          {p.mask_batch_stride, p.mask_head_stride, p.mask_seq_stride, 1}};
}

TensorView alibi_view(const evosdpa_params_t& p) {
  if (!uses_alibi(p)) return {"alibi_slopes", nullptr, {0, 0, 0, 0}, {0, 0, 0, 1}};
  return {"alibi_slopes", p.alibi_slopes, {p.batch, 1, 1, p.heads_q}, {p.alibi_batch_stride, 0, 0, 1}};
}

namespace {

Check check_alibi_fields(const evosdpa_params_t& p) {
  if (!uses_alibi(p)) {
    if (p.alibi_batch_stride != 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "alibi_batch_stride is set without alibi_slopes");
    return {};
  }
  if (p.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "ALiBi (alibi_slopes) takes fp16 or bf16 inputs, not FP8");
  return check_tensor(alibi_view(p), sizeof(float));
}

Check check_mask_fields(const evosdpa_params_t& p) {
  if (p.mask_type != EVOSDPA_MASK_NONE && p.mask_type != EVOSDPA_MASK_BOOL && p.mask_type != EVOSDPA_MASK_ADDITIVE)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "mask_type " + std::to_string(static_cast<int>(p.mask_type)) +
                                                    " is not an evosdpa_mask_type_t value (0 none, 1 bool, 2 additive)");
  if (p.mask_type == EVOSDPA_MASK_NONE) {
    if (p.mask != nullptr)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                  "mask is set without a mask_type (EVOSDPA_MASK_BOOL or EVOSDPA_MASK_ADDITIVE)");
    if (p.mask_batch_stride != 0 || p.mask_head_stride != 0 || p.mask_seq_stride != 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "mask strides are set without a mask");
    return {};
  }
  if (p.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "a mask tensor takes fp16 or bf16 inputs, not FP8");
  if (p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr || p.seqused_k != nullptr || p.page_table != nullptr)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "a mask tensor is not supported with cu_seqlens_q/k, seqused_k or a "
                                             "page_table (sequences of their own lengths need no padding mask)");
  return check_tensor(mask_view(p), mask_elem_bytes(p));
}

}  // namespace

Check check_score_mod_fields(const evosdpa_params_t& p) {
  if (p.sliding_window != 0 && p.sliding_window != 1)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                "sliding_window " + std::to_string(p.sliding_window) + " is neither 0 (none) nor 1 (window_left, "
                "window_right apply)");
  for (const auto& [name, value] : {std::pair{"window_left", p.window_left}, std::pair{"window_right", p.window_right}}) {
    if (p.sliding_window == 0 && value != 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(name) + " is " + std::to_string(value) +
                                                      " without sliding_window (set sliding_window = 1 for a window)");
    if (value < -1)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(name) + " is " + std::to_string(value) +
                                                      ": a window bound is >= 0 keys, or -1 for none");
  }
  if (!std::isfinite(p.softcap) || p.softcap < 0.f)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "softcap " + std::to_string(p.softcap) +
                                                    " is not a finite value >= 0 (0: none; c > 0: c * tanh(s / c))");
  if (Check c = check_mask_fields(p); !c.ok()) return c;
  return check_alibi_fields(p);
}

Check check_no_score_mods(const evosdpa_params_t& p) {
  if (uses_window(p))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                "a sliding window (sliding_window) is not supported (wgmma_sm90, mma_sm80 and reference run it)");
  if (uses_softcap(p))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "a softcap is not supported (wgmma_sm90, mma_sm80 and reference run it)");
  if (uses_mask(p))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "a mask tensor (mask) is not supported (wgmma_sm90, mma_sm80 and reference run it)");
  if (uses_alibi(p))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "ALiBi (alibi_slopes) is not supported (wgmma_sm90, mma_sm80 and reference run it)");
  return {};
}

Check check_fast_softcap(const evosdpa_params_t& p, float scale) {
  if (!uses_softcap(p)) return {};
  if (p.softcap > kMaxFastSoftcap)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                "a softcap above " + std::to_string(static_cast<int>(kMaxFastSoftcap)) + " (" +
                    std::to_string(p.softcap) + "): this kernel's tanh errs by ~1.7e-7 * softcap on the scores "
                    "(reference runs it exactly)");
  const double factor = 2.0 * std::fabs(static_cast<double>(scale)) * kLog2e / p.softcap;
  if (!(factor <= std::numeric_limits<float>::max()))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "a softcap of " + std::to_string(p.softcap) +
                                                 " so small against softmax_scale that 2 * scale * log2(e) / "
                                                 "softcap overflows float (reference runs it)");
  return {};
}

}  // namespace evosdpa::detail
