#include "search.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace evosdpa::tune {
namespace {

// A uniform draw in [0, n) by rejection: the same sequence from any standard library (the <random>
// distributions are implementation-defined), so a state resumes identically after a rebuild.
uint64_t uniform(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = rng();
  while (x >= limit);
  return x % n;
}

std::string save(const std::mt19937_64& rng) {
  std::ostringstream s;
  s << rng;
  return s.str();
}

std::mt19937_64 load(const std::string& state) {
  std::mt19937_64 rng;
  std::istringstream s(state);
  s >> rng;
  return rng;
}

bool in_log(const State& st, const Genome& g) {
  for (const Record& r : st.log)
    if (r.genome == g) return true;
  return false;
}

void sort_elites(std::vector<Elite>& e) {
  std::stable_sort(e.begin(), e.end(), [](const Elite& a, const Elite& b) { return a.speedup > b.speedup; });
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * x);
  return buf;
}

}  // namespace

double required_gain(const Elite& incumbent, const Fitness& child, const Options& o) {
  const double combined = std::sqrt(incumbent.rel_stderr * incumbent.rel_stderr + child.rel_stderr * child.rel_stderr);
  return std::max(o.min_gain, o.noise_factor * combined);
}

bool accepts(const Elite& incumbent, const Fitness& child, const Options& o) {
  return child.ok && child.speedup >= incumbent.speedup * (1 + required_gain(incumbent, child, o));
}

Genome mutate(const Genome& parent, const GenomeSpace& space, int levers, std::mt19937_64& rng,
              const std::function<bool(const Genome&)>& seen, int max_tries) {
  std::vector<int> changeable;
  for (size_t i = 0; i < space.levers.size(); ++i)
    if (space.levers[i].values.size() > 1) changeable.push_back(static_cast<int>(i));
  const int n = std::min<int>(levers, static_cast<int>(changeable.size()));
  if (n == 0) return {};
  for (int attempt = 0; attempt < max_tries; ++attempt) {
    std::vector<int> pool = changeable;
    Genome child = parent;
    for (int k = 0; k < n; ++k) {  // n distinct levers, each to another legal value
      const size_t pick = uniform(rng, pool.size());
      const int lever = pool[pick];
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(pick));
      std::vector<int> others;
      for (int v : space.levers[static_cast<size_t>(lever)].values)
        if (v != parent[static_cast<size_t>(lever)]) others.push_back(v);
      child[static_cast<size_t>(lever)] = others[uniform(rng, others.size())];
    }
    if (space.check(child).empty() && !seen(child)) return child;
  }
  return {};
}

State start(const GenomeSpace& space, const std::vector<Genome>& initial, const Options& options,
            const Evaluate& evaluate) {
  State st;
  st.options = options;
  st.family = space.family;
  st.rng = save(std::mt19937_64(options.seed));
  for (const Genome& g : initial) {
    if (in_log(st, g)) continue;
    Record r{0, g, {}, {}, ""};
    if (const std::string why = space.check(g); !why.empty()) {
      r.fitness.reason = why;
      r.verdict = "discarded: " + why;
    } else {
      r.fitness = evaluate(g);
      r.verdict = r.fitness.ok ? "candidate" : "discarded: " + r.fitness.reason;
      if (r.fitness.ok) st.elites.push_back({g, r.fitness.speedup, r.fitness.rel_stderr});
    }
    st.log.push_back(std::move(r));
  }
  sort_elites(st.elites);
  if (static_cast<int>(st.elites.size()) > options.elites) st.elites.resize(static_cast<size_t>(options.elites));
  for (Record& r : st.log)
    if (r.verdict == "candidate") {
      const bool kept = std::any_of(st.elites.begin(), st.elites.end(), [&](const Elite& e) { return e.genome == r.genome; });
      r.verdict = kept ? "elite" : "kept out: not among the " + std::to_string(options.elites) + " fastest";
    }
  if (st.elites.empty()) {
    st.done = true;
    st.stop_reason = "no genome of the starting population is valid and verified";
  }
  return st;
}

bool step(State& st, const GenomeSpace& space, const Evaluate& evaluate) {
  if (st.done) return false;
  const Options& o = st.options;
  std::mt19937_64 rng = load(st.rng);
  ++st.generation;
  bool accepted = false, made_any = false;
  const auto seen = [&](const Genome& g) { return in_log(st, g); };
  for (int c = 0; c < o.children_per_generation; ++c) {
    const Genome parent = st.elites[static_cast<size_t>(c) % st.elites.size()].genome;
    const Genome child = mutate(parent, space, o.levers_per_child, rng, seen, o.max_tries);
    if (child.empty()) continue;
    made_any = true;
    Record r{st.generation, child, parent, evaluate(child), ""};
    if (!r.fitness.ok) {
      r.verdict = "discarded: " + r.fitness.reason;
    } else if (static_cast<int>(st.elites.size()) < o.elites) {
      st.elites.push_back({child, r.fitness.speedup, r.fitness.rel_stderr});
      r.verdict = "elite";
      accepted = true;
    } else {
      const Elite& worst = st.elites.back();
      if (accepts(worst, r.fitness, o)) {
        r.verdict = "replaced " + space.describe(worst.genome);
        st.elites.back() = {child, r.fitness.speedup, r.fitness.rel_stderr};
        accepted = true;
      } else {
        r.verdict = "kept out: " + percent(r.fitness.speedup / worst.speedup - 1) + " against the worst elite, needs " +
                    percent(required_gain(worst, r.fitness, o));
      }
    }
    sort_elites(st.elites);
    st.log.push_back(std::move(r));
  }
  st.rng = save(rng);
  st.stale = accepted ? 0 : st.stale + 1;
  if (!made_any) {
    st.done = true;
    st.stop_reason = "no new valid child of the elites in " + std::to_string(o.max_tries) + " tries";
  } else if (st.stale >= o.patience) {
    st.done = true;
    st.stop_reason = "converged: no child accepted in " + std::to_string(o.patience) + " generations";
  } else if (st.generation >= o.max_generations) {
    st.done = true;
    st.stop_reason = "generation limit (" + std::to_string(o.max_generations) + ")";
  }
  return true;
}

std::vector<double> best_by_generation(const State& state) {
  std::vector<double> best(static_cast<size_t>(std::max(state.generation, 0)) + 1, 0.0);
  for (const Record& r : state.log) {
    const bool entered = r.verdict == "elite" || r.verdict.rfind("replaced ", 0) == 0;
    if (!entered || r.generation < 0 || r.generation > state.generation) continue;
    double& b = best[static_cast<size_t>(r.generation)];
    b = std::max(b, r.fitness.speedup);
  }
  for (size_t g = 1; g < best.size(); ++g) best[g] = std::max(best[g], best[g - 1]);
  return best;
}

}  // namespace evosdpa::tune
