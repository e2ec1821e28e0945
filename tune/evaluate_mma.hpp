// mma_sm80's side of the evaluation (evaluate.hpp): a genome is a row of its tile table for one bucket
// (head_dim, default or small-grid variant), compiled for the GPU's own architecture; one block of
// block_m query rows per (query block, batch, head), the kernel's single KernelParams argument.
#pragma once

#include "evaluate.hpp"

namespace evosdpa::tune {

class MmaEvaluator : public Evaluator {
 public:
  MmaEvaluator(int head_dim, bool small_grid, Workload workload);

 protected:
  std::string baseline(Genome& out) const override;
  std::string load(const Genome& g, const std::string& arch, CandidateRunner& runner) override;
  std::string bind(const Genome& g, const Problem& p, KernelLaunch& out) override;

 private:
  int head_dim_;
  bool small_grid_;
};

}  // namespace evosdpa::tune
