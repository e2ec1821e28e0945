// The fitness of an mma_sm80 genome on the current GPU (issue 10): the candidate is compiled with NVRTC
// (candidate.hpp), refused if ptxas spilled or used a stack frame, verified against float64 on every
// shape of the workload under the library's accuracy contract, then timed against the family's own row
// compiled the same way. Fitness: the geometric mean over the shapes of baseline time / candidate time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "genome.hpp"
#include "host/accuracy_check.hpp"
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

class MmaEvaluator {
 public:
  MmaEvaluator(int head_dim, bool small_grid, Workload workload);
  ~MmaEvaluator();
  // Uploads the problems, computes their float64 expectations and times the baseline row; "" or why not.
  std::string prepare();
  Fitness operator()(const Genome& g);

 private:
  struct Problem;
  struct Timing {
    double median_us = 0, rel_stderr = 0;
  };
  // Compiles, gates, verifies and times `genome` on every problem; "" or why it was discarded.
  std::string measure(const Genome& genome, std::vector<Timing>& out);

  int head_dim_;
  bool small_grid_;
  Workload workload_;
  std::string arch_;
  std::vector<std::unique_ptr<Problem>> problems_;
  std::vector<Timing> baseline_;
};

}  // namespace evosdpa::tune
