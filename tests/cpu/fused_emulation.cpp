#include "cpu/fused_emulation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <thread>

using evosdpa::host::Expected;
using evosdpa::host::Shape;

namespace emulation {
namespace {

constexpr int kBlockN = 64;  // keys per tile, as in the GPU kernels
constexpr float kLog2e = 1.4426950408889634f;

const float* q_row(const Shape& s, const Expected& e, int64_t row) {
  return &e.in.q[static_cast<size_t>(row * s.head_dim)];
}
const float* kv_row(const Shape& s, const std::vector<float>& t, int64_t row, int64_t j) {
  const int64_t b = row / (s.heads_q * s.seqlen_q), h = row / s.seqlen_q % s.heads_q;
  const int64_t hk = h / (s.heads_q / s.heads_kv);
  return &t[static_cast<size_t>(((b * s.heads_kv + hk) * s.seqlen_k + j) * s.head_dim)];
}

// The keys RowMaskOffBy1 can flip on query row i, the usual one first. The usual one: with a sliding
// window's left bound, the key before the window when it exists, otherwise the window's first key
// (hidden); else the key after the last one the mask allows when it exists, otherwise the last visible
// one (hidden); a row that sees nothing gets key 0. Then either edge of the row's band of visible keys,
// shown one key wider or hidden one key narrower (a row that sees nothing: its first or last key).
std::vector<int64_t> off_by_one_keys(const Shape& s, int64_t i) {
  int64_t first = -1, last = -1;  // the row's visible keys (a band: none, or first .. last)
  for (int64_t k = 0; k < s.seqlen_k; ++k)
    if (s.visible(i, k)) {
      if (first < 0) first = k;
      last = k;
    }
  if (first < 0) return {0, s.seqlen_k - 1};
  std::vector<int64_t> keys;
  if (s.sliding_window && s.window_left >= 0)
    keys.push_back(first > 0 ? first - 1 : first);
  else
    keys.push_back(last + 1 < s.seqlen_k ? last + 1 : last);
  for (int64_t j : {first - 1, first, last, last + 1})
    if (j >= 0 && j < s.seqlen_k) keys.push_back(j);
  return keys;
}

template <typename F>
void for_checked_rows(const Shape& s, int64_t row_step, F body) {
  const int64_t n = s.rows();
  const int64_t workers = std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int64_t r = w; r < n; r += workers)
        if ((r % s.seqlen_q) % row_step == 0) body(r);
    });
  for (auto& t : pool) t.join();
}

// The mask tensor's and ALiBi's effect on key j of a row (0 without them); with MaskShifted planted, read
// one key over; with AlibiWrongHead, ALiBi with the next head's slope.
double row_mask_bias(const Shape& s, const Expected& e, int64_t row, int64_t j, Bug bug = Bug::None) {
  if (bug == Bug::MaskShifted) j = j + 1 < s.seqlen_k ? j + 1 : j - 1;
  const int64_t b = row / (s.heads_q * s.seqlen_q), h = row / s.seqlen_q % s.heads_q, i = row % s.seqlen_q;
  const double bias = e.in.score_bias(s, b, h, i, j);
  if (bug != Bug::AlibiWrongHead || !s.alibi) return bias;
  const double distance = static_cast<double>(std::llabs(s.diagonal(i) - j));
  return bias + (e.in.alibi_slope(s, b, h) - e.in.alibi_slope(s, b, (h + 1) % s.heads_q)) * distance;
}

// The exact score of key j for a row: the scaled Q.K after the softcap, plus the mask tensor's and ALiBi's bias.
double logit(const Shape& s, const Expected& e, int64_t row, int64_t j) {
  double dot = 0;
  const float* q = q_row(s, e, row);
  const float* k = kv_row(s, e.in.k, row, j);
  for (int64_t d = 0; d < s.head_dim; ++d) dot += static_cast<double>(q[d]) * k[d];
  return s.cap(dot * s.effective_scale()) + row_mask_bias(s, e, row, j);
}

// Exact softmax weights of one row over the keys `sees` admits (0 for the others).
template <typename Sees>
std::vector<double> weights(const Shape& s, const Expected& e, int64_t row, Sees sees) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> w(static_cast<size_t>(s.seqlen_k), -kInf);
  double mx = -kInf;
  for (int64_t j = 0; j < s.seqlen_k; ++j) {
    if (!sees(j)) continue;
    w[static_cast<size_t>(j)] = logit(s, e, row, j);
    mx = std::max(mx, w[static_cast<size_t>(j)]);
  }
  double sum = 0;
  for (int64_t j = 0; j < s.seqlen_k; ++j)
    w[static_cast<size_t>(j)] = mx > -kInf ? std::exp(w[static_cast<size_t>(j)] - mx) : 0.0, sum += w[static_cast<size_t>(j)];
  for (double& x : w) x = sum > 0 ? x / sum : 0.0;
  return w;
}

