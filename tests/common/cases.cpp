#include "common/cases.hpp"

#include <sstream>

using evosdpa::host::Shape;

namespace test_cases {

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::BHSD: return "bhsd";
    case Layout::BSHD: return "bshd";
    case Layout::Padded: return "padded";
  }
  return "?";
}

Shape shape(int64_t b, int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d, evosdpa_causal_t c, double scale) {
  Shape s;
  s.batch = b, s.heads_q = hq, s.heads_kv = hkv, s.seqlen_q = lq, s.seqlen_k = lk, s.head_dim = d, s.causal = c;
  s.scale = scale;
  return s;
}

Shape with_mods(Shape s, int64_t window_left, int64_t window_right, double softcap) {
  s.sliding_window = window_left >= 0 || window_right >= 0;
  s.window_left = window_left;
  s.window_right = window_right;
  s.softcap = softcap;
  return s;
}

Shape with_mask(Shape s, evosdpa_mask_type_t type, bool batch, bool heads, bool rows) {
  s.mask_type = type;
  s.mask_batch = batch;
  s.mask_heads = heads;
  s.mask_rows = rows;
  return s;
}

Shape with_alibi(Shape s, bool per_batch) {
  s.alibi = true;
  s.alibi_batch = per_batch;
  return s;
}

namespace {
const char* causal_name(evosdpa_causal_t c) {
  return c == EVOSDPA_CAUSAL_NONE ? "full" : c == EVOSDPA_CAUSAL_TOP_LEFT ? "topleft" : "bottomright";
}
}  // namespace

std::string describe(const KCase& c) {
  std::ostringstream o;
  o << c.name << "_" << evosdpa::host::dtype_name(c.dtype) << "_b" << c.s.batch << "h" << c.s.heads_q << "x"
    << c.s.heads_kv << "_q" << c.s.seqlen_q << "k" << c.s.seqlen_k << "_d" << c.s.head_dim << "_"
    << causal_name(c.s.causal) << "_" << layout_name(c.layout);
  if (c.qk_sigma != 1.0) o << "_sigma" << static_cast<int>(c.qk_sigma);
  if (!std::isnan(c.s.scale))
    o << "_scale" << (c.s.scale < 0 ? "neg" : "") << static_cast<int>(std::abs(c.s.scale) * 100);
  if (!c.lse) o << "_nolse";
  const auto bound = [](int64_t w) { return w < 0 ? std::string("inf") : std::to_string(w); };
  if (c.s.sliding_window) o << "_window" << bound(c.s.window_left) << "_" << bound(c.s.window_right);
  if (c.s.softcap > 0) o << "_softcap" << static_cast<int>(c.s.softcap);
  if (c.s.mask_type != EVOSDPA_MASK_NONE)
    o << (c.s.mask_type == EVOSDPA_MASK_BOOL ? "_boolmask" : "_biasmask") << (c.s.mask_batch ? "B" : "1")
      << (c.s.mask_heads ? "H" : "1") << (c.s.mask_rows ? "Q" : "1") << "K";
  if (c.s.alibi) o << (c.s.alibi_batch ? "_alibiBH" : "_alibiH");
  if (c.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3)
    o << "_o" << evosdpa::host::dtype_name(c.fp8.o_dtype) << (c.fp8.per_head ? "_perhead" : "_pertensor");
  return o.str();
}

void PrintTo(const KCase& c, std::ostream* os) { *os << describe(c); }

