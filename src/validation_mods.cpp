// The score modifiers' fields (evosdpa.h, "Sliding window and softcap"): their own rules, and the refusal
// of the families and passes that do not implement them.
#include <cmath>
#include <string>

#include "validation.hpp"

namespace evosdpa::detail {

bool uses_window(const evosdpa_params_t& p) { return p.sliding_window != 0; }
bool uses_softcap(const evosdpa_params_t& p) { return p.softcap != 0.f; }
bool uses_score_mods(const evosdpa_params_t& p) { return uses_window(p) || uses_softcap(p); }

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
  return {};
}

Check check_no_score_mods(const evosdpa_params_t& p) {
  if (uses_window(p))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                "a sliding window (sliding_window) is not supported (wgmma_sm90 and reference run it)");
  if (uses_softcap(p))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "a softcap is not supported (wgmma_sm90 and reference run it)");
  return {};
}

}  // namespace evosdpa::detail