std::vector<double> weighted_v(const Shape& s, const Expected& e, int64_t row, const std::vector<double>& w) {
  std::vector<double> o(static_cast<size_t>(s.head_dim), 0.0);
  for (int64_t j = 0; j < s.seqlen_k; ++j)
    if (w[static_cast<size_t>(j)] != 0) {
      const float* v = kv_row(s, e.in.v, row, j);
      for (int64_t d = 0; d < s.head_dim; ++d) o[static_cast<size_t>(d)] += w[static_cast<size_t>(j)] * v[d];
    }
  return o;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t d = 0; d < a.size(); ++d) m = std::max(m, std::abs(a[d] - b[d]));
  return m;
}

}  // namespace

const char* bug_name(Bug b) {
  switch (b) {
    case Bug::None: return "none";
    case Bug::HalfRescale: return "half_rescale";
    case Bug::Scale2Pct: return "scale_2pct";
    case Bug::RowMaskOffBy1: return "row_mask_off_by_one";
    case Bug::KeyDropped: return "key_dropped";
    case Bug::MaskShifted: return "mask_shifted";
    case Bug::AlibiWrongHead: return "alibi_wrong_head";
  }
  return "?";
}

Sites choose_sites(const Shape& s, const Expected& e, double unseen) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Sites sites;
  if (s.seqlen_k == 0) return sites;
  // Exact change of O per checked row and key: hiding key j from a row (the dropped-key bug, the mask bug
  // at an edge key) moves O by w_j / (1 - w_j) * (O - v_j); showing a key the row does not see (the mask
  // bug past an edge), whose weight is then w'_j, moves it by w'_j * (v_j - O).
  std::vector<Site> usual(static_cast<size_t>(s.rows()), Site{-1, -1, -1.0}), any = usual;
  std::vector<std::vector<double>> key_effect(static_cast<size_t>(s.rows()));
  for_checked_rows(s, e.row_step, [&](int64_t r) {
    const int64_t i = r % s.seqlen_q;
    const std::vector<double> w = weights(s, e, r, [&](int64_t j) { return s.visible(i, j); });
    const std::vector<double> o = weighted_v(s, e, r, w);
    auto distance = [&](int64_t j) {  // max |O - v_j|
      const float* v = kv_row(s, e.in.v, r, j);
      double m = 0;
      for (int64_t d = 0; d < s.head_dim; ++d) m = std::max(m, std::abs(o[static_cast<size_t>(d)] - v[d]));
      return m;
    };
    std::vector<double>& ke = key_effect[static_cast<size_t>(r)];
    ke.assign(static_cast<size_t>(s.seqlen_k), 0.0);
    for (int64_t j = 0; j < s.seqlen_k; ++j) {
      const double wj = w[static_cast<size_t>(j)];
      if (wj != 0) ke[static_cast<size_t>(j)] = wj >= 1 ? kInf : wj / (1 - wj) * distance(j);
    }
    // w'_j / (1 - w'_j) = exp(x_j) / (the sum of exp(x_k) over the row's keys) = exp(x_j - x_t) w_t, with t
    // the row's heaviest key; in a row that sees nothing the key shown gets all the weight, unless masked out.
    const size_t t = static_cast<size_t>(std::max_element(w.begin(), w.end()) - w.begin());
    const double x_t = w[t] > 0 ? logit(s, e, r, static_cast<int64_t>(t)) : 0.0;
    auto flip_effect = [&](int64_t j) {
      const double wj = w[static_cast<size_t>(j)];
      if (s.visible(i, j) && wj <= 0.5) return ke[static_cast<size_t>(j)];
      if (s.visible(i, j)) {  // w_j / (1 - w_j) loses its digits as w_j nears 1: the row's softmax without j
        auto sees = [&](int64_t k) { return k != j && s.visible(i, k); };
        return max_diff(o, weighted_v(s, e, r, weights(s, e, r, sees)));
      }
      const double x = logit(s, e, r, j);
      const double odds = w[t] > 0 ? std::exp(x - x_t) * w[t] : (x > -kInf ? kInf : 0.0);
      return distance(j) / (1 + 1 / odds);
    };
    const std::vector<int64_t> keys = off_by_one_keys(s, i);
    Site& u = usual[static_cast<size_t>(r)];
    u = {r, keys[0], flip_effect(keys[0])};
    Site& a = any[static_cast<size_t>(r)];
    a = u;
    for (int64_t j : keys) {
      const double effect = flip_effect(j);
      if (effect > a.effect) a = {r, j, effect};
    }
  });
  std::vector<double> key_max(static_cast<size_t>(s.seqlen_k), 0.0);
  for (const auto& ke : key_effect)
    for (size_t j = 0; j < ke.size(); ++j) key_max[j] = std::max(key_max[j], ke[j]);
  Site& key = sites.key_dropped;
  key.key = std::max_element(key_max.begin(), key_max.end()) - key_max.begin();
  key.effect = key_max[static_cast<size_t>(key.key)];
  // The mask bug at its usual key; where that changes no checked row visibly (on peaked rows of a full
  // mask the last key may weigh nothing in every one), at whichever edge and way changes one most.
  auto most = [](const std::vector<Site>& v) {
    return *std::max_element(v.begin(), v.end(), [](const Site& x, const Site& y) { return x.effect < y.effect; });
  };
  sites.row_mask = most(usual);
  if (sites.row_mask.effect <= unseen) sites.row_mask = most(any);
  return sites;
}

