// A CPU model of a fused attention kernel (FlashAttention's online softmax over 64-key tiles, with the
// rounding points of the GPU kernels), into which known kernel bugs can be planted. The accuracy rule
// must accept the correct model and reject every planted bug.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/accuracy_check.hpp"

namespace emulation {

enum class Bug {
  None,
  HalfRescale,   // online-softmax rescale alpha = 2^((m_old - m_new) / 2) instead of 2^(m_old - m_new)
  Scale2Pct,     // softmax scale 2% too large
  RowMaskOffBy1, // one query row's mask limit off by one (sees one key too many, or one too few)
  KeyDropped,    // one key skipped by every row
  MaskShifted,   // the mask tensor and ALiBi read one key over (key j + 1's bias for key j; the last key's j - 1)
  AlibiWrongHead,  // ALiBi with the next query head's slope (head (h + 1) % heads_q)
};
const char* bug_name(Bug b);
inline constexpr Bug kBugs[] = {Bug::HalfRescale, Bug::Scale2Pct, Bug::RowMaskOffBy1, Bug::KeyDropped,
                                Bug::MaskShifted, Bug::AlibiWrongHead};

// Where a bug sits: the query row (b * Hq + h) * Lq + i of RowMaskOffBy1 and the key its off-by-one shows
// or hides, the key of KeyDropped.
struct Site {
  int64_t row = -1;
  int64_t key = -1;
  double effect = 0;  // max |O_bug - O| over the checked rows, in float64
};

// Plant the one-key bugs where they change the exact answer most among the checked rows (the rows a
// kernel is judged on), so the question is whether the rule sees a bug whose effect is there to be
// seen: `row`, `key` and its effect for RowMaskOffBy1, `key` and its effect for KeyDropped. The mask bug
// flips a row's usual limit (fused_emulation.cpp); where that changes no checked row by more than
// `unseen` (an effect the rule is not bound to see), it flips the key at either edge of a row's band,
// shown or hidden, that changes one most.
struct Sites {
  Site row_mask, key_dropped;
  Site for_bug(Bug b) const { return b == Bug::RowMaskOffBy1 ? row_mask : b == Bug::KeyDropped ? key_dropped : Site{}; }
};
Sites choose_sites(const evosdpa::host::Shape& s, const evosdpa::host::Expected& e, double unseen);

struct Output {
  std::vector<float> o;    // BHSD, dtype-rounded; unchecked rows 0
  std::vector<float> lse;  // [B, Hq, Lq]; unchecked rows 0
};

// The fused kernel model on the checked rows, with `bug` planted at `site`.
Output run(const evosdpa::host::Shape& s, evosdpa_dtype_t dtype, const evosdpa::host::Expected& e, Bug bug,
           Site site);

}  // namespace emulation
