#include "cpu/backward_emulation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <type_traits>
#include <utility>

using evosdpa::host::BackwardExpected;
using evosdpa::host::GradientsOf;
using evosdpa::host::sampled;
using evosdpa::host::Shape;

namespace backward_emulation {
namespace {

constexpr int64_t kBlock = 64;  // keys per dQ block and query rows per dK/dV block, as in the GPU kernels

// The last key row i may see under the correct mask (-1 or less: none).
int64_t limit(const Shape& s, int64_t i) {
  switch (s.causal) {
    case EVOSDPA_CAUSAL_TOP_LEFT: return std::min(i, s.seqlen_k - 1);
    case EVOSDPA_CAUSAL_BOTTOM_RIGHT: return std::min(i + s.seqlen_k - s.seqlen_q, s.seqlen_k - 1);
    default: return s.seqlen_k - 1;
  }
}

// Whether row i sees key j in a kernel with `bug`.
bool sees(const Shape& s, Bug bug, int64_t i, int64_t j) {
  const bool causal = s.causal != EVOSDPA_CAUSAL_NONE;
  if (bug == Bug::DiagonalExcluded && causal) return j < limit(s, i);
  if (bug == Bug::DiagonalPlusOne && causal) return j <= limit(s, i) + 1;
  if (bug == Bug::LastKeyBlockSkipped && j >= (s.seqlen_k - 1) / kBlock * kBlock) return false;
  return s.visible(i, j);
}

// Run body(i) for the indices i in [0, n) that `keep` admits, on all cores.
template <typename Keep, typename F>
void parallel_for(int64_t n, Keep keep, F body) {
  const int64_t workers = std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int64_t i = w; i < n; i += workers)
        if (keep(i)) body(i);
    });
  for (auto& t : pool) t.join();
}

// A dot product as an MMA accumulates it: 16-element partial sums added to the accumulator.
template <typename T, typename A, typename B>
T dot16(const A* a, const B* b, int64_t n) {
  T total = 0;
  for (int64_t k0 = 0; k0 < n; k0 += 16) {
    T part = 0;
    for (int64_t d = k0; d < std::min<int64_t>(k0 + 16, n); ++d) part += static_cast<T>(a[d]) * static_cast<T>(b[d]);
    total += part;
  }
  return total;
}

// The kernel model in T: float (rounding where a kernel in the dtype rounds) or double (no rounding but
// the bug's own), reading O and lse in T.
template <typename T>
class Model {
 public:
  Model(const Shape& s, evosdpa_dtype_t dtype, const BackwardExpected& e, const std::vector<T>& o,
        const std::vector<T>& lse, Bug bug)
      : s_(s),
        dtype_(dtype),
        e_(e),
        bug_(bug),
        scale_(static_cast<T>(s.effective_scale())),
        delta_(static_cast<size_t>(s.rows()), T(0)),
        shift_(static_cast<size_t>(s.rows())) {
    const int64_t D = s.head_dim;
    for (int64_t r = 0; r < s.rows(); ++r) {
      if (bug != Bug::DeltaDropped)
        delta_[static_cast<size_t>(r)] =
            dot16<T>(&e.in.dout[static_cast<size_t>(r * D)], &o[static_cast<size_t>(r * D)], D);
      shift_[static_cast<size_t>(r)] = lse[static_cast<size_t>(r)] * kLog2e;
    }
    if (bug == Bug::PUnnormalised) {  // the row max of the scaled scores in place of lse
      parallel_for(
          s.rows(), [](int64_t) { return true; },
          [&](int64_t r) {
            T mx = -std::numeric_limits<T>::infinity();
            for (int64_t j = 0; j < s.seqlen_k; ++j)
              if (sees(s_, bug_, r % s.seqlen_q, j)) mx = std::max(mx, score_log2(r, j));
            shift_[static_cast<size_t>(r)] = mx;
          });
    }
  }