Output run(const Shape& s, evosdpa_dtype_t dtype, const Expected& e, Bug bug, Site site) {
  Output out;
  out.o.assign(static_cast<size_t>(s.q_elems()), 0.f);
  out.lse.assign(static_cast<size_t>(s.rows()), 0.f);
  const float scale = static_cast<float>(s.effective_scale()) * (bug == Bug::Scale2Pct ? 1.02f : 1.f);
  const float scale_log2 = scale * kLog2e;
  // FP8 inputs: P = 2^(S - m + offset) rounded to E4M3, O rounded to the call's o_dtype.
  const bool fp8 = dtype == EVOSDPA_DTYPE_FLOAT8_E4M3;
  const float offset = fp8 ? evosdpa::host::kFp8MaxOffset : 0.f;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for_checked_rows(s, e.row_step, [&](int64_t r) {
    const int64_t i = r % s.seqlen_q;
    auto sees = [&](int64_t j) {
      if (bug == Bug::KeyDropped && j == site.key) return false;
      const bool flipped = bug == Bug::RowMaskOffBy1 && r == site.row && j == site.key;
      return s.visible(i, j) != flipped;
    };
    const float* q = q_row(s, e, r);
    std::vector<float> acc(static_cast<size_t>(s.head_dim), 0.f), t(kBlockN);
    float m = kNegInf, l = 0.f;
    for (int64_t key0 = 0; key0 < s.seqlen_k; key0 += kBlockN) {
      const int64_t n = std::min<int64_t>(kBlockN, s.seqlen_k - key0);
      float m_new = m;
      for (int64_t jj = 0; jj < n; ++jj) {
        float x = kNegInf;
        if (sees(key0 + jj)) {
          const float* k = kv_row(s, e.in.k, r, key0 + jj);
          float dot = 0.f;
          for (int64_t d = 0; d < s.head_dim; ++d) dot += q[d] * k[d];
          x = s.softcap > 0 ? static_cast<float>(s.cap(static_cast<double>(dot * scale))) * kLog2e : dot * scale_log2;
          x += static_cast<float>(row_mask_bias(s, e, r, key0 + jj, bug)) * kLog2e;
        }
        t[static_cast<size_t>(jj)] = x;
        m_new = std::max(m_new, x);
      }
      if (m_new == kNegInf) continue;  // nothing visible yet
      const float shift = bug == Bug::HalfRescale ? (m - m_new) / 2 : m - m_new;
      const float alpha = m == kNegInf ? 0.f : std::exp2(shift);
      l *= alpha;
      for (float& a : acc) a *= alpha;
      for (int64_t jj = 0; jj < n; ++jj) {
        const float p = std::exp2(t[static_cast<size_t>(jj)] - m_new + offset);
        l += p;
        const float pr = evosdpa::host::round_p(dtype, p);
        const float* v = kv_row(s, e.in.v, r, key0 + jj);
        for (int64_t d = 0; d < s.head_dim; ++d) acc[static_cast<size_t>(d)] += pr * v[d];
      }
      m = m_new;
    }
    float* o = &out.o[static_cast<size_t>(r * s.head_dim)];
    if (l == 0.f) {
      out.lse[static_cast<size_t>(r)] = kNegInf;
      return;
    }
    for (int64_t d = 0; d < s.head_dim; ++d) o[d] = evosdpa::host::round_to(e.o_dtype, acc[static_cast<size_t>(d)] / l);
    out.lse[static_cast<size_t>(r)] = (m - offset + std::log2(l)) / kLog2e;
  });
  return out;
}

}  // namespace emulation
