// A kernel family's tile table with per-GPU-model tuned rows (issue 10): the hand-made rows, then each
// row of the tuned tables (tuned/sm<cc>_<SMs>.inc, written by evosdpa-tune --emit-table) not already
// among them, as one table that device code indexes in constant expressions. mma_config.hpp and
// wgmma_config.hpp build their kConfigs so; hand-made rows come first, so a search of the table for a
// bucket finds the hand-made row first.
#pragma once

#if defined(__CUDACC__)
#define EVOSDPA_ROWS_HOST_DEVICE __host__ __device__
#else
#define EVOSDPA_ROWS_HOST_DEVICE
#endif

namespace evosdpa::detail {

// A row evosdpa-tune chose for one GPU model, which selection uses on that model in place of the
// hand-made row of the same bucket.
template <typename Config>
struct TunedRowOf {
  int cc;        // compute capability, major * 10 + minor (0: no model, the placeholder row)
  int sm_count;  // multiprocessors of the model measured (an H100 SXM has 132, an H100 PCIe 114)
  Config config;
};

// The first `count` of N rows.
template <typename Config, int N>
struct RowTable {
  Config rows[N];
  int count;
  EVOSDPA_ROWS_HOST_DEVICE constexpr const Config& operator[](int i) const { return rows[i]; }
  constexpr const Config* begin() const { return rows; }
  constexpr const Config* end() const { return rows + count; }
};

// The hand-made rows, then each tuned row of a model (cc != 0) that `same` finds in none before it.
template <typename Config, int H, int T>
constexpr RowTable<Config, H + T> collect_rows(const Config (&hand)[H], const TunedRowOf<Config> (&tuned)[T],
                                               bool (*same)(const Config&, const Config&)) {
  RowTable<Config, H + T> list{};
  const auto add = [&](const Config& c) {
    for (int i = 0; i < list.count; ++i)
      if (same(list.rows[i], c)) return;
    list.rows[list.count++] = c;
  };
  for (const Config& c : hand) add(c);
  for (const TunedRowOf<Config>& t : tuned)
    if (t.cc != 0) add(t.config);
  return list;
}

// `all`'s rows in a table of exactly their count (N = all.count).
template <int N, typename Config, int M>
constexpr RowTable<Config, N> fit_rows(const RowTable<Config, M>& all) {
  RowTable<Config, N> t{};
  for (int i = 0; i < N; ++i) t.rows[i] = all.rows[i];
  t.count = N;
  return t;
}

}  // namespace evosdpa::detail
