// KV caches (evosdpa.h, "Serving") against float64 per sequence: per-sequence key counts (0, 1, odd and
// long ones in one batch, and one past seqlen_k, which is clamped), dense caches in both layouts and
// paged ones with shuffled, non-contiguous pages of 16, 48 and 256 keys, decode rows packed over grouped
// heads, the three causal modes, key splits (the library's choice through a workspace, none, and fixed
// counts), a page index out of range, and Lq = 1 against caches from 1 to 131072 keys. Outputs poisoned
// before each run; every case on splitkv_sm80, the reference kernel and "auto".
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

struct CacheCase {
  std::string name;
  evosdpa_dtype_t dtype;
  int64_t head_dim, batch, heads_q, heads_kv, seqlen_q;
  std::vector<int> lens;  // keys per sequence: seqused_k, or every sequence seqlen_k long when empty
  int64_t seqlen_k;       // the cache's capacity per sequence
  int64_t page_size;      // 0: dense
  evosdpa_causal_t causal;
  int64_t num_splits;        // 0: the library's choice, through the workspace it asks for
  bool head_major = false;   // dense [B, Hkv, L, D] (else [B, L, Hkv, D]); paged [P, Hkv, page, D]
  int invalid_page = -1;     // a page-table column of sequence 0 pointed outside the cache (non-causal)
};

std::string case_name(const CacheCase& c, const std::string& kernel) { return c.name + " on " + kernel; }

// A value no correct kernel reads: storage outside the keys a sequence owns.
constexpr float kGarbage = 37.f;