  GradientsOf<T> run() const {
    GradientsOf<T> g;
    const int64_t D = s_.head_dim;
    g.dq.assign(static_cast<size_t>(s_.q_elems()), T(0));
    g.dk.assign(static_cast<size_t>(s_.kv_elems()), T(0));
    g.dv.assign(static_cast<size_t>(s_.kv_elems()), T(0));
    const int64_t step = e_.row_step;
    // dQ: one 64-key block's partial sum at a time, the blocks added in reverse (FAST mode's atomics may
    // land in any order).
    parallel_for(
        s_.rows(), [&](int64_t r) { return sampled(r % s_.seqlen_q, s_.seqlen_q, step); },
        [&](int64_t r) {
          std::vector<std::vector<T>> parts;
          for (int64_t j0 = 0; j0 < s_.seqlen_k; j0 += kBlock) {
            std::vector<T> part(static_cast<size_t>(D), T(0));
            for (int64_t j = j0; j < std::min(j0 + kBlock, s_.seqlen_k); ++j) {
              if (!sees(s_, bug_, r % s_.seqlen_q, j)) continue;
              const T ds = round_ds(p_ds(r, j).second);
              const float* k = key(e_.in.k, r, j);
              for (int64_t d = 0; d < D; ++d) part[static_cast<size_t>(d)] += ds * k[d];
            }
            parts.push_back(std::move(part));
          }
          std::vector<T> acc(static_cast<size_t>(D), T(0));
          for (auto it = parts.rbegin(); it != parts.rend(); ++it)
            for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += (*it)[static_cast<size_t>(d)];
          for (int64_t d = 0; d < D; ++d)
            g.dq[static_cast<size_t>(r * D + d)] = round(scale_ * acc[static_cast<size_t>(d)]);
        });
    // dK, dV: per query head of the group, one 64-row query block's partial sum at a time.
    const int64_t keys = s_.batch * s_.heads_kv * s_.seqlen_k, group = s_.heads_q / s_.heads_kv;
    parallel_for(
        keys, [&](int64_t t) { return sampled(t % s_.seqlen_k, s_.seqlen_k, step); },
        [&](int64_t t) {
          const int64_t j = t % s_.seqlen_k, kv = t / s_.seqlen_k, b = kv / s_.heads_kv;
          std::vector<T> acc_k(static_cast<size_t>(D), T(0)), acc_v(static_cast<size_t>(D), T(0));
          const int64_t heads = bug_ == Bug::GqaOneHead ? 1 : group;
          for (int64_t gq = 0; gq < heads; ++gq) {
            const int64_t row0 = (b * s_.heads_q + kv % s_.heads_kv * group + gq) * s_.seqlen_q;
            for (int64_t i0 = 0; i0 < s_.seqlen_q; i0 += kBlock) {
              std::vector<T> part_k(static_cast<size_t>(D), T(0)), part_v(static_cast<size_t>(D), T(0));
              for (int64_t i = i0; i < std::min(i0 + kBlock, s_.seqlen_q); ++i) {
                if (!sees(s_, bug_, i, j)) continue;
                const auto [p, ds_raw] = p_ds(row0 + i, j);
                const T pr = round(p), ds = round_ds(ds_raw);
                const float* q = &e_.in.q[static_cast<size_t>((row0 + i) * D)];
                const float* go = &e_.in.dout[static_cast<size_t>((row0 + i) * D)];
                for (int64_t d = 0; d < D; ++d) {
                  part_v[static_cast<size_t>(d)] += pr * go[d];
                  part_k[static_cast<size_t>(d)] += ds * q[d];
                }
              }
              for (int64_t d = 0; d < D; ++d) {
                acc_k[static_cast<size_t>(d)] += part_k[static_cast<size_t>(d)];
                acc_v[static_cast<size_t>(d)] += part_v[static_cast<size_t>(d)];
              }
            }
          }
          const T dk_scale = bug_ == Bug::DkScaleMissing ? T(1) : scale_;
          for (int64_t d = 0; d < D; ++d) {
            g.dk[static_cast<size_t>(t * D + d)] = round(dk_scale * acc_k[static_cast<size_t>(d)]);
            g.dv[static_cast<size_t>(t * D + d)] = round(acc_v[static_cast<size_t>(d)]);
          }
        });
    return g;
  }

 private:
  static constexpr bool kExact = std::is_same_v<T, double>;
  static constexpr T kLog2e = static_cast<T>(1.4426950408889634);

