#include "host/backward_reference.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

namespace evosdpa::host {
namespace {

// Run body(index) for every index in [0, n) on all cores.
template <typename F>
void parallel_for(int64_t n, F body) {
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int64_t i = w; i < n; i += workers) body(i);
    });
  for (auto& t : pool) t.join();
}

template <typename T>
T dot(const float* a, const float* b, int64_t n) {
  T sum = 0;
  for (int64_t d = 0; d < n; ++d) sum += static_cast<T>(a[d]) * static_cast<T>(b[d]);
  return sum;
}

// sum |a_d b_d|: what a float32 dot product's rounding scales with, however much its terms cancel.
template <typename T>
T abs_dot(const float* a, const float* b, int64_t n) {
  T sum = 0;
  for (int64_t d = 0; d < n; ++d) sum += std::abs(static_cast<T>(a[d]) * static_cast<T>(b[d]));
  return sum;
}

// The backward on the sampled rows and keys in T, with `round` applied where a fused kernel in the dtype
// rounds (P for dV; dS for dQ and dK; each gradient once): the identity in double gives the reference,
// rounding to the dtype in float the baseline.
// kMagnitude: every term taken by its absolute value (dS = P (sum |dO V| + sum |dO O|), sums of |dS| |K|,
// ...): the size of what the gradients' sums cancel, not the gradients. dP and Delta by their terms'
// absolute values, not the values': a kernel forms them in another order than the pre-pass does, and
// where they cancel (a row with one key: dP = Delta) their float32 roundings scale with the terms
// (wgmma_sm90, bf16, Lq = 129, Lk = 1, D = 128: dQ 1.49e-7 against 9.5e-8 allowed by |dP| + |Delta|).
template <typename T, typename Round, bool kMagnitude = false>
GradientsOf<T> backward(const Shape& s, const BackwardInputs& in, int64_t row_step, Round round) {
  const auto mag = [](T x) { return kMagnitude ? std::abs(x) : x; };
  GradientsOf<T> g;
  const int64_t D = s.head_dim, group = s.heads_q / s.heads_kv;
  g.dq.assign(static_cast<size_t>(s.q_elems()), T(0));
  g.dk.assign(static_cast<size_t>(s.kv_elems()), T(0));
  g.dv.assign(static_cast<size_t>(s.kv_elems()), T(0));
  const T scale = static_cast<T>(s.effective_scale());
  // Row r = (b * Hq + h) * Lq + i of Q, O, dO; key j of K/V head kv = b * Hkv + hk.
  const auto row_ptr = [&](const std::vector<float>& t, int64_t r) { return &t[static_cast<size_t>(r * D)]; };
  const auto key_at = [&](int64_t kv, int64_t j) { return static_cast<size_t>((kv * s.seqlen_k + j) * D); };
  // Delta from O as `in` holds it, as the kernels' pre-pass forms it.
  std::vector<T> delta(static_cast<size_t>(s.rows()));
  for (int64_t r = 0; r < s.rows(); ++r)
    delta[static_cast<size_t>(r)] = kMagnitude ? abs_dot<T>(row_ptr(in.dout, r), row_ptr(in.o, r), D)
                                               : dot<T>(row_ptr(in.dout, r), row_ptr(in.o, r), D);
  // P and dS of query row r and key j of K/V head kv, j visible to the row (so its lse is finite).
  const auto p_ds = [&](int64_t r, int64_t kv, int64_t j, T& p, T& ds) {
    p = std::exp(dot<T>(row_ptr(in.q, r), &in.k[key_at(kv, j)], D) * scale -
                 static_cast<T>(in.lse[static_cast<size_t>(r)]));
    const float* v = &in.v[key_at(kv, j)];
    const T dp = kMagnitude ? abs_dot<T>(row_ptr(in.dout, r), v, D) : dot<T>(row_ptr(in.dout, r), v, D);
    const T dl = delta[static_cast<size_t>(r)];
    ds = kMagnitude ? p * (dp + dl) : p * (dp - dl);
  };
  parallel_for(s.rows(), [&](int64_t r) {
    const int64_t i = r % s.seqlen_q, b = r / (s.heads_q * s.seqlen_q), h = r / s.seqlen_q % s.heads_q;
    if (!sampled(i, s.seqlen_q, row_step)) return;
    const int64_t kv = b * s.heads_kv + h / group;
    std::vector<T> acc(static_cast<size_t>(D), T(0));
    for (int64_t j = 0; j < s.seqlen_k; ++j)
      if (s.visible(i, j)) {
        T p, ds;
        p_ds(r, kv, j, p, ds);
        const T dsr = round(ds);
        const float* k = &in.k[key_at(kv, j)];
        for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += dsr * mag(k[d]);
      }
    for (int64_t d = 0; d < D; ++d) g.dq[static_cast<size_t>(r * D + d)] = round(scale * acc[static_cast<size_t>(d)]);
  });
  // dK and dV of the sampled keys, over every query row of every head of the key's group.
  parallel_for(s.batch * s.heads_kv * s.seqlen_k, [&](int64_t t) {
    const int64_t j = t % s.seqlen_k, kv = t / s.seqlen_k, b = kv / s.heads_kv;
    if (!sampled(j, s.seqlen_k, row_step)) return;
    std::vector<T> acc_k(static_cast<size_t>(D), T(0)), acc_v(static_cast<size_t>(D), T(0));
    for (int64_t h = kv % s.heads_kv * group; h < (kv % s.heads_kv + 1) * group; ++h)
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        if (!s.visible(i, j)) continue;
        const int64_t r = (b * s.heads_q + h) * s.seqlen_q + i;
        T p, ds;
        p_ds(r, kv, j, p, ds);
        const T pr = round(p), dsr = round(ds);
        const float* q = row_ptr(in.q, r);
        const float* go = row_ptr(in.dout, r);
        for (int64_t d = 0; d < D; ++d) {
          acc_v[static_cast<size_t>(d)] += pr * mag(go[d]);
          acc_k[static_cast<size_t>(d)] += dsr * mag(q[d]);
        }
      }
    for (int64_t d = 0; d < D; ++d) {
      g.dk[key_at(kv, j) + static_cast<size_t>(d)] = round(scale * acc_k[static_cast<size_t>(d)]);
      g.dv[key_at(kv, j) + static_cast<size_t>(d)] = round(acc_v[static_cast<size_t>(d)]);
    }
  });
  return g;
}

}  // namespace

const char* grad_name(Grad g) { return g == Grad::dQ ? "dQ" : g == Grad::dK ? "dK" : "dV"; }

std::vector<float> random_dout(const Shape& s, evosdpa_dtype_t dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> dout(static_cast<size_t>(s.q_elems()));
  for (float& x : dout) x = round_to(dtype, dist(rng));
  return dout;
}

GradientsOf<double> attention_backward_f64(const Shape& s, const BackwardInputs& in, int64_t row_step) {
  return backward<double>(s, in, row_step, [](double x) { return x; });
}

GradientsOf<double> attention_backward_magnitude(const Shape& s, const BackwardInputs& in, int64_t row_step) {
  return backward<double, double (*)(double), true>(s, in, row_step, [](double x) { return x; });
}

Gradients attention_backward_fused_baseline(const Shape& s, const BackwardInputs& in, evosdpa_dtype_t dtype,
                                            int64_t row_step) {
  return backward<float>(s, in, row_step, [dtype](float x) { return round_to(dtype, x); });
}

}  // namespace evosdpa::host
