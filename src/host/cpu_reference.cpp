#include "host/cpu_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

namespace evosdpa::host {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kLog2e = 1.4426950408889634f;

size_t q_index(const Shape& s, int64_t b, int64_t h, int64_t i) {
  return static_cast<size_t>(((b * s.heads_q + h) * s.seqlen_q + i) * s.head_dim);
}
size_t kv_index(const Shape& s, int64_t b, int64_t h, int64_t j) {
  const int64_t hk = h / (s.heads_q / s.heads_kv);
  return static_cast<size_t>(((b * s.heads_kv + hk) * s.seqlen_k + j) * s.head_dim);
}

// Run body(b, h) for every (batch, head) on all cores.
template <typename F>
void for_each_head(const Shape& s, F body) {
  const int64_t n = s.batch * s.heads_q;
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int64_t bh = w; bh < n; bh += workers) body(bh / s.heads_q, bh % s.heads_q);
    });
  for (auto& t : pool) t.join();
}

}  // namespace

Reference attention_f64(const Shape& s, const Inputs& in, int64_t row_step) {
  Reference r;
  r.o.assign(static_cast<size_t>(s.q_elems()), 0.0);
  r.lse.assign(static_cast<size_t>(s.rows()), std::numeric_limits<double>::quiet_NaN());
  const double scale = s.effective_scale();
  for_each_head(s, [&](int64_t b, int64_t h) {
    std::vector<double> scores(static_cast<size_t>(s.seqlen_k));
      for (int64_t i = 0; i < s.seqlen_q; i += row_step) {
        r.lse[static_cast<size_t>((b * s.heads_q + h) * s.seqlen_q + i)] = -kInf;
        const float* q = &in.q[q_index(s, b, h, i)];
        double mx = -kInf;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (!s.visible(i, j)) continue;
          const float* k = &in.k[kv_index(s, b, h, j)];
          double dot = 0.0;
          for (int64_t d = 0; d < s.head_dim; ++d) dot += static_cast<double>(q[d]) * k[d];
          scores[static_cast<size_t>(j)] = s.cap(dot * scale) + in.score_bias(s, b, h, i, j);
          mx = std::max(mx, scores[static_cast<size_t>(j)]);
        }
        if (mx == -kInf) continue;
        double sum = 0.0;
        double* o = &r.o[q_index(s, b, h, i)];
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (!s.visible(i, j)) continue;
          const double w = std::exp(scores[static_cast<size_t>(j)] - mx);
          sum += w;
          const float* v = &in.v[kv_index(s, b, h, j)];
          for (int64_t d = 0; d < s.head_dim; ++d) o[d] += w * v[d];
        }
        for (int64_t d = 0; d < s.head_dim; ++d) o[d] /= sum;
        r.lse[static_cast<size_t>((b * s.heads_q + h) * s.seqlen_q + i)] = mx + std::log(sum);
      }
  });
  return r;
}

float round_p(evosdpa_dtype_t dtype, float p) {
  return dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ? round_to_e4m3(p) : round_to(dtype, p);
}

std::vector<float> attention_fused_baseline(const Shape& s, const Inputs& in, evosdpa_dtype_t dtype,
                                            int64_t row_step, evosdpa_dtype_t o_dtype) {
  const bool fp8 = dtype == EVOSDPA_DTYPE_FLOAT8_E4M3;
  const evosdpa_dtype_t out_dtype = fp8 ? o_dtype : dtype;
  std::vector<float> out(static_cast<size_t>(s.q_elems()), 0.f);
  const float scale = static_cast<float>(s.effective_scale());
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for_each_head(s, [&](int64_t b, int64_t h) {
    std::vector<float> p(static_cast<size_t>(s.seqlen_k));
    std::vector<float> acc(static_cast<size_t>(s.head_dim));
    for (int64_t i = 0; i < s.seqlen_q; i += row_step) {
      const float* q = &in.q[q_index(s, b, h, i)];
      float mx = kNegInf;
      for (int64_t j = 0; j < s.seqlen_k; ++j) {
        float sc = kNegInf;
        if (s.visible(i, j)) {
          const float* k = &in.k[kv_index(s, b, h, j)];
          float dot = 0.f;
          for (int64_t d = 0; d < s.head_dim; ++d) dot += q[d] * k[d];
          sc = s.softcap > 0 ? static_cast<float>(s.softcap * std::tanh(static_cast<double>(dot * scale) / s.softcap))
                             : dot * scale;
          sc += static_cast<float>(in.score_bias(s, b, h, i, j));
        }
        p[static_cast<size_t>(j)] = sc;
        mx = std::max(mx, sc);
      }
      if (mx == kNegInf) continue;
      float l = 0.f;
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t j = 0; j < s.seqlen_k; ++j) {
        const float x = p[static_cast<size_t>(j)] - mx;
        const float e = fp8 ? std::exp2(x * kLog2e + kFp8MaxOffset) : std::exp(x);
        l += e;
        const float w = round_p(dtype, e);
        const float* v = &in.v[kv_index(s, b, h, j)];
        for (int64_t d = 0; d < s.head_dim; ++d) acc[static_cast<size_t>(d)] += w * v[d];
      }
      float* o = &out[q_index(s, b, h, i)];
      for (int64_t d = 0; d < s.head_dim; ++d) o[d] = round_to(out_dtype, acc[static_cast<size_t>(d)] / l);
    }
  });
  return out;
}

double max_abs_error(const std::vector<float>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return kInf;
  double err = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return kInf;
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return err;
}

double max_lse_error(const std::vector<float>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return kInf;
  double err = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      if (!(std::isinf(got[i]) && (got[i] < 0) == (want[i] < 0))) return kInf;
      continue;
    }
    if (!std::isfinite(got[i])) return kInf;
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return err;
}

}  // namespace evosdpa::host
