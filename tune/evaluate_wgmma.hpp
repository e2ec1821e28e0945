// wgmma_sm90's side of the evaluation (evaluate.hpp): a genome is a row of its tile table for one bucket
// (head_dim, consumers, split_keys), compiled for sm_90a; launched as the library launches the row's
// persistent grid (wgmma_launch.cuh: min(items, SMs) CTAs, one item per CTA for split_keys rows), with
// the four TMA tensor maps and the launch geometry built for each problem before the timing.
#pragma once

#include "evaluate.hpp"

namespace evosdpa::tune {

class WgmmaEvaluator : public Evaluator {
 public:
  WgmmaEvaluator(int head_dim, bool split_keys, int consumers, Workload workload);

 protected:
  std::string baseline(Genome& out) const override;
  std::string load(const Genome& g, const std::string& arch, CandidateRunner& runner) override;
  std::string bind(const Genome& g, const Problem& p, KernelLaunch& out) override;

 private:
  int head_dim_, consumers_;
  bool split_keys_;
};

}  // namespace evosdpa::tune
