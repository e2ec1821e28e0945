#include "evaluate.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "dispatch.hpp"

namespace evosdpa::tune {

namespace {

bool upload(void*& dst, const std::vector<float>& x, evosdpa_dtype_t dtype) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = host::encode(dtype, x[i]);
  return cudaMalloc(&dst, std::max<size_t>(bits.size(), 1) * 2) == cudaSuccess &&
         cudaMemcpy(dst, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess;
}

}  // namespace

Problem::~Problem() {
  for (void* p : {q, k, v, o})
    if (p != nullptr) cudaFree(p);
}

TunedDevice current_device() {
  int device = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return {};
  return {prop.name, 10 * prop.major + prop.minor, prop.multiProcessorCount};
}

namespace {

// The first line of NVRTC's log that names an error (one line for the report's table).
std::string first_error_line(const std::string& log) {
  std::istringstream in(log);
  std::string line, first;
  while (std::getline(in, line)) {
    if (first.empty()) first = line;
    if (line.find("error") != std::string::npos && line.find("NVRTC_ERROR") == std::string::npos) return line;
  }
  return first;
}

}  // namespace

std::string Evaluator::gate_and_load(const CompiledCandidate& c, int threads, int smem, CandidateRunner& runner) {
  if (!c.ok) {
    std::fprintf(stderr, "%s\n", c.error.c_str());
    return "compile: " + first_error_line(c.error);
  }
  if (const std::string gate = c.gate(); !gate.empty()) return gate;
  return runner.load(c, threads, smem);
}

Evaluator::Evaluator(Workload workload) : workload_(std::move(workload)) {}

Evaluator::~Evaluator() = default;

std::string Evaluator::prepare() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return "no usable CUDA device";
  arch_ = "sm_" + std::to_string(10 * major + minor);
  uint64_t seed = 20261123;
  for (const host::Shape& s : workload_.shapes) {
    auto p = std::make_unique<Problem>();
    p->shape = s;
    // Every row for small problems, a sample of rows for large ones (as evosdpa-bench verifies).
    const double work = static_cast<double>(s.rows()) * s.seqlen_k * s.head_dim;
    const int64_t step = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(work / 4e9)));
    p->expected = host::make_expected(s, workload_.dtype, 1.0, step, seed++);
    if (!upload(p->q, p->expected.in.q, workload_.dtype) || !upload(p->k, p->expected.in.k, workload_.dtype) ||
        !upload(p->v, p->expected.in.v, workload_.dtype) ||
        cudaMalloc(&p->o, std::max<int64_t>(s.q_elems(), 1) * 2) != cudaSuccess)
      return "device allocation or upload failed";
    p->expected.in = {};  // on the device now; the checks need only the expectations
    evosdpa_params_t ep;
    evosdpa_params_init(&ep);
    ep.q = p->q, ep.k = p->k, ep.v = p->v, ep.o = p->o, ep.dtype = workload_.dtype;
    ep.batch = s.batch, ep.heads_q = s.heads_q, ep.heads_kv = s.heads_kv, ep.seqlen_q = s.seqlen_q;
    ep.seqlen_k = s.seqlen_k, ep.head_dim = s.head_dim, ep.causal = s.causal;
    ep.softmax_scale = static_cast<float>(s.scale);
    evosdpa_params_set_bhsd_strides(&ep);
    p->params = detail::make_kernel_params(ep);
    problems_.push_back(std::move(p));
  }
  Genome row;
  if (const std::string why = baseline(row); !why.empty()) return why;
  const std::string why = measure(row, baseline_);
  return why.empty() ? why : "the table's own row fails: " + why;
}

std::string Evaluator::measure(const Genome& genome, std::vector<Timing>& out) {
  CandidateRunner runner;
  if (const std::string why = load(genome, arch_, runner); !why.empty()) return why;
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return "no stream";
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::string why;
  out.clear();
  for (const auto& p : problems_) {
    KernelLaunch l;
    if (why = bind(genome, *p, l); !why.empty()) break;
    // Verified first, from a poisoned output.
    cudaMemset(p->o, 0xff, std::max<int64_t>(p->shape.q_elems(), 1) * 2);
    if (runner.launch(l.args.data(), l.grid, stream) != cudaSuccess || cudaStreamSynchronize(stream) != cudaSuccess) {
      why = std::string("launch failed: ") + cudaGetErrorString(cudaGetLastError());
      break;
    }
    std::vector<uint16_t> bits(static_cast<size_t>(p->shape.q_elems()));
    cudaMemcpy(bits.data(), p->o, bits.size() * 2, cudaMemcpyDeviceToHost);
    std::vector<float> o(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) o[i] = host::decode(workload_.dtype, bits[i]);
    const host::Verdict v = host::check_attention(p->shape, workload_.dtype, p->expected, o, nullptr);
    if (!v.pass) {
      why = "failed verification: " + v.message;
      break;
    }
    for (int i = 0; i < workload_.warmup; ++i) runner.launch(l.args.data(), l.grid, stream);
    std::vector<double> us;
    for (int i = 0; i < workload_.iters; ++i) {
      cudaEventRecord(start, stream);
      runner.launch(l.args.data(), l.grid, stream);
      cudaEventRecord(stop, stream);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      us.push_back(1000.0 * ms);
    }
    std::sort(us.begin(), us.end());
    double mean = 0, var = 0;
    for (double x : us) mean += x / us.size();
    for (double x : us) var += (x - mean) * (x - mean) / std::max<size_t>(us.size() - 1, 1);
    out.push_back({us[us.size() / 2], mean > 0 ? std::sqrt(var / us.size()) / mean : 0});
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return why;
}

Fitness Evaluator::operator()(const Genome& g) {
  std::vector<Timing> t;
  if (const std::string why = measure(g, t); !why.empty()) return {false, 0, 0, why};
  double log_sum = 0, var = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    log_sum += std::log(baseline_[i].median_us / t[i].median_us);
    var += baseline_[i].rel_stderr * baseline_[i].rel_stderr + t[i].rel_stderr * t[i].rel_stderr;
  }
  const double n = static_cast<double>(t.size());
  return {true, std::exp(log_sum / n), std::sqrt(var) / n, ""};
}

}  // namespace evosdpa::tune
