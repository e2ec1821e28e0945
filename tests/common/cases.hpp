// The shape set every kernel is checked on (tests/gpu) and that the accuracy rule is proven against
// (tests/cpu/test_accuracy_rule.cpp): one list, so the rule is shown to catch bugs on exactly the cases
// the kernels are judged on.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "host/host_tensor.hpp"

namespace test_cases {

// BHSD and BSHD are contiguous; Padded is BHSD with 16 spare elements after every row and 64 after every
// head, so no stride is a product of sizes and writes past a row would land in the padding.
enum class Layout { BHSD, BSHD, Padded };
const char* layout_name(Layout l);

struct KCase {
  std::string name;
  evosdpa::host::Shape s;
  evosdpa_dtype_t dtype = EVOSDPA_DTYPE_FLOAT16;
  Layout layout = Layout::BHSD;
  double qk_sigma = 1.0;
  bool lse = true;
  int64_t row_step = 1;  // check every row_step-th query row against the CPU (all rows must be finite)
  evosdpa::host::Fp8Setup fp8 = {};  // FP8 inputs: output type and descale granularity
};

evosdpa::host::Shape shape(int64_t b, int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d,
                           evosdpa_causal_t c, double scale = std::numeric_limits<double>::quiet_NaN());

// `s` with a sliding window (bounds in keys, -1 for none; both -1 with softcap > 0: no window) and a softcap
// (0: none).
evosdpa::host::Shape with_mods(evosdpa::host::Shape s, int64_t window_left, int64_t window_right, double softcap = 0);

// `s` with a mask tensor of `type`, with or without its own batch, head and query-row dimensions (a key
// padding mask has the batch only).
evosdpa::host::Shape with_mask(evosdpa::host::Shape s, evosdpa_mask_type_t type, bool batch = true, bool heads = true,
                               bool rows = true);

// `s` with ALiBi slopes, per batch entry (`per_batch`) or shared by the batch.
evosdpa::host::Shape with_alibi(evosdpa::host::Shape s, bool per_batch = false);

// A unique, test-name-safe description of a case.
std::string describe(const KCase& c);

std::vector<KCase> all_cases();
// Sliding windows (sizes 0, 1, odd, larger than the sequence; each side alone and both; with each causal
// alignment and none) and softcaps (30, 50, with scores large enough to be capped), alone and together,
// 16-bit inputs: the cases of the kernels that have them (evosdpa.h, "Sliding window and softcap"). And
// mask tensors (evosdpa.h, "Mask tensors"): boolean and additive, each dimension broadcast or not (a key
// padding mask among them), rows and a batch entry that see no key, with each causal mask, GQA, BSHD.
// And ALiBi (evosdpa.h, "ALiBi"): slopes per head or per batch entry, each diagonal, a negative slope.
std::vector<KCase> mask_cases();

// GoogleTest prints a parameter with this (instead of its bytes).
void PrintTo(const KCase& c, std::ostream* os);

}  // namespace test_cases
