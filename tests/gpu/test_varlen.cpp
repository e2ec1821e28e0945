// Variable-length (packed) batches (evosdpa.h, "Variable-length batches") against float64 per sequence:
// lengths 0, 1, odd and long ones in one batch, queries and keys of different lengths per sequence, the
// three causal modes per sequence, packed queries against padded keys and the reverse, the head-major
// packed layout, seqused_k with packed keys and with padded ones (a chunk of prefill against a cache),
// many short sequences, grouped heads, D 64 and 128, fp16 and bf16. Outputs poisoned before each run;
// every case on wgmma_sm90 (Hopper), mma_sm80, the reference kernel and "auto", and on wgmma_sm90 and
// "auto" with a workspace for the Hopper kernel's work counter (bitwise its fixed deal's). Then: offsets out of
// range (clamped, never read or written outside the tensors: run under compute-sanitizer by
// scripts/gpu-check.sh), 100 runs bitwise identical, and "auto"'s choice.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu_harness.hpp"
#include "host/accuracy_check.hpp"

using namespace evosdpa::host;
using namespace gpu_test;

namespace {

struct VarlenCase {
  std::string name;
  evosdpa_dtype_t dtype;
  int64_t head_dim, heads_q, heads_kv;
  std::vector<int> lens_q;  // queries per sequence
  std::vector<int> lens_k;  // keys per sequence (empty: lens_q)
  bool packed_q, packed_k;  // padded: [B, longest, H, D] with the rows past a sequence's end unused
  evosdpa_causal_t causal;
  bool head_major = false;   // packed [H, total, D] (else [total, H, D])
  std::vector<int> seqused;  // seqused_k per sequence (empty: none)
  // A sliding window (bounds -1 for none) and a softcap (0: none), per sequence (evosdpa.h).
  bool window = false;
  int window_left = 0, window_right = 0;
  float softcap = 0;
  // ALiBi slopes of the sequences' own, [B, Hq] (evosdpa.h "ALiBi"), diagonals per sequence.
  bool alibi = false;
};

// Storage no correct kernel reads: padding rows and the rows past the totals.
constexpr float kGarbage = 37.f;

int64_t total(const std::vector<int>& lens) { return std::accumulate(lens.begin(), lens.end(), int64_t{0}); }
int longest(const std::vector<int>& lens) { return lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end()); }

