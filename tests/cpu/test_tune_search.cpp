// evosdpa-tune's search (tune/search.hpp) against a synthetic fitness function: mutation stays inside the
// family's rules and changes two levers, elitism, the noise-aware acceptance, convergence, and that a
// search resumed from its JSON state ends exactly as an uninterrupted one with the same seed.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "search.hpp"
#include "search_json.hpp"

using namespace evosdpa::tune;

namespace {

// Four levers; a + b <= 15 is the "family's" rule; c = 4 with d = 1 fails "verification".
GenomeSpace toy_space() {
  GenomeSpace s;
  s.family = "toy";
  s.levers = {{"a", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}, {"b", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}, {"c", {0, 1, 2, 3, 4}}, {"d", {0, 1}}};
  s.invalid_reason = [](const Genome& g) { return g[0] + g[1] > 15 ? std::string("a + b > 15") : std::string(); };
  return s;
}

double toy_speed(const Genome& g) {
  const double a = g[0] - 7, b = g[1] - 6;
  return std::exp(-(a * a + b * b) / 20) * (1 + 0.1 * g[2]) * (g[3] ? 1.05 : 1.0);
}

// Deterministic "measurement noise" of +-0.4% from the genome, and a 0.5% standard error.
Fitness toy_fitness(const Genome& g) {
  if (g[2] == 4 && g[3] == 1) return {false, 0, 0, "failed verification against float64"};
  uint64_t h = 1469598103934665603ull;
  for (int v : g) h = (h ^ static_cast<uint64_t>(v + 1)) * 1099511628211ull;
  const double noise = (static_cast<double>(h % 1001) / 1000.0 - 0.5) * 0.008;
  return {true, toy_speed(g) * (1 + noise), 0.005, ""};
}

Options toy_options(uint64_t seed = 7) {
  Options o;
  o.seed = seed;
  o.patience = 6;
  o.max_generations = 60;
  return o;
}

const std::vector<Genome> kStart = {{1, 1, 0, 0}, {2, 1, 0, 0}, {1, 2, 1, 0}, {9, 9, 0, 0} /* invalid */};

TEST(TuneSearch, MutationChangesTwoLeversWithinTheRules) {
  const GenomeSpace s = toy_space();
  std::mt19937_64 rng(3);
  std::set<Genome> seen;
  Genome parent = {5, 5, 2, 0};
  for (int i = 0; i < 2000; ++i) {
    const Genome child = mutate(parent, s, 2, rng, [&](const Genome& g) { return seen.count(g) > 0; }, 500);
    if (child.empty()) break;  // every valid neighbour two levers away has been seen
    int changed = 0;
    for (size_t k = 0; k < child.size(); ++k) changed += child[k] != parent[k];
    ASSERT_EQ(changed, 2) << s.describe(child);
    ASSERT_EQ(s.check(child), "") << s.describe(child);
    ASSERT_TRUE(seen.insert(child).second) << "proposed twice: " << s.describe(child);
  }
  EXPECT_GT(seen.size(), 100u);
  // Nothing new to propose: empty.
  const Genome none = mutate(parent, s, 2, rng, [](const Genome&) { return true; }, 50);
  EXPECT_TRUE(none.empty());
}

TEST(TuneSearch, AcceptanceNeedsThreePercentAndTwiceTheCombinedNoise) {
  const Options o;
  const Elite incumbent{{}, 1.0, 0.01};
  EXPECT_FALSE(accepts(incumbent, {true, 1.025, 0.001, ""}, o));  // below 3%
  EXPECT_TRUE(accepts({{}, 1.0, 0.001}, {true, 1.031, 0.001, ""}, o));
  // 5% faster, but each measurement 2% noisy: 2 * sqrt(2) * 2% = 5.7% needed.
  EXPECT_NEAR(required_gain({{}, 1.0, 0.02}, {true, 1.05, 0.02, ""}, o), 2 * std::sqrt(2.0) * 0.02, 1e-12);
  EXPECT_FALSE(accepts({{}, 1.0, 0.02}, {true, 1.05, 0.02, ""}, o));
  EXPECT_TRUE(accepts({{}, 1.0, 0.02}, {true, 1.06, 0.02, ""}, o));
  EXPECT_FALSE(accepts(incumbent, {false, 9.0, 0.0, "spills"}, o));  // never a failed candidate
}

TEST(TuneSearch, ElitesOnlyImproveAndTheSearchConverges) {
  const GenomeSpace s = toy_space();
  State st = start(s, kStart, toy_options(), toy_fitness);
  ASSERT_EQ(st.elites.size(), 3u);
  EXPECT_EQ(st.log.back().verdict, "discarded: a + b > 15");
  const double first = st.elites.front().speedup;
  double best = first;
  while (step(st, s, toy_fitness)) {
    ASSERT_LE(st.elites.size(), 3u);
    for (size_t i = 1; i < st.elites.size(); ++i) ASSERT_GE(st.elites[i - 1].speedup, st.elites[i].speedup);
    ASSERT_GE(st.elites.front().speedup, best) << "generation " << st.generation << " lost the best elite";
    best = st.elites.front().speedup;
  }
  EXPECT_TRUE(st.done);
  EXPECT_FALSE(st.stop_reason.empty());
  // Against the optimum of the whole valid space (brute force).
  double optimum = 0;
  for (int a = 0; a < 10; ++a)
    for (int b = 0; b < 10; ++b)
      for (int c = 0; c < 5; ++c)
        for (int d = 0; d < 2; ++d) {
          const Genome g{a, b, c, d};
          if (s.check(g).empty() && toy_fitness(g).ok) optimum = std::max(optimum, toy_speed(g));
        }
  EXPECT_GT(best, 3 * first);
  // The report's curve: one point per generation, never falling, from the first best to the last.
  const std::vector<double> curve = best_by_generation(st);
  ASSERT_EQ(curve.size(), static_cast<size_t>(st.generation) + 1);
  EXPECT_EQ(curve.front(), first);
  EXPECT_EQ(curve.back(), best);
  for (size_t g = 1; g < curve.size(); ++g) EXPECT_GE(curve[g], curve[g - 1]) << g;
  EXPECT_GT(best, 0.9 * optimum) << "stopped at " << s.describe(st.elites.front().genome) << ": " << st.stop_reason;
  // Every elite was evaluated and passed; a discarded candidate carries its reason in the log.
  bool saw_discard = false;
  for (const Record& r : st.log) {
    if (!r.fitness.ok) {
      saw_discard = true;
      EXPECT_EQ(r.verdict.rfind("discarded: ", 0), 0u) << r.verdict;
    }
    for (const Elite& e : st.elites)
      if (e.genome == r.genome) EXPECT_TRUE(r.fitness.ok);
  }
  EXPECT_TRUE(saw_discard);
}

TEST(TuneSearch, NoisyMeasurementsNeedLargerGains) {
  // The same landscape with 5% standard errors: a replacement needs 2 * sqrt(2) * 5% = 14% at least.
  const GenomeSpace s = toy_space();
  const Evaluate noisy = [](const Genome& g) {
    Fitness f = toy_fitness(g);
    f.rel_stderr = 0.05;
    return f;
  };
  State st = start(s, kStart, toy_options(), noisy);
  while (step(st, s, noisy)) {
  }
  for (const Record& r : st.log)
    if (r.verdict.rfind("replaced", 0) == 0) {
      double worst_before = 0;  // the replaced elite's speed, from its own record
      for (const Record& q : st.log)
        if (r.verdict == "replaced " + s.describe(q.genome)) worst_before = q.fitness.speedup;
      EXPECT_GE(r.fitness.speedup, worst_before * (1 + 2 * std::sqrt(2.0) * 0.05) - 1e-12) << r.verdict;
    }
}

TEST(TuneSearch, ResumedFromJsonEndsAsAnUninterruptedRun) {
  const GenomeSpace s = toy_space();
  State whole = start(s, kStart, toy_options(11), toy_fitness);
  while (step(whole, s, toy_fitness)) {
  }
  State part = start(s, kStart, toy_options(11), toy_fitness);
  for (int i = 0; i < 3; ++i) step(part, s, toy_fitness);
  // As evosdpa-tune does between device calls: to text and back.
  State resumed = state_from_json(nlohmann::json::parse(to_json(part).dump()));
  EXPECT_EQ(to_json(resumed), to_json(part));
  while (step(resumed, s, toy_fitness)) {
  }
  EXPECT_EQ(to_json(resumed).dump(), to_json(whole).dump());
  EXPECT_GT(whole.generation, 3);
  // Another seed takes another path.
  State other = start(s, kStart, toy_options(12), toy_fitness);
  while (step(other, s, toy_fitness)) {
  }
  EXPECT_NE(to_json(other)["log"].dump(), to_json(whole)["log"].dump());
}

TEST(TuneSearch, NoValidStartStopsAtOnce) {
  const GenomeSpace s = toy_space();
  State st = start(s, {{9, 9, 0, 0}}, toy_options(), toy_fitness);
  EXPECT_TRUE(st.done);
  EXPECT_FALSE(step(st, s, toy_fitness));
}

}  // namespace
