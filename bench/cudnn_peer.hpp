// cuDNN's fused SDPA, forward and backward, called directly through the cudnn_frontend graph API, as a
// peer in evosdpa-bench. libcudnn is loaded at run time (dlopen), so the benchmark runs where it is
// missing and reports the peer as unavailable.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "bench_options.hpp"

namespace evosdpa::bench {

// One input set's device tensors, BHSD contiguous. The backward's (dout, dq, dk, dv) are used only by
// backward(); stats is cuDNN's softmax statistics, the log-sum-exp, float32 [B, H, Lq].
struct CudnnTensors {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void* o = nullptr;
  float* stats = nullptr;            // written by a forward that a backward follows, read by the backward
  const float* descales = nullptr;  // FP8 inputs: q, k and v's descales (three device floats)
  const void* dout = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
};

class CudnnSdpa {
 public:
  // Loads libcudnn.so.9 (EVOSDPA_CUDNN_LIBRARY, else the loader's search path) and makes a handle.
  static std::unique_ptr<CudnnSdpa> create(std::string& why_not);
  ~CudnnSdpa();

  // Builds the graphs of `pass` for one shape; false with the reason when cuDNN has no engine for them.
  // The forward writes the stats only when a backward follows (pass bwd or fwdbwd), as a training forward
  // does; the backward sums dQ deterministically or not as `mode` says. FP8 (E4M3) inputs, forward only
  // (evosdpa-bench refuses a backward pass for them), take cuDNN's sdpa_fp8, whose Hopper engines write O
  // in E4M3 only: stored O = real O * o_scale (o_scale is unused for 16-bit inputs).
  bool prepare(const BenchShape& s, Pass pass, evosdpa_backward_mode_t mode, float o_scale, std::string& why_not);
  // Enqueue one forward or backward on `stream`; false with the reason on failure.
  bool forward(const CudnnTensors& t, cudaStream_t stream, std::string& why_not);
  bool backward(const CudnnTensors& t, cudaStream_t stream, std::string& why_not);

  struct State;

 private:
  explicit CudnnSdpa(std::unique_ptr<State> s);
  std::unique_ptr<State> state_;
};

}  // namespace evosdpa::bench