class CacheProblem {
 public:
  CacheProblem(const CacheCase& c, uint64_t seed) : c_(c) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    const int64_t D = c.head_dim, B = c.batch;
    lens_ = c.lens.empty() ? std::vector<int>(B, static_cast<int>(c.seqlen_k)) : c.lens;
    q_.resize(B * c.seqlen_q * c.heads_q * D);  // [B, Lq, Hq, D]
    for (float& x : q_) x = round_to(c.dtype, normal(rng));
    // Each sequence's keys and values, [Hkv, len, D], before they are placed in the cache.
    k_.resize(B);
    v_.resize(B);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = std::min<int64_t>(std::max(lens_[b], 0), c.seqlen_k);
      k_[b].resize(c.heads_kv * len * D);
      v_[b].resize(c.heads_kv * len * D);
      for (float& x : k_[b]) x = round_to(c.dtype, normal(rng));
      for (float& x : v_[b]) x = round_to(c.dtype, normal(rng));
    }
    build_cache(rng);
  }

  // Runs `kernel` with outputs poisoned; returns the status, and O ([B, Lq, Hq, D]) and lse.
  evosdpa::Result run(const std::string& kernel, std::vector<float>& o, std::vector<float>& lse) {
    evosdpa_params_t p = params();
    p.num_splits = c_.num_splits;
    size_t bytes = 0;
    evosdpa::Result r = evosdpa::forward_workspace_size(p, bytes, kernel);
    if (!r.ok()) return r;
    DeviceBuffer ws(bytes);
    p.workspace = ws.ptr;
    p.workspace_size = bytes;
    return run_poisoned(p, kernel, c_.dtype, o_, lse_, o, lse);
  }

  evosdpa_params_t params() const {
    evosdpa_params_t p;
    evosdpa_params_init(&p);
    p.q = q_dev_.ptr;
    p.k = k_dev_.ptr;
    p.v = v_dev_.ptr;
    p.o = o_.ptr;
    p.lse = static_cast<float*>(lse_.ptr);
    p.dtype = c_.dtype;
    p.batch = c_.batch;
    p.heads_q = c_.heads_q;
    p.heads_kv = c_.heads_kv;
    p.seqlen_q = c_.seqlen_q;
    p.seqlen_k = c_.seqlen_k;
    p.head_dim = c_.head_dim;
    p.causal = c_.causal;
    evosdpa_params_set_bshd_strides(&p);  // Q and O: [B, Lq, Hq, D]
    p.k_batch_stride = p.v_batch_stride = kv_strides_[0];
    p.k_head_stride = p.v_head_stride = kv_strides_[1];
    p.k_seq_stride = p.v_seq_stride = kv_strides_[2];
    if (!c_.lens.empty()) p.seqused_k = static_cast<const int32_t*>(seqused_.ptr);
    if (c_.page_size > 0) {
      p.page_table = static_cast<const int32_t*>(table_.ptr);
      p.page_table_batch_stride = table_cols_;
      p.page_size = c_.page_size;
      p.num_pages = num_pages_;
    }
    return p;
  }

  // Judge O and lse sequence by sequence against float64 attention over the keys the sequence owns
  // (less those on the invalid page).
  void check(const std::vector<float>& o, const std::vector<float>& lse, const std::string& what, uint64_t seed) const {
    const int64_t D = c_.head_dim, Lq = c_.seqlen_q, Hq = c_.heads_q;
    for (int64_t b = 0; b < c_.batch; ++b) {
      Shape s;
      s.batch = 1;
      s.heads_q = Hq;
      s.heads_kv = c_.heads_kv;
      s.seqlen_q = Lq;
      s.head_dim = D;
      s.causal = c_.causal;
      Inputs in;
      in.q.resize(Hq * Lq * D);
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t i = 0; i < Lq; ++i)
          for (int64_t d = 0; d < D; ++d) in.q[(h * Lq + i) * D + d] = q_[((b * Lq + i) * Hq + h) * D + d];
      const int64_t len = static_cast<int64_t>(k_[b].size()) / (c_.heads_kv * D);
      std::vector<int64_t> keys;
      for (int64_t j = 0; j < len; ++j)
        if (!(b == 0 && c_.invalid_page >= 0 && j / c_.page_size == c_.invalid_page)) keys.push_back(j);
      s.seqlen_k = static_cast<int64_t>(keys.size());
      in.k.resize(c_.heads_kv * keys.size() * D);
      in.v.resize(in.k.size());
      for (int64_t h = 0; h < c_.heads_kv; ++h)
        for (size_t n = 0; n < keys.size(); ++n)
          for (int64_t d = 0; d < D; ++d) {
            in.k[(h * keys.size() + n) * D + d] = k_[b][(h * len + keys[n]) * D + d];
            in.v[(h * keys.size() + n) * D + d] = v_[b][(h * len + keys[n]) * D + d];
          }
      Expected e;
      e.in = in;
      e.ref = attention_f64(s, in);
      e.baseline_error = max_abs_error(attention_fused_baseline(s, in, c_.dtype), e.ref.o);
      e.seed = seed;
      std::vector<float> o_b(Hq * Lq * D), lse_b(Hq * Lq);
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t i = 0; i < Lq; ++i) {
          lse_b[h * Lq + i] = lse[(b * Hq + h) * Lq + i];
          for (int64_t d = 0; d < D; ++d) o_b[(h * Lq + i) * D + d] = o[((b * Lq + i) * Hq + h) * D + d];
        }
      const Verdict v = check_attention(s, c_.dtype, e, o_b, &lse_b);
      EXPECT_TRUE(v.pass) << what << ", sequence " << b << " (" << s.seqlen_k << " keys): " << v.message
                          << " (EVOSDPA_TEST_SEED=" << run_seed() << ")";
    }
  }

 private:
  void build_cache(std::mt19937_64& rng) {
    const CacheCase& c = c_;
    const int64_t D = c.head_dim, Hkv = c.heads_kv;
    auto upload16 = [&](DeviceBuffer& buf, const std::vector<float>& x) {
      std::vector<uint16_t> bits(x.size());
      for (size_t i = 0; i < x.size(); ++i) bits[i] = encode(c.dtype, x[i]);
      buf = DeviceBuffer(bits.size() * 2);
      ASSERT_EQ(cudaMemcpy(buf.ptr, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    };
    upload16(q_dev_, q_);
    // Where row `row` of head h of the cache's outer index `outer` (sequence or page) lives.
    const int64_t rows_per_outer = c.page_size > 0 ? c.page_size : c.seqlen_k;
    if (c.head_major)
      kv_strides_ = {Hkv * rows_per_outer * D, rows_per_outer * D, D};
    else
      kv_strides_ = {rows_per_outer * Hkv * D, D, Hkv * D};
    int64_t outers = c.batch;
    std::vector<int32_t> table;
    if (c.page_size > 0) {
      table_cols_ = (c.seqlen_k + c.page_size - 1) / c.page_size;
      // Pages for the keys each sequence has, plus spare ones, handed out in a shuffled order; table
      // entries past a sequence's pages point at random pages (never read).
      int64_t used = 0;
      for (int64_t b = 0; b < c.batch; ++b) used += (static_cast<int64_t>(k_[b].size()) / (Hkv * D) + c.page_size - 1) / c.page_size;
      num_pages_ = used + 3;
      std::vector<int32_t> order(num_pages_);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      table.assign(c.batch * table_cols_, 0);
      int64_t next = 0;
      for (int64_t b = 0; b < c.batch; ++b) {
        const int64_t pages = (static_cast<int64_t>(k_[b].size()) / (Hkv * D) + c.page_size - 1) / c.page_size;
        for (int64_t col = 0; col < table_cols_; ++col)
          table[b * table_cols_ + col] = col < pages ? order[next++] : order[rng() % num_pages_];
      }
      if (c.invalid_page >= 0) table[c.invalid_page] = static_cast<int32_t>(num_pages_ + 5);
      outers = num_pages_;
    }
    std::vector<float> kc(outers * Hkv * rows_per_outer * D, kGarbage), vc(kc.size(), kGarbage);
    for (int64_t b = 0; b < c.batch; ++b) {
      const int64_t len = static_cast<int64_t>(k_[b].size()) / (Hkv * D);
      for (int64_t j = 0; j < len; ++j) {
        int64_t outer = b, row = j;
        if (c.page_size > 0) {
          const int32_t page = table[b * table_cols_ + j / c.page_size];
          if (page < 0 || page >= num_pages_) continue;
          outer = page;
          row = j % c.page_size;
        }
        for (int64_t h = 0; h < Hkv; ++h)
          for (int64_t d = 0; d < D; ++d) {
            const int64_t at = outer * kv_strides_[0] + h * kv_strides_[1] + row * kv_strides_[2] + d;
            kc[at] = k_[b][(h * len + j) * D + d];
            vc[at] = v_[b][(h * len + j) * D + d];
          }
      }
    }
    upload16(k_dev_, kc);
    upload16(v_dev_, vc);
    o_ = DeviceBuffer(q_.size() * 2);
    lse_ = DeviceBuffer(c.batch * c.heads_q * c.seqlen_q * 4);
    if (!c.lens.empty()) {
      seqused_ = DeviceBuffer(c.lens.size() * 4);
      ASSERT_EQ(cudaMemcpy(seqused_.ptr, c.lens.data(), c.lens.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    }
    if (!table.empty()) {
      table_ = DeviceBuffer(table.size() * 4);
      ASSERT_EQ(cudaMemcpy(table_.ptr, table.data(), table.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }

  CacheCase c_;
  std::vector<int> lens_;
  std::vector<float> q_;
  std::vector<std::vector<float>> k_, v_;
  std::vector<int64_t> kv_strides_;
  int64_t table_cols_ = 0, num_pages_ = 0;
  DeviceBuffer q_dev_, k_dev_, v_dev_, o_, lse_, seqused_, table_;
};

const auto F16 = EVOSDPA_DTYPE_FLOAT16;
const auto BF16 = EVOSDPA_DTYPE_BFLOAT16;
const auto NONE = EVOSDPA_CAUSAL_NONE;
const auto TL = EVOSDPA_CAUSAL_TOP_LEFT;
const auto BR = EVOSDPA_CAUSAL_BOTTOM_RIGHT;

// n key counts from 0 to cap, mixed (0, 1, then a stride through [0, cap]).
std::vector<int> mixed_lens(int n, int cap) {
  std::vector<int> lens(n);
  for (int i = 0; i < n; ++i) lens[i] = i < 2 ? i : static_cast<int>((i * 389LL) % (cap + 1));
  return lens;
}

std::vector<CacheCase> cache_cases() {
  std::vector<int> sweep = {1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 4097, 131072};
  return {
      {"dense_decode_gqa4", F16, 128, 2, 8, 2, 1, {}, 1000, 0, NONE, 0},
      {"dense_head_major", BF16, 64, 2, 4, 4, 3, {}, 333, 0, BR, 0, true},
      {"seqused_0_1_77_1000_br", BF16, 64, 4, 8, 2, 4, {0, 1, 77, 1000}, 1000, 0, BR, 3},
      {"seqused_clamped", F16, 128, 2, 4, 2, 2, {5000, 299}, 300, 0, BR, 0},
      {"paged16_shuffled", BF16, 128, 4, 4, 4, 1, {5, 300, 0, 1024}, 1024, 16, NONE, 0},
      {"paged256_lq16_br", F16, 128, 2, 8, 2, 16, {1000, 17}, 1024, 256, BR, 1},
      {"paged48_odd_tl", F16, 64, 2, 16, 2, 5, {100, 250}, 250, 48, TL, 7},
      {"paged16_head_major", BF16, 128, 3, 4, 1, 2, {31, 64, 200}, 200, 16, BR, 0, true},
      {"rows128_splits2", BF16, 128, 2, 16, 2, 16, {700, 1500}, 1500, 0, BR, 2},
      {"invalid_page", F16, 64, 1, 4, 2, 2, {200}, 200, 16, NONE, 0, false, 3},
      {"decode_sweep_1_to_131072", F16, 128, static_cast<int64_t>(sweep.size()), 8, 2, 1, sweep, 131072, 64, NONE, 0},
      {"many_splits", F16, 64, 1, 2, 1, 1, {9000}, 9000, 0, NONE, 64},
      // 37 parts: the merge reads parts eight at a time, 32 to a lane set; the last set holds 5 (and
      // parts past the 40 key blocks' 20 that hold keys are empty).
      {"splits37_d128", BF16, 128, 2, 8, 2, 3, {5000, 2900}, 5000, 0, BR, 37},
      // More blocks than SMs (160, 288 and 288 on 132), of unequal lengths; the first a short cache
      // whose blocks fill a wave, which sm_90 gives to the 96 KiB row (short_cache_row).
      {"blocks_over_sms_d128", F16, 128, 40, 8, 4, 1, mixed_lens(40, 700), 700, 0, NONE, 0},
      {"blocks_over_sms_paged_d64", BF16, 64, 36, 16, 8, 2, mixed_lens(36, 500), 500, 16, BR, 0},
      {"blocks_over_sms_splits3", F16, 128, 24, 8, 4, 3, mixed_lens(24, 900), 900, 0, BR, 3},
      // The 96 KiB row on sm_90 (136 blocks before any split, a cache of 640 keys): paged with 4
      // queries bottom-right, and dense with two parts (272 blocks), top-left.
      {"short_cache_paged32_lq4_br", BF16, 128, 34, 8, 4, 4, mixed_lens(34, 640), 640, 32, BR, 0},
      {"short_cache_splits2_tl", F16, 128, 34, 8, 4, 4, mixed_lens(34, 640), 640, 0, TL, 2},
      // The 48 KiB row on sm_90 (two blocks per SM before any split: 288, 280 and 272 blocks): dense,
      // paged with 3 queries bottom-right, and dense with two parts top-left.
      {"short_cache_4_per_sm", F16, 128, 36, 16, 8, 1, mixed_lens(36, 1000), 1000, 0, NONE, 0},
      {"short_cache_4_per_sm_paged16_lq3_br", BF16, 128, 35, 16, 8, 3, mixed_lens(35, 784), 784, 16, BR, 0},
      {"short_cache_4_per_sm_splits2_tl", F16, 128, 34, 16, 8, 2, mixed_lens(34, 900), 900, 0, TL, 2},
      // The 48 KiB row for paged caches of few sequences on sm_90 (64 and 36 blocks before the split, the
      // library's count of parts).
      {"paged_split_4_per_sm", F16, 128, 8, 32, 8, 1, mixed_lens(8, 3008), 3008, 16, NONE, 0},
      {"paged_split_4_per_sm_lq2_br", BF16, 128, 9, 16, 4, 2, mixed_lens(9, 1504), 1504, 32, BR, 0},
  };
}

class KvCache : public ::testing::TestWithParam<std::tuple<CacheCase, std::string>> {};

TEST_P(KvCache, MatchesFloat64PerSequence) {
  const auto& [c, kernel] = GetParam();
  CacheCase run_case = c;
  // The reference kernel never splits keys (num_splits > 1 is splitkv_sm80's alone).
  if (kernel == "reference" && run_case.num_splits > 1) run_case.num_splits = 1;
  const uint64_t seed = case_seed(run_seed(), c.name);
  CacheProblem prob(run_case, seed);
  std::vector<float> o, lse;
  const evosdpa::Result r = prob.run(kernel, o, lse);
  ASSERT_TRUE(r.ok()) << case_name(c, kernel) << ": " << r.message;
  prob.check(o, lse, case_name(c, kernel), seed);
}

std::vector<std::tuple<CacheCase, std::string>> cache_params() {
  std::vector<std::tuple<CacheCase, std::string>> out;
  for (const CacheCase& c : cache_cases())
    for (const char* k : {"splitkv_sm80", "reference", "auto"}) out.emplace_back(c, k);
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, KvCache, ::testing::ValuesIn(cache_params()), [](const auto& info) {
  std::string k = std::get<1>(info.param);
  return std::get<0>(info.param).name + "_" + k;
});

// "auto" runs KV caches and decoding shapes on splitkv_sm80.
TEST(KvCacheSelection, AutoPicksSplitKv) {
  for (const CacheCase& c : cache_cases()) {
    CacheProblem prob(c, 1);
    const evosdpa::Result r = evosdpa::supports(prob.params(), "auto");
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.message;
    EXPECT_EQ(r.kernel, "splitkv_sm80") << c.name;
  }
}

// Split partials merged in a fixed order: 100 runs bitwise equal.
TEST(KvCacheDeterminism, HundredRunsAreBitwiseEqual) {
  const CacheCase c{"det", F16, 128, 1, 8, 2, 1, {5000}, 5000, 16, NONE, 0};
  CacheProblem prob(c, 7);
  std::vector<float> first_o, first_lse, o, lse;
  ASSERT_TRUE(prob.run("splitkv_sm80", first_o, first_lse).ok());
  for (int run = 1; run < 100; ++run) {
    ASSERT_TRUE(prob.run("splitkv_sm80", o, lse).ok());
    ASSERT_EQ(std::memcmp(o.data(), first_o.data(), o.size() * 4), 0) << "run " << run;
    ASSERT_EQ(std::memcmp(lse.data(), first_lse.data(), lse.size() * 4), 0) << "run " << run;
  }
}

// The workspace rules: a fixed split count needs the workspace it asks for; the library's choice without
// a workspace runs unsplit; the split count changes nothing but the last bits.
TEST(KvCacheWorkspace, FixedSplitsNeedTheirWorkspace) {
  const CacheCase c{"ws", BF16, 64, 1, 4, 4, 1, {4000}, 4000, 0, NONE, 4};
  CacheProblem prob(c, 3);
  evosdpa_params_t p = prob.params();
  p.num_splits = 4;
  size_t bytes = 0;
  ASSERT_TRUE(evosdpa::forward_workspace_size(p, bytes, "splitkv_sm80").ok());
  EXPECT_EQ(bytes, size_t{4} * 4 * (64 + 1) * 4);  // 4 parts of 4 rows of D + 1 floats
  DeviceBuffer small(bytes / 2);
  p.workspace = small.ptr;
  p.workspace_size = bytes / 2;
  const evosdpa::Result r = evosdpa::attention_forward(p, nullptr, "splitkv_sm80");
  EXPECT_EQ(r.status, EVOSDPA_ERROR_INVALID_ARGUMENT) << r.message;
  EXPECT_NE(r.message.find("workspace_size"), std::string::npos) << r.message;
  // The library's choice with no workspace: no split, and a correct answer (KvCache covers that too).
  p.num_splits = 0;
  p.workspace = nullptr;
  p.workspace_size = 0;
  EXPECT_TRUE(evosdpa::attention_forward(p, nullptr, "splitkv_sm80").ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
