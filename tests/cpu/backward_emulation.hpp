// A CPU model of a fused attention backward kernel (FlashAttention-2's: P recomputed from lse with exp2,
// dQ summed over 64-key blocks whose partial sums land in any order, dK and dV over 64-row query blocks and
// the heads of a group), into which known kernel bugs can be planted. The backward accuracy rule must
// accept the correct model and reject every planted bug (tests/cpu/test_backward_rule.cpp).
#pragma once

#include "host/backward_check.hpp"

namespace backward_emulation {

enum class Bug {
  None,
  DkScaleMissing,       // dK = dS^T Q without the softmax scale
  PUnnormalised,        // P = exp(S - rowmax) instead of exp(S - lse): the forward's unnormalised weights
  DeltaDropped,         // dS = P dP, the rowsum(dO * O) term left out
  LastKeyBlockSkipped,  // the key loop stops one 64-key block early: dQ misses it, its keys' dK = dV = 0
  DiagonalExcluded,     // causal mask off by one: each row's last visible key (the diagonal) masked
  DiagonalPlusOne,      // causal mask off by one the other way: each row sees one key past its limit
  GqaOneHead,           // dK and dV take only the first query head of each group, not the group's sum
  DsWrongType,          // dS converted to the other 16-bit type and its bits fed to the MMA as the dtype
                        // (the wrong instantiation of the conversion). Rounding dS to the other type's
                        // values is no bug to test for: fp16's are finer than bf16's within its range, and
                        // dS rounded to bf16 in an fp16 kernel moves dQ and dK by 2-3 roundings, about the
                        // tolerance a correct kernel needs, so no rule can reject it on every case.
};
const char* bug_name(Bug b);
inline constexpr Bug kBugs[] = {Bug::DkScaleMissing,      Bug::PUnnormalised,    Bug::DeltaDropped,
                                Bug::LastKeyBlockSkipped, Bug::DiagonalExcluded, Bug::DiagonalPlusOne,
                                Bug::GqaOneHead,          Bug::DsWrongType};

// Whether a bug changes the mathematical gradients of this shape at all, whatever the data (a mask bug
// on an unmasked case, a head bug without grouped heads, a dS bug when the scale is 0 ...).
bool can_change(Bug b, const evosdpa::host::Shape& s);

// The model in the dtype on the checked rows and keys, reading O and lse as stored (e.in), with `bug`.
evosdpa::host::Gradients run(const evosdpa::host::Shape& s, evosdpa_dtype_t dtype,
                             const evosdpa::host::BackwardExpected& e, Bug bug);

// The same model in float64 with no rounding but the bug's own: with Bug::None the float64 gradients
// (attention_backward_f64), otherwise the bug's exact effect on them.
evosdpa::host::GradientsOf<double> run_exact(const evosdpa::host::Shape& s, evosdpa_dtype_t dtype,
                                             const evosdpa::host::BackwardExpected& e, Bug bug);

}  // namespace backward_emulation