std::vector<KCase> all_cases() {
  std::vector<KCase> cases;
  const auto F = EVOSDPA_CAUSAL_NONE, TL = EVOSDPA_CAUSAL_TOP_LEFT, BR = EVOSDPA_CAUSAL_BOTTOM_RIGHT;
  for (auto dt : {EVOSDPA_DTYPE_FLOAT16, EVOSDPA_DTYPE_BFLOAT16}) {
    // The five acceptance shapes (B, H, L, D, causal).
    cases.push_back({"accept", shape(1, 8, 8, 512, 512, 64, F), dt});
    cases.push_back({"accept", shape(1, 8, 8, 512, 512, 64, TL), dt});
    cases.push_back({"accept", shape(2, 8, 8, 2048, 2048, 64, F), dt, Layout::BHSD, 1.0, true, 7});
    cases.push_back({"accept", shape(2, 8, 8, 2048, 2048, 64, TL), dt, Layout::BHSD, 1.0, true, 7});
    cases.push_back({"accept", shape(2, 8, 8, 2048, 2048, 128, F), dt, Layout::BHSD, 1.0, true, 7});
    // Odd lengths, both head dims, with and without the causal mask.
    for (int64_t L : {1, 17, 127, 129, 1000, 4097})
      for (int64_t d : {64, 128})
        for (auto c : {F, TL})
          cases.push_back({"odd", shape(1, 2, 2, L, L, d, c), dt, Layout::BHSD, 1.0, true, L > 1000 ? 13 : 1});
    // Lq != Lk both ways, each causal alignment.
    for (auto [lq, lk] : {std::pair{100, 300}, {300, 100}, {1, 129}, {129, 1}, {64, 1000}, {1000, 64}})
      for (auto c : {F, TL, BR})
        for (int64_t d : {64, 128}) cases.push_back({"lqlk", shape(1, 2, 2, lq, lk, d, c), dt});
    // Strided layouts.
    for (auto layout : {Layout::BSHD, Layout::Padded})
      for (int64_t d : {64, 128})
        for (auto c : {F, BR}) cases.push_back({"layout", shape(2, 4, 4, 333, 271, d, c), dt, layout});
    // Grouped-query heads.
    cases.push_back({"gqa", shape(2, 8, 2, 257, 257, 64, BR), dt});
    cases.push_back({"gqa", shape(1, 6, 3, 130, 190, 128, F), dt, Layout::BSHD});
    // Large magnitudes: scores in the tens to hundreds, so the running max moves and rescales.
    for (int64_t d : {64, 128}) {
      cases.push_back({"large", shape(1, 2, 2, 300, 700, d, F), dt, Layout::BHSD, 6.0});
      cases.push_back({"large", shape(1, 2, 2, 700, 300, d, TL), dt, Layout::BHSD, 6.0});
    }
    // Grids large enough for the default tile variant (small ones above take the small-grid variant),
    // with tails and each causal alignment.
    for (int64_t d : {64, 128}) {
      cases.push_back({"biggrid", shape(4, 16, 16, 1000, 777, d, BR), dt, Layout::BHSD, 1.0, true, 7});
      cases.push_back({"biggrid", shape(4, 16, 8, 777, 1000, d, TL), dt, Layout::BSHD, 1.0, true, 7});
      cases.push_back({"biggrid", shape(8, 16, 16, 333, 333, d, F), dt, Layout::Padded, 1.0, true, 5});
      // Non-causal over two to three full rounds of 132 CTAs with a short last block, which the persistent
      // grid's order rotates among the CTAs (wgmma_order.hpp): 6 blocks of 192 rows, 8 of 128.
      cases.push_back({"biggrid", shape(4, 16, 16, 1000, 777, d, F), dt, Layout::BSHD, 1.0, true, 7});
    }
    // Explicit scales: a negative one, and 0 (uniform weights: O is the mean of the visible V rows);
    // Lk = 0; no lse requested.
    cases.push_back({"scale", shape(1, 2, 2, 200, 333, 64, F, 0.3), dt});
    cases.push_back({"scale", shape(1, 2, 2, 200, 333, 128, TL, -0.2), dt});
    cases.push_back({"scale", shape(1, 2, 2, 150, 170, 64, BR, 0.0), dt});
    cases.push_back({"emptykv", shape(2, 2, 2, 37, 0, 64, F), dt});
    cases.push_back({"emptykv", shape(1, 2, 2, 70, 0, 128, BR), dt});
    cases.push_back({"nolse", shape(1, 3, 3, 150, 150, 128, TL), dt, Layout::BHSD, 1.0, false});
  }
  // FP8 (E4M3) inputs: the same kinds of case, fewer of each, with fp16 and bf16 outputs and descales
  // per tensor and per (batch, K/V head).
  {
    const auto dt = EVOSDPA_DTYPE_FLOAT8_E4M3;
    const evosdpa::host::Fp8Setup h{EVOSDPA_DTYPE_FLOAT16, false}, b{EVOSDPA_DTYPE_BFLOAT16, false},
        hh{EVOSDPA_DTYPE_FLOAT16, true}, bh{EVOSDPA_DTYPE_BFLOAT16, true};
    const auto L = Layout::BHSD;
    cases.push_back({"accept", shape(1, 8, 8, 512, 512, 64, F), dt, L, 1.0, true, 1, h});
    cases.push_back({"accept", shape(1, 8, 8, 512, 512, 64, TL), dt, L, 1.0, true, 1, b});
    cases.push_back({"accept", shape(2, 8, 8, 2048, 2048, 128, F), dt, L, 1.0, true, 7, hh});
    for (int64_t len : {1, 17, 129, 1000})
      for (int64_t d : {64, 128})
        for (auto c : {F, TL}) cases.push_back({"odd", shape(1, 2, 2, len, len, d, c), dt, L, 1.0, true, 1, d == 64 ? h : b});
    for (auto [lq, lk] : {std::pair{100, 300}, {300, 100}, {64, 1000}})
      for (auto c : {F, TL, BR}) cases.push_back({"lqlk", shape(1, 2, 2, lq, lk, 64, c), dt, L, 1.0, true, 1, bh});
    for (auto layout : {Layout::BSHD, Layout::Padded})
      for (int64_t d : {64, 128}) cases.push_back({"layout", shape(2, 4, 4, 333, 271, d, BR), dt, layout, 1.0, true, 1, hh});
    cases.push_back({"gqa", shape(2, 8, 2, 257, 257, 64, BR), dt, L, 1.0, true, 1, bh});
    cases.push_back({"gqa", shape(1, 6, 3, 130, 190, 128, F), dt, Layout::BSHD, 1.0, true, 1, hh});
    for (int64_t d : {64, 128}) cases.push_back({"large", shape(1, 2, 2, 300, 700, d, F), dt, L, 6.0, true, 1, d == 64 ? h : bh});
    cases.push_back({"biggrid", shape(4, 16, 8, 777, 1000, 128, TL), dt, Layout::BSHD, 1.0, true, 7, bh});
    cases.push_back({"biggrid", shape(4, 16, 4, 1000, 777, 64, BR), dt, L, 1.0, true, 7, h});
    cases.push_back({"scale", shape(1, 2, 2, 200, 333, 64, F, 0.3), dt, L, 1.0, true, 1, h});
    cases.push_back({"scale", shape(1, 2, 2, 200, 333, 128, TL, -0.2), dt, L, 1.0, true, 1, b});
    cases.push_back({"scale", shape(1, 2, 2, 150, 170, 64, BR, 0.0), dt, L, 1.0, true, 1, hh});
    cases.push_back({"emptykv", shape(2, 2, 2, 37, 0, 64, F), dt, L, 1.0, true, 1, h});
    cases.push_back({"nolse", shape(1, 3, 3, 150, 150, 128, TL), dt, L, 1.0, false, 1, b});
  }
  // Large: many blocks and tiles; sampled rows.
  cases.push_back({"big", shape(4, 16, 16, 4096, 4096, 128, F), EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, 1.0, true, 61});
  cases.push_back({"big", shape(4, 32, 32, 4096, 4096, 64, TL), EVOSDPA_DTYPE_BFLOAT16, Layout::BHSD, 1.0, true, 61});
  return cases;
}

