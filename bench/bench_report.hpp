// The benchmark's results as data: what evosdpa-bench writes with --json and evosdpa-compare reads.
#pragma once

#include <string>
#include <vector>

#include "bench_options.hpp"

namespace evosdpa::bench {

struct ResultRow {
  BenchShape shape;
  Pass pass = Pass::Fwd;
  evosdpa_backward_mode_t bwd_mode = EVOSDPA_BACKWARD_DETERMINISTIC;  // meaningful when the pass has a backward
  std::string kernel;  // requested
  std::string ran;     // selected (fwdbwd: "forward's+backward's" when they differ)
  bool ok = true;
  std::string error;
  std::string verify;  // "PASS err .. tol ..", "FAIL ...", "skipped"
  double max_err = 0, tol = 0;  // backward: those of the gradient nearest its tolerance
  bool e4m3_output = false;  // O stored in E4M3, real O = code * the inputs' descale (cuDNN's FP8 peer)
  Stats us;
  double rse = 0;  // relative standard error of the mean time
  double tflops = 0, gbps = 0;
  // The shape's label, then the pass and backward mode unless the pass is the forward (so a forward's
  // label is what it was before passes existed): "B1 H8 Lq512 D64 fp16 full bwd deterministic".
  std::string case_label() const;
  // Identifies the measured case across runs: case_label() | kernel.
  std::string key() const;
};

struct Report {
  std::string gpu, compute_capability, git_commit;
  int sm_count = 0, clock_mhz = 0, memory_clock_mhz = 0, driver_version = 0, runtime_version = 0;
  long long l2_bytes = 0;
  bool graph = false, cold_l2 = false;
  int warmup = 0, iters = 0;
  std::vector<ResultRow> results;
};

std::string to_json(const Report& r);
// Throws std::runtime_error naming the problem when the text is not a report.
Report report_from_json(const std::string& text);

const char* causal_name(evosdpa_causal_t c);  // "none", "top-left", "bottom-right"

}  // namespace evosdpa::bench