class VarlenProblem {
 public:
  VarlenProblem(const VarlenCase& c, uint64_t seed) : c_(c) {
    lens_k_ = c.lens_k.empty() ? c.lens_q : c.lens_k;
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    const int64_t B = static_cast<int64_t>(c.lens_q.size()), D = c.head_dim;
    q_.resize(B), k_.resize(B), v_.resize(B);
    for (int64_t b = 0; b < B; ++b) {  // each sequence's [H, len, D]
      q_[b].resize(c.heads_q * c.lens_q[b] * D);
      k_[b].resize(c.heads_kv * lens_k_[b] * D);
      v_[b].resize(k_[b].size());
      for (auto* t : {&q_[b], &k_[b], &v_[b]})
        for (float& x : *t) x = round_to(c.dtype, normal(rng));
    }
    if (c.alibi) {  // BLOOM's slopes scaled per sequence, one head negative
      slopes_.resize(B * c.heads_q);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < c.heads_q; ++h)
          slopes_[b * c.heads_q + h] = static_cast<float>((h == 1 ? -0.5 : 1.0 + 0.25 * static_cast<double>(b)) *
                                                          std::exp2(-8.0 * static_cast<double>(h + 1) / c.heads_q));
    }
    upload_all();
  }

  evosdpa_params_t params() const {
    evosdpa_params_t p;
    evosdpa_params_init(&p);
    p.q = q_dev_.ptr;
    p.k = k_dev_.ptr;
    p.v = v_dev_.ptr;
    p.o = o_dev_.ptr;
    p.lse = static_cast<float*>(lse_dev_.ptr);
    p.dtype = c_.dtype;
    p.batch = static_cast<int64_t>(c_.lens_q.size());
    p.heads_q = c_.heads_q;
    p.heads_kv = c_.heads_kv;
    p.seqlen_q = longest(c_.lens_q);
    p.seqlen_k = longest(lens_k_);
    p.head_dim = c_.head_dim;
    p.causal = c_.causal;
    if (c_.packed_q) {
      p.cu_seqlens_q = static_cast<const int32_t*>(cu_q_.ptr);
      p.total_q = total(c_.lens_q);
    }
    if (c_.packed_k) {
      p.cu_seqlens_k = static_cast<const int32_t*>(cu_k_.ptr);
      p.total_k = total(lens_k_);
    }
    if (c_.head_major)
      evosdpa_params_set_bhsd_strides(&p);
    else
      evosdpa_params_set_bshd_strides(&p);
    if (!c_.seqused.empty()) p.seqused_k = static_cast<const int32_t*>(seqused_.ptr);
    p.sliding_window = c_.window ? 1 : 0;
    p.window_left = c_.window_left;
    p.window_right = c_.window_right;
    p.softcap = c_.softcap;
    if (c_.alibi) {
      p.alibi_slopes = static_cast<const float*>(slopes_dev_.ptr);
      p.alibi_batch_stride = c_.heads_q;
    }
    return p;
  }

  // Runs `kernel` on `p` (params() or an edit of it) with O and lse poisoned; O back as floats in
  // storage order, lse in its [H, total_q] or [B, H, Lq] order.
  evosdpa::Result run(const evosdpa_params_t& p, const std::string& kernel, std::vector<float>& o,
                      std::vector<float>& lse) {
    return run_poisoned(p, kernel, c_.dtype, o_dev_, lse_dev_, o, lse);
  }
  evosdpa::Result run(const std::string& kernel, std::vector<float>& o, std::vector<float>& lse) {
    return run(params(), kernel, o, lse);
  }

  // Judge every sequence's O and lse against float64 attention over its own queries and keys (the
  // first seqused_k[b] of them), the causal mode aligned per sequence.
  void check(const std::vector<float>& o, const std::vector<float>& lse, const std::string& what, uint64_t seed) const {
    const evosdpa_params_t p = params();
    const int64_t D = c_.head_dim, Hq = c_.heads_q, Hkv = c_.heads_kv;
    int64_t q_start = 0;
    for (size_t b = 0; b < c_.lens_q.size(); ++b) {
      const int64_t Lq = c_.lens_q[b], Lk_all = lens_k_[b];
      const int64_t Lk = c_.seqused.empty() ? Lk_all : std::min<int64_t>(Lk_all, std::max(c_.seqused[b], 0));
      Shape s;
      s.batch = 1;
      s.heads_q = Hq;
      s.heads_kv = Hkv;
      s.seqlen_q = Lq;
      s.seqlen_k = Lk;
      s.head_dim = D;
      s.causal = c_.causal;
      s.sliding_window = c_.window;
      s.window_left = c_.window ? c_.window_left : -1;
      s.window_right = c_.window ? c_.window_right : -1;
      s.softcap = c_.softcap;
      s.alibi = c_.alibi;
      if (Lq > 0) {
        Inputs in;
        in.q = q_[b];
        if (c_.alibi) in.alibi_slopes.assign(slopes_.begin() + b * Hq, slopes_.begin() + (b + 1) * Hq);
        in.k.resize(Hkv * Lk * D);
        in.v.resize(in.k.size());
        for (int64_t h = 0; h < Hkv; ++h)
          for (int64_t j = 0; j < Lk; ++j)
            for (int64_t d = 0; d < D; ++d) {
              in.k[(h * Lk + j) * D + d] = k_[b][(h * Lk_all + j) * D + d];
              in.v[(h * Lk + j) * D + d] = v_[b][(h * Lk_all + j) * D + d];
            }
        Expected e;
        e.in = in;
        e.ref = attention_f64(s, in);
        e.baseline_error = max_abs_error(attention_fused_baseline(s, in, c_.dtype), e.ref.o);
        e.seed = seed;
        std::vector<float> o_b(Hq * Lq * D), lse_b(Hq * Lq);
        for (int64_t h = 0; h < Hq; ++h)
          for (int64_t i = 0; i < Lq; ++i) {
            const int64_t row = (c_.packed_q ? q_start : 0) + i;
            const int64_t lse_at = c_.packed_q ? h * p.total_q + row : (static_cast<int64_t>(b) * Hq + h) * p.seqlen_q + i;
            lse_b[h * Lq + i] = lse[lse_at];
            for (int64_t d = 0; d < D; ++d)
              o_b[(h * Lq + i) * D + d] = o[b * p.o_batch_stride + h * p.o_head_stride + row * p.o_seq_stride + d];
          }
        const Verdict v = check_attention(s, c_.dtype, e, o_b, &lse_b);
        EXPECT_TRUE(v.pass) << what << ", sequence " << b << " (" << Lq << " queries, " << Lk << " keys): " << v.message
                            << " (EVOSDPA_TEST_SEED=" << run_seed() << ")";
      }
      q_start += Lq;
    }
  }

 private:
  // One side (queries or keys) into device storage: packed [total, H, D] / [H, total, D] with a few
  // garbage rows past the total, or padded [B, longest, H, D] with garbage in the padding.
  void upload_side(DeviceBuffer& buf, const std::vector<std::vector<float>>& seqs, const std::vector<int>& lens,
                   int64_t H, bool packed) {
    const int64_t D = c_.head_dim, B = static_cast<int64_t>(lens.size());
    // Head-major packing puts the heads total rows apart, as evosdpa_params_set_bhsd_strides does.
    const int64_t rows = packed ? total(lens) + (c_.head_major ? 0 : 5) : B * longest(lens);
    std::vector<uint16_t> bits(std::max<int64_t>(rows, 1) * H * D, encode(c_.dtype, kGarbage));
    int64_t start = 0;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < lens[b]; ++i) {
          const int64_t row = packed ? start + i : b * longest(lens) + i;
          const int64_t at = packed && c_.head_major ? (h * rows + row) * D : (row * H + h) * D;
          for (int64_t d = 0; d < D; ++d) bits[at + d] = encode(c_.dtype, seqs[b][(h * lens[b] + i) * D + d]);
        }
      start += lens[b];
    }
    buf = DeviceBuffer(bits.size() * 2);
    ASSERT_EQ(cudaMemcpy(buf.ptr, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  }

  static void upload_ints(DeviceBuffer& buf, const std::vector<int32_t>& x) {
    buf = DeviceBuffer(std::max<size_t>(x.size(), 1) * 4);
    ASSERT_EQ(cudaMemcpy(buf.ptr, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }

  static std::vector<int32_t> offsets(const std::vector<int>& lens) {
    std::vector<int32_t> cu(lens.size() + 1, 0);
    for (size_t b = 0; b < lens.size(); ++b) cu[b + 1] = cu[b] + lens[b];
    return cu;
  }

  void upload_all() {
    upload_side(q_dev_, q_, c_.lens_q, c_.heads_q, c_.packed_q);
    upload_side(k_dev_, k_, lens_k_, c_.heads_kv, c_.packed_k);
    upload_side(v_dev_, v_, lens_k_, c_.heads_kv, c_.packed_k);
    const int64_t B = static_cast<int64_t>(c_.lens_q.size());
    const int64_t q_rows = c_.packed_q ? total(c_.lens_q) + 5 : B * longest(c_.lens_q);
    o_dev_ = DeviceBuffer(std::max<int64_t>(q_rows, 1) * c_.heads_q * c_.head_dim * 2);
    lse_dev_ = DeviceBuffer(std::max<int64_t>(c_.packed_q ? total(c_.lens_q) : B * longest(c_.lens_q), 1) * c_.heads_q * 4);
    upload_ints(cu_q_, offsets(c_.lens_q));
    upload_ints(cu_k_, offsets(lens_k_));
    if (!c_.seqused.empty()) upload_ints(seqused_, std::vector<int32_t>(c_.seqused.begin(), c_.seqused.end()));
    if (c_.alibi) {
      slopes_dev_ = DeviceBuffer(slopes_.size() * 4);
      ASSERT_EQ(cudaMemcpy(slopes_dev_.ptr, slopes_.data(), slopes_.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }

  VarlenCase c_;
  std::vector<int> lens_k_;
  std::vector<std::vector<float>> q_, k_, v_;
  std::vector<float> slopes_;
  DeviceBuffer q_dev_, k_dev_, v_dev_, o_dev_, lse_dev_, cu_q_, cu_k_, seqused_, slopes_dev_;
};

const auto F16 = EVOSDPA_DTYPE_FLOAT16;
const auto BF16 = EVOSDPA_DTYPE_BFLOAT16;
const auto NONE = EVOSDPA_CAUSAL_NONE;
const auto TL = EVOSDPA_CAUSAL_TOP_LEFT;
const auto BR = EVOSDPA_CAUSAL_BOTTOM_RIGHT;

std::vector<int> many_short() {
  std::mt19937 rng(11);
  std::vector<int> lens(64);
  for (int& l : lens) l = static_cast<int>(rng() % 41);
  return lens;
}

std::vector<VarlenCase> varlen_cases() {
  return {
      {"mixed_0_1_odd_long", F16, 128, 8, 2, {0, 1, 77, 1000, 300}, {}, true, true, NONE},
      {"mixed_bf16_d64_br", BF16, 64, 8, 2, {300, 0, 1, 1000, 77}, {}, true, true, BR},
      {"q_ne_k_br", F16, 64, 4, 4, {5, 300, 64, 1, 0}, {300, 5, 65, 1000, 7}, true, true, BR},
      {"q_ne_k_tl", BF16, 128, 4, 1, {129, 3, 200}, {200, 3, 129}, true, true, TL},
      {"packed_q_padded_k", F16, 128, 8, 4, {1, 100, 256}, {256, 256, 256}, true, false, BR},
      {"padded_q_packed_k", BF16, 64, 4, 2, {64, 64, 64}, {10, 640, 0}, false, true, NONE},
      {"head_major_packed", F16, 64, 4, 2, {33, 190, 2}, {}, true, true, TL, true},
      {"seqused_with_cu_k", F16, 128, 4, 2, {50, 200}, {500, 40}, true, true, BR, false, {300, 100}},
      {"many_short_d128_br", BF16, 128, 4, 2, many_short(), {}, true, true, BR},
      {"gqa4_long", F16, 128, 4, 1, {1500, 700}, {}, true, true, BR},
      // Padded, per-sequence key counts only: a chunk of prefill against a dense cache.
      {"padded_seqused_prefill", BF16, 128, 8, 2, {200, 200, 200}, {600, 600, 600}, false, false, BR, false, {0, 333, 600}},
      // The same with more items than SMs (wgmma_sm90's work counter without packed queries).
      {"padded_seqused_wide", F16, 64, 16, 4, {300, 300, 300, 300, 300, 300}, {700, 700, 700, 700, 700, 700}, false,
       false, NONE, false, {0, 700, 1, 350, 699, 64}},
      // Fewer items with rows than CTAs: some CTAs' first claim is already past the last item.
      {"long_and_short_idle_ctas", F16, 128, 8, 8, {1000, 5, 0}, {}, true, true, NONE},
      // Sliding windows and softcaps per sequence (a padded batch of a transformers model, unpadded).
      {"window_mixed", F16, 128, 8, 2, {0, 1, 77, 1000, 300}, {}, true, true, TL, false, {}, true, 63, -1},
      {"window_softcap_q_ne_k", BF16, 64, 8, 4, {300, 5, 700}, {900, 5, 650}, true, true, BR, false, {}, true, 100, -1, 50},
      {"softcap_seqused", F16, 128, 4, 2, {50, 200}, {500, 40}, true, true, BR, false, {300, 100}, false, 0, 0, 30},
      {"window_both_sides_padded_k", BF16, 128, 4, 2, {1, 100, 256}, {256, 256, 256}, true, false, NONE, false, {},
       true, 20, 30},
      // ALiBi per sequence: diagonals bottom-right per sequence (no causal mask, Lq != Lk), top-left, with
      // seqused_k.
      {"alibi_q_ne_k", F16, 128, 8, 2, {300, 0, 1, 700, 77}, {900, 5, 1, 650, 77}, true, true, NONE, false, {}, false,
       0, 0, 0, true},
      {"alibi_tl", BF16, 64, 4, 4, {129, 3, 200}, {200, 3, 129}, true, true, TL, false, {}, false, 0, 0, 0, true},
      {"alibi_seqused", F16, 64, 4, 2, {50, 200}, {500, 40}, true, true, BR, false, {300, 100}, false, 0, 0, 0, true},
  };
}

// wgmma_sm90's work counter (evosdpa.h, workspace): a workspace of garbage, which the call must zero.
struct Counter {
  DeviceBuffer buf{256};
  evosdpa_params_t attach(evosdpa_params_t p) {
    EXPECT_EQ(cudaMemset(buf.ptr, 0xA5, buf.bytes), cudaSuccess);
    p.workspace = buf.ptr;
    p.workspace_size = buf.bytes;
    return p;
  }
};

bool unsupported_device(const evosdpa::Result& r) {
  return r.status == EVOSDPA_ERROR_NOT_SUPPORTED && r.message.find("compute capability") != std::string::npos;
}

// (case, kernel, with a workspace for the work counter)
class Varlen : public ::testing::TestWithParam<std::tuple<VarlenCase, std::string, bool>> {};

TEST_P(Varlen, MatchesFloat64PerSequence) {
  const auto& [c, kernel, counter] = GetParam();
  const uint64_t seed = case_seed(run_seed(), c.name);
  VarlenProblem prob(c, seed);
  Counter ws;
  const std::string what = c.name + " on " + kernel + (counter ? " with a work counter" : "");
  std::vector<float> o, lse;
  const evosdpa::Result r = prob.run(counter ? ws.attach(prob.params()) : prob.params(), kernel, o, lse);
  if (unsupported_device(r)) GTEST_SKIP() << r.message;
  ASSERT_TRUE(r.ok()) << what << ": " << r.message;
  prob.check(o, lse, what, seed);
  if (counter) {  // the items are the same computations whichever CTA claims them: bitwise the fixed deal's
    std::vector<float> fixed_o, fixed_lse;
    ASSERT_TRUE(prob.run(kernel, fixed_o, fixed_lse).ok());
    EXPECT_EQ(std::memcmp(o.data(), fixed_o.data(), o.size() * 4), 0) << what << ": O differs from the fixed deal's";
    EXPECT_EQ(std::memcmp(lse.data(), fixed_lse.data(), lse.size() * 4), 0) << what << ": lse differs";
  }
}

std::vector<std::tuple<VarlenCase, std::string, bool>> varlen_params() {
  std::vector<std::tuple<VarlenCase, std::string, bool>> out;
  for (const VarlenCase& c : varlen_cases()) {
    for (const char* k : {"wgmma_sm90", "mma_sm80", "reference", "auto"}) out.emplace_back(c, k, false);
    for (const char* k : {"wgmma_sm90", "auto"}) out.emplace_back(c, k, true);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, Varlen, ::testing::ValuesIn(varlen_params()), [](const auto& info) {
  return std::get<0>(info.param).name + "_" + std::get<1>(info.param) + (std::get<2>(info.param) ? "_counter" : "");
});

// The cases that run on the work counter: wgmma_sm90 asks for it (on an H100) where its persistent grid
// has more items than SMs, so that the suite above covers that path and not only the fixed deal.
TEST(VarlenWorkCounter, WantedWhereItemsOutnumberTheSms) {
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  if (major != 9) GTEST_SKIP() << "wgmma_sm90 runs on compute capability 9.x";
  int wanted = 0;
  for (const VarlenCase& c : varlen_cases()) {
    VarlenProblem prob(c, 1);
    size_t bytes = 0;
    const evosdpa::Result r = evosdpa::forward_workspace_size(prob.params(), bytes, "wgmma_sm90");
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.message;
    if (bytes > 0) ++wanted;
  }
  EXPECT_GE(wanted, 5) << "too few cases run on wgmma_sm90's work counter";
}

// Offsets that are not a valid prefix sum (decreasing, negative, past the total) are clamped: the call
// succeeds, and nothing outside the tensors is touched (compute-sanitizer memcheck in gpu-check.sh).
TEST(VarlenOffsets, OutOfRangeOffsetsAreClamped) {
  const VarlenCase c{"clamped", F16, 128, 4, 2, {100, 200, 50}, {}, true, true, BR};
  VarlenProblem prob(c, 5);
  evosdpa_params_t p = prob.params();
  DeviceBuffer bad(4 * 4);
  const int32_t offsets[4] = {-20, 400, 90, 100000};
  ASSERT_EQ(cudaMemcpy(bad.ptr, offsets, sizeof offsets, cudaMemcpyHostToDevice), cudaSuccess);
  p.cu_seqlens_q = p.cu_seqlens_k = static_cast<const int32_t*>(bad.ptr);
  for (const char* kernel : {"wgmma_sm90", "mma_sm80", "reference"}) {
    std::vector<float> o, lse;
    const evosdpa::Result r = prob.run(p, kernel, o, lse);
    if (unsupported_device(r)) continue;
    EXPECT_TRUE(r.ok()) << kernel << ": " << r.message;
  }
}

// Packed batches are computed in a fixed order within each item, whichever CTA claims it (the work
// counter): 100 runs bitwise equal.
TEST(VarlenDeterminism, HundredRunsAreBitwiseEqual) {
  const VarlenCase c{"det", BF16, 128, 8, 2, {0, 1, 77, 1000, 300}, {}, true, true, BR};
  VarlenProblem prob(c, 7);
  Counter ws;
  const evosdpa_params_t p = ws.attach(prob.params());
  std::vector<float> first_o, first_lse, o, lse;
  ASSERT_TRUE(prob.run(p, "auto", first_o, first_lse).ok());
  for (int run = 1; run < 100; ++run) {
    ASSERT_TRUE(prob.run(p, "auto", o, lse).ok());
    ASSERT_EQ(std::memcmp(o.data(), first_o.data(), o.size() * 4), 0) << "run " << run;
    ASSERT_EQ(std::memcmp(lse.data(), first_lse.data(), lse.size() * 4), 0) << "run " << run;
  }
}

// "auto" runs packed prefill on the Hopper kernel where there is one.
TEST(VarlenSelection, AutoPicksTheDenseKernel) {
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  VarlenProblem prob(varlen_cases()[0], 1);
  const evosdpa::Result r = evosdpa::supports(prob.params(), "auto");
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.kernel, major == 9 ? "wgmma_sm90" : "mma_sm80");
}

}  // namespace