std::vector<KCase> mask_cases() {
  std::vector<KCase> cases;
  const auto F = EVOSDPA_CAUSAL_NONE, TL = EVOSDPA_CAUSAL_TOP_LEFT, BR = EVOSDPA_CAUSAL_BOTTOM_RIGHT;
  const auto L = Layout::BHSD;
  for (auto dt : {EVOSDPA_DTYPE_FLOAT16, EVOSDPA_DTYPE_BFLOAT16})
    for (int64_t d : {64, 128}) {
      // Mistral's window (causal, keys before the diagonal only): odd, 0 (the diagonal key alone), 1, and
      // larger than the sequence.
      cases.push_back({"window", with_mods(shape(1, 2, 2, 1000, 1000, d, TL), 37, -1), dt});
      cases.push_back({"window", with_mods(shape(2, 4, 2, 777, 777, d, BR), 0, -1), dt});
      cases.push_back({"window", with_mods(shape(1, 3, 3, 129, 129, d, TL), 1, -1), dt});
      cases.push_back({"window", with_mods(shape(1, 2, 2, 513, 513, d, TL), 5000, -1), dt});
      // Without a causal mask: both sides (bottom-right diagonal, Lq < Lk and Lq > Lk: the first rows of
      // the latter see no key), and each side alone.
      cases.push_back({"window", with_mods(shape(1, 2, 2, 300, 700, d, F), 100, 50), dt});
      cases.push_back({"window", with_mods(shape(1, 2, 2, 700, 300, d, F), 1, 1), dt});
      cases.push_back({"window", with_mods(shape(1, 2, 2, 400, 400, d, F), -1, 3), dt});
      cases.push_back({"window", with_mods(shape(1, 2, 2, 250, 1000, d, F), 17, -1), dt, Layout::BSHD});
      // Softcaps with scores in the tens (qk_sigma 6: capped hard), and a negative scale.
      cases.push_back({"softcap", with_mods(shape(1, 2, 2, 300, 700, d, F), -1, -1, 30), dt, L, 6.0});
      cases.push_back({"softcap", with_mods(shape(2, 4, 4, 513, 513, d, TL), -1, -1, 50), dt, L, 6.0});
      cases.push_back({"softcap", with_mods(shape(1, 2, 2, 200, 333, d, BR, -0.2), -1, -1, 30), dt, L, 6.0});
      // The largest softcap the fast kernels take (kMaxFastSoftcap: their tanh errs by ~1.7e-7 c), scores
      // in the hundreds.
      cases.push_back({"softcap", with_mods(shape(1, 2, 2, 300, 500, d, F), -1, -1, 2048), dt, L, 20.0});
      // Both, as Gemma 2's local layers (grouped heads, BSHD); and grids of several items per CTA.
      cases.push_back({"both", with_mods(shape(2, 8, 4, 1000, 1000, d, BR), 255, -1, 50), dt, Layout::BSHD, 4.0});
      // (Sampled rows: the CPU's float64 work per case, and the accuracy rule's per-bug passes over it.)
      cases.push_back({"biggrid", with_mods(shape(4, 16, 16, 1500, 1500, d, TL), 300, -1), dt, Layout::Padded, 1.0,
                       true, 31});
      cases.push_back({"biggrid", with_mods(shape(4, 16, 8, 1100, 1300, d, F), 200, 200, 30), dt, L, 3.0, true, 29});
      // Mask tensors: full [B, H, Lq, Lk] (GQA, an odd Lk), per batch [B, 1, Lq, Lk] and shared [1, 1, Lq, Lk]
      // with each causal mask (Lq > Lk: rows that see no key), a key padding mask [B, 1, 1, Lk] (batch
      // entry 1 sees no key), a negative scale, a zero one (an additive mask alone decides), and a grid of
      // several items per CTA.
      const auto BOOL = EVOSDPA_MASK_BOOL, ADD = EVOSDPA_MASK_ADDITIVE;
      cases.push_back({"mask", with_mask(shape(2, 4, 2, 333, 517, d, F), BOOL), dt});
      cases.push_back({"mask", with_mask(shape(2, 4, 4, 300, 300, d, TL), ADD, true, false), dt, L, 2.0});
      cases.push_back({"mask", with_mask(shape(1, 2, 2, 200, 700, d, BR), ADD, false, false), dt, Layout::BSHD});
      cases.push_back({"mask", with_mask(shape(1, 2, 2, 700, 300, d, BR), BOOL, false, true), dt});
      cases.push_back({"keypad", with_mask(shape(3, 2, 2, 257, 1000, d, F), BOOL, true, false, false), dt});
      cases.push_back({"mask", with_mask(shape(1, 2, 2, 129, 129, d, F, -0.2), ADD), dt, Layout::Padded});
      cases.push_back({"mask", with_mask(shape(2, 2, 1, 150, 461, d, TL, 0.0), ADD, true, false), dt});
      cases.push_back({"biggrid", with_mask(shape(4, 16, 16, 1100, 1100, d, TL), ADD, true, false), dt, L, 1.0, true, 29});
      // Mask tensors with a window: a padded batch under Mistral's window (key padding, grouped heads), a
      // per-batch bias with a two-sided window (Lq < Lk, BSHD), a full boolean mask with the diagonal key
      // alone (Lq > Lk: rows that see no key); and with a softcap too, as Gemma 2's local layers on a padded
      // batch.
      cases.push_back({"maskwin", with_mods(with_mask(shape(3, 4, 2, 600, 600, d, TL), BOOL, true, false, false), 37, -1, 0),
                       dt});
      cases.push_back({"maskwin", with_mods(with_mask(shape(2, 2, 2, 300, 700, d, F), ADD, true, false), 100, 50, 0), dt,
                       Layout::BSHD, 2.0});
      cases.push_back({"maskwin", with_mods(with_mask(shape(1, 2, 2, 700, 300, d, BR), BOOL), 0, -1, 0), dt});
      cases.push_back({"maskcap", with_mods(with_mask(shape(2, 8, 4, 1000, 1000, d, BR), BOOL, true, false, false), 255, -1, 50),
                       dt, Layout::BSHD, 4.0});
      cases.push_back({"maskcap", with_mods(with_mask(shape(1, 2, 2, 200, 333, d, F), ADD, true, false), -1, -1, 30), dt, L,
                       6.0});
      // ALiBi: GQA without a causal mask (bottom-right diagonal, Lq < Lk, head 4's slope negative), per
      // batch entry with a top-left causal mask (odd), bottom-right with Lq > Lk (rows that see no key),
      // BSHD with a negative scale, and a grid of several items per CTA.
      cases.push_back({"alibi", with_alibi(shape(2, 8, 2, 300, 700, d, F)), dt});
      cases.push_back({"alibi", with_alibi(shape(3, 5, 5, 333, 333, d, TL), true), dt, L, 2.0});
      cases.push_back({"alibi", with_alibi(shape(1, 4, 4, 700, 300, d, BR)), dt});
      cases.push_back({"alibi", with_alibi(shape(1, 2, 2, 129, 200, d, F, -0.2), true), dt, Layout::BSHD});
      // ALiBi with a mask tensor: BLOOM's padded batch (key padding, causal), a per-batch bias with Lq < Lk
      // (BSHD, grouped heads), a full boolean mask with a negative scale.
      cases.push_back({"alibimask", with_alibi(with_mask(shape(3, 4, 4, 500, 500, d, TL), BOOL, true, false, false)), dt});
      cases.push_back({"alibimask", with_alibi(with_mask(shape(2, 4, 2, 200, 333, d, BR), ADD, true, false), true), dt,
                       Layout::BSHD, 2.0});
      cases.push_back({"alibimask", with_alibi(with_mask(shape(1, 2, 2, 129, 200, d, F, -0.2), BOOL), true), dt});
      cases.push_back({"biggrid", with_alibi(shape(4, 16, 16, 1100, 1100, d, BR), true), dt, Layout::Padded, 1.0, true, 29});
    }
  return cases;
}

}  // namespace test_cases
