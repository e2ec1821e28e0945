// The fitness of a genome on the current GPU (issue 10), for any family: the candidate is compiled with
// NVRTC (candidate.hpp), refused if ptxas spilled or used a stack frame, verified against float64 on every
// shape of the workload under the library's accuracy contract (from a poisoned output), then timed against
// the family's own row compiled the same way. Fitness: the geometric mean over the shapes of baseline
// time / candidate time, with its relative standard error. The families' evaluators (evaluate_mma.hpp,
// evaluate_wgmma.hpp) say how a genome compiles and launches.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "candidate_runner.hpp"
#include "genome.hpp"
#include "host/accuracy_check.hpp"
#include "kernels/kernel_params.hpp"
#include "search.hpp"

namespace evosdpa::tune {

struct Workload {
  std::vector<host::Shape> shapes;  // of the space's head_dim
  evosdpa_dtype_t dtype = EVOSDPA_DTYPE_FLOAT16;
  int warmup = 5;
  int iters = 40;  // timed launches per shape, each between its own CUDA events; the median counts
};

// The current CUDA device as a tuned table names it; cc 0 when there is none.
TunedDevice current_device();

// One shape of the workload on the device: contiguous BHSD inputs from the float64 expectations' own
// random inputs, an output buffer, and the kernel parameters.
struct Problem {
  host::Shape shape;
  host::Expected expected;
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  detail::KernelParams params{};
  Problem() = default;
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;
  ~Problem();
};

// A launch of a candidate on one problem: its grid and its kernel's arguments, which `storage` holds
// (built before the timing, so that the timed launches do no host work).
struct KernelLaunch {
  long long grid = 0;
  std::shared_ptr<void> storage;
  std::vector<void*> args;
};

class Evaluator {
 public:
  explicit Evaluator(Workload workload);
  virtual ~Evaluator();
  // Uploads the problems, computes their float64 expectations and times the baseline row; "" or why not.
  std::string prepare();
  Fitness operator()(const Genome& g);

 protected:
  // The family's side: the table's own row (the baseline); the genome compiled, gated and loaded into
  // `runner` ("" or why it was discarded); its launch on one problem ("" or why not).
  virtual std::string baseline(Genome& out) const = 0;
  virtual std::string load(const Genome& g, const std::string& arch, CandidateRunner& runner) = 0;
  virtual std::string bind(const Genome& g, const Problem& p, KernelLaunch& out) = 0;

  // A compiled candidate, gated (no spills, no stack) and loaded into `runner`: "" or why it was
  // discarded (a compile error's first line; the whole log goes to stderr).
  static std::string gate_and_load(const CompiledCandidate& c, int threads, int smem, CandidateRunner& runner);

  Workload workload_;

 private:
  struct Timing {
    double median_us = 0, rel_stderr = 0;
  };
  // Compiles, gates, verifies and times `genome` on every problem; "" or why it was discarded.
  std::string measure(const Genome& genome, std::vector<Timing>& out);

  std::string arch_;
  std::vector<std::unique_ptr<Problem>> problems_;
  std::vector<Timing> baseline_;
};

}  // namespace evosdpa::tune
