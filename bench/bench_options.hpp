// Command-line options and statistics of evosdpa-bench, apart from CUDA so the CPU tests can check them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "evosdpa/evosdpa.h"

namespace evosdpa::bench {

// What a run times: the forward; the backward alone (on O and lse that a forward made once before
// timing); or a forward followed by a backward, as one training step of the layer runs them.
enum class Pass { Fwd, Bwd, FwdBwd };
const char* pass_label(Pass pass);  // "fwd", "bwd", "fwdbwd"
std::optional<Pass> pass_of_label(const std::string& label);
// A pass's FLOPs in forwards, counted as FlashAttention counts them: the backward's five matrix products
// (S = QK^T again, dV, dP, dQ, dK) against the forward's two make it 2.5 forwards, so fwdbwd is 3.5.
double flop_factor(Pass pass);

// "deterministic", "fast" (evosdpa_backward_mode_t), and the inverse (nullopt for another name).
const char* bwd_mode_label(evosdpa_backward_mode_t mode);
std::optional<evosdpa_backward_mode_t> bwd_mode_of_label(const std::string& label);

struct BenchShape {
  int64_t batch = 1, heads = 8, seqlen_q = 512, seqlen_k = 512, head_dim = 64;
  evosdpa_causal_t causal = EVOSDPA_CAUSAL_NONE;
  evosdpa_dtype_t dtype = EVOSDPA_DTYPE_FLOAT16;  // the inputs'; FP8 inputs give a bf16 O (kFp8Output)
  // The forward's 4*B*H*Lq*Lk*D, less the masked part for causal (exact count of visible (i, j) pairs),
  // times flop_factor(pass).
  double flops(Pass pass = Pass::Fwd) const;
  // The least traffic of a pass. Forward: Q, K, V read once and O written once (FP8: 1-byte inputs, a
  // 2-byte O). Backward: Q, K, V, O, dO and lse read once, dQ, dK, dV written once. fwdbwd: the two.
  double bytes(Pass pass = Pass::Fwd) const;
  std::string label() const;
};

// O's type for FP8 inputs in the benchmark: bf16, FlashAttention-3's (the only one it offers).
inline constexpr evosdpa_dtype_t kFp8Output = EVOSDPA_DTYPE_BFLOAT16;
// "fp16", "bf16", "fp8" (E4M3 inputs).
const char* dtype_label(evosdpa_dtype_t dtype);
// The inverse; nullopt for another name.
std::optional<evosdpa_dtype_t> dtype_of_label(const std::string& label);

struct Options {
  std::vector<BenchShape> shapes;  // from the flags or a named grid
  std::vector<std::string> kernels{"auto"};
  int warmup = 10;
  int iters = 100;          // timed runs in the first batch
  // Noise criterion: after the first batch, keep timing in batches of `iters` (a shape's kernels in turn)
  // until each one's relative standard error of the mean is at most target_rse, or one has max_iters
  // runs, or they have max_seconds of timed work each.
  double target_rse = 0.005;
  int max_iters = 2000;
  double max_seconds = 2.0;
  bool graph = false;    // time CUDA-graph replays of one call (launch overhead mostly removed)
  bool cold_l2 = false;  // rotate input sets larger than L2 so every run reads from DRAM
  bool verify = true;
  std::string json_path;
  std::string grid;  // "", "acceptance", "fa3"
  Pass pass = Pass::Fwd;
  evosdpa_backward_mode_t bwd_mode = EVOSDPA_BACKWARD_DETERMINISTIC;  // for the passes with a backward
};

// Parses argv; on error returns nullopt and sets `error` (the usage text for --help).
std::optional<Options> parse_options(const std::vector<std::string>& args, std::string& error, bool& help);
std::string usage();

// The named grids: "acceptance" (the five shapes of the core issue) and "fa3" (16k tokens, hidden 2048:
// L = 512..16384, B = 16384/L, H = 2048/D, D 64 and 128, causal and not), in the given dtype.
std::optional<std::vector<BenchShape>> named_grid(const std::string& name, evosdpa_dtype_t dtype);

struct Stats {
  double median = 0, p90 = 0, mean = 0, stddev = 0, min = 0, max = 0;
  int count = 0;
};
Stats summarize(std::vector<double> samples);

}  // namespace evosdpa::bench
