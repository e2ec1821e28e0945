// The evolutionary elite loop of evosdpa-tune (issue 10): keep the K best genomes (elites); each
// generation, make children that change two levers of an elite, evaluate them (compile, verify, time:
// the Evaluate callback), and let a child replace the worst elite only if it is faster by
// max(3%, 2x the combined relative standard error of the two measurements); stop when no child has been
// accepted for `patience` generations, at a generation limit, or when no new valid child can be made.
// The state (elites, log, the generator's state) round-trips through JSON (search_json.hpp), so a search
// interrupted between generations resumes exactly where it stopped.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "genome.hpp"

namespace evosdpa::tune {

struct Fitness {
  bool ok = false;
  double speedup = 0;     // geometric-mean speedup over the shape set against the baseline (> 1: faster)
  double rel_stderr = 0;  // relative standard error of `speedup` (timing noise)
  std::string reason;     // when not ok: why the candidate was discarded (spills, failed verification, ...)
};
using Evaluate = std::function<Fitness(const Genome&)>;

struct Options {
  int elites = 3;                   // K, the population kept
  int levers_per_child = 2;         // levers a child changes from its parent
  int children_per_generation = 3;  // one per elite, round-robin
  double min_gain = 0.03;           // a child must be at least this much faster than the worst elite ...
  double noise_factor = 2.0;        // ... and by this many combined relative standard errors
  int patience = 3;                 // generations without an accepted child: converged
  int max_generations = 50;
  int max_tries = 500;  // mutation attempts for one valid child not evaluated before
  uint64_t seed = 1;
};

struct Elite {
  Genome genome;
  double speedup = 0, rel_stderr = 0;
};

// One evaluated genome, in evaluation order.
struct Record {
  int generation = 0;   // 0: the starting population
  Genome genome;
  Genome parent;        // empty in the starting population
  Fitness fitness;
  std::string verdict;  // "elite", "replaced <genome>", "kept out: ...", "discarded: <reason>"
};

// The GPU a search measured on: its tuned table is for this model only.
struct TunedDevice {
  std::string name;  // as the CUDA runtime reports it, e.g. "NVIDIA H100 80GB HBM3"
  int cc = 0;        // compute capability, major * 10 + minor (0: not recorded)
  int sm_count = 0;
};

struct State {
  Options options;
  TunedDevice device;
  std::string family;  // the GenomeSpace's, checked on resume
  std::string rng;     // the generator's state between generations
  int generation = 0;
  int stale = 0;  // generations in a row without an accepted child
  bool done = false;
  std::string stop_reason;
  std::vector<Elite> elites;  // fastest first
  std::vector<Record> log;
};

// The gain (relative) a child must show over an incumbent: max(min_gain, noise_factor * the combined
// relative standard error sqrt(a^2 + b^2)).
double required_gain(const Elite& incumbent, const Fitness& child, const Options& o);
bool accepts(const Elite& incumbent, const Fitness& child, const Options& o);

// A child of `parent` that differs in exactly min(levers, changeable levers) levers, each set to another of
// its legal values, which the space accepts and `seen` has not; empty after max_tries attempts.
Genome mutate(const Genome& parent, const GenomeSpace& space, int levers, std::mt19937_64& rng,
              const std::function<bool(const Genome&)>& seen, int max_tries);

// Evaluate the starting population (genomes the space refuses are logged and skipped) and keep the best K.
State start(const GenomeSpace& space, const std::vector<Genome>& initial, const Options& options,
            const Evaluate& evaluate);
// One generation. Returns false (and evaluates nothing) once the search has stopped.
bool step(State& state, const GenomeSpace& space, const Evaluate& evaluate);

// The best elite's speedup after each generation 0..state.generation, from the log: the largest among
// the candidates that became elites so far (a replacement removes the worst elite, never the best).
std::vector<double> best_by_generation(const State& state);

}  // namespace evosdpa::tune