  const float* key(const std::vector<float>& t, int64_t r, int64_t j) const {
    const int64_t b = r / (s_.heads_q * s_.seqlen_q), h = r / s_.seqlen_q % s_.heads_q;
    const int64_t kv = b * s_.heads_kv + h / (s_.heads_q / s_.heads_kv);
    return &t[static_cast<size_t>((kv * s_.seqlen_k + j) * s_.head_dim)];
  }
  T score_log2(int64_t r, int64_t j) const {
    return dot16<T>(&e_.in.q[static_cast<size_t>(r * s_.head_dim)], key(e_.in.k, r, j), s_.head_dim) *
           (scale_ * kLog2e);
  }
  // P = 2^(S log2e - lse log2e), and dS = P (dP - Delta).
  std::pair<T, T> p_ds(int64_t r, int64_t j) const {
    const T p = std::exp2(score_log2(r, j) - shift_[static_cast<size_t>(r)]);
    const T dp = dot16<T>(&e_.in.dout[static_cast<size_t>(r * s_.head_dim)], key(e_.in.v, r, j), s_.head_dim);
    return {p, p * (dp - delta_[static_cast<size_t>(r)])};
  }
  T round(T x) const {
    if constexpr (kExact)
      return x;
    else
      return evosdpa::host::round_to(dtype_, x);
  }
  T round_ds(T ds) const {
    if (bug_ == Bug::DsWrongType) {
      const evosdpa_dtype_t other = dtype_ == EVOSDPA_DTYPE_BFLOAT16 ? EVOSDPA_DTYPE_FLOAT16 : EVOSDPA_DTYPE_BFLOAT16;
      return evosdpa::host::decode(dtype_, evosdpa::host::encode(other, static_cast<float>(ds)));
    }
    return round(ds);
  }

  const Shape& s_;
  evosdpa_dtype_t dtype_;
  const BackwardExpected& e_;
  Bug bug_;
  T scale_;
  std::vector<T> delta_;  // rowsum(dO * O); 0 with DeltaDropped
  std::vector<T> shift_;  // lse log2e (the row max with PUnnormalised)
};

}  // namespace

const char* bug_name(Bug b) {
  switch (b) {
    case Bug::None: return "none";
    case Bug::DkScaleMissing: return "dk_scale_missing";
    case Bug::PUnnormalised: return "p_unnormalised";
    case Bug::DeltaDropped: return "delta_dropped";
    case Bug::LastKeyBlockSkipped: return "last_key_block_skipped";
    case Bug::DiagonalExcluded: return "diagonal_excluded";
    case Bug::DiagonalPlusOne: return "diagonal_plus_one";
    case Bug::GqaOneHead: return "gqa_one_head";
    case Bug::DsWrongType: return "ds_wrong_type";
  }
  return "?";
}

bool can_change(Bug b, const Shape& s) {
  if (s.seqlen_q == 0 || s.seqlen_k == 0) return false;  // no pair to mis-handle: every gradient is 0
  const double scale = s.effective_scale();
  // With one visible key a row's P is 1 and O its V row (exact: V holds dtype values), so dP = Delta and
  // dS = 0: dS bugs need a row that sees two keys (the last row sees the most).
  const bool ds_nonzero = limit(s, s.seqlen_q - 1) >= 1;
  switch (b) {
    case Bug::DkScaleMissing: return scale != 1.0 && ds_nonzero;
    case Bug::PUnnormalised: return ds_nonzero;   // lse = the row max when a row sees one key
    case Bug::DeltaDropped: return scale != 0.0;  // dS = P dP reaches dQ and dK through the scale
    case Bug::DsWrongType: return scale != 0.0 && ds_nonzero;
    case Bug::LastKeyBlockSkipped: return s.visible(s.seqlen_q - 1, (s.seqlen_k - 1) / kBlock * kBlock);
    case Bug::GqaOneHead: return s.heads_q > s.heads_kv;
    case Bug::DiagonalExcluded:
    case Bug::DiagonalPlusOne:
      for (int64_t i = 0; i < s.seqlen_q; ++i)
        for (int64_t j : {limit(s, i), limit(s, i) + 1})
          if (j >= 0 && j < s.seqlen_k && sees(s, b, i, j) != s.visible(i, j)) return true;
      return false;
    case Bug::None: return false;
  }
  return false;
}

evosdpa::host::Gradients run(const Shape& s, evosdpa_dtype_t dtype, const BackwardExpected& e, Bug bug) {
  return Model<float>(s, dtype, e, e.in.o, e.in.lse, bug).run();
}

GradientsOf<double> run_exact(const Shape& s, evosdpa_dtype_t dtype, const BackwardExpected& e, Bug bug) {
  const std::vector<double> o(e.in.o.begin(), e.in.o.end()), lse(e.in.lse.begin(), e.in.lse.end());
  return Model<double>(s, dtype, e, o, lse, bug).run();
}

}  // namespace backward_emulation
