// evosdpa-bench: times evosdpa kernels with CUDA events after warm-up and verifies each against the
// float64 CPU reference first. With no arguments: the default shape B=1 H=8 L=512 D=64 fp16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_options.hpp"
#include "bench_report.hpp"
#ifdef EVOSDPA_HAVE_CUDNN_PEER
#include "cudnn_peer.hpp"
#endif
#include "evosdpa/evosdpa.hpp"
#include "host/accuracy_check.hpp"

#include "git_commit.hpp"  // EVOSDPA_GIT_COMMIT, written at build time

using namespace evosdpa::bench;

namespace {

#define CHECK_CUDA(expr)                                                                           \
  do {                                                                                             \
    const cudaError_t e_ = (expr);                                                                 \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "evosdpa-bench: %s failed: %s\n", #expr, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

// FP8 inputs: the values below stay within +-2*sqrt(3) = 3.46; one descale per tensor maps that range
// onto E4M3's +-448 (the largest magnitude to 448, as quantize_fp8 does).
constexpr float kFp8Descale = 3.4641016f / 448.f;

// Deterministic pseudo-normal values (sum of four uniforms, variance 1) in 16-bit storage, or as E4M3
// codes of value / kFp8Descale.
__global__ void fill_random(void* out, int64_t n, uint64_t seed, evosdpa_dtype_t dtype) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t h = (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    float sum = 0.f;
    for (int k = 0; k < 4; ++k) {
      h ^= h >> 31;
      h *= 0xBF58476D1CE4E5B9ull;
      h ^= h >> 29;
      sum += static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
    }
    const float v = (sum - 2.f) * 1.7320508f;
    uint16_t* x = static_cast<uint16_t*>(out);
    if (dtype == EVOSDPA_DTYPE_FLOAT8_E4M3) {
      static_cast<uint8_t*>(out)[i] = __nv_cvt_float_to_fp8(v / kFp8Descale, __NV_SATFINITE, __NV_E4M3);
    } else if (dtype == EVOSDPA_DTYPE_BFLOAT16) {
      __nv_bfloat16 b = __float2bfloat16_rn(v);
      x[i] = *reinterpret_cast<uint16_t*>(&b);
    } else {
      __half hv = __float2half_rn(v);
      x[i] = *reinterpret_cast<uint16_t*>(&hv);
    }
  }
}

struct Buffers {
  void *q = nullptr, *k = nullptr, *v = nullptr;  // 16-bit or E4M3 elements
  uint16_t* o = nullptr;                          // fp16/bf16 (bf16 for FP8 inputs)
  float* lse = nullptr;
  float* descale = nullptr;  // FP8 inputs: q, k, v's descales (one per tensor), else nullptr
};

// O's element type.
evosdpa_dtype_t output_dtype(const BenchShape& s) {
  return s.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ? kFp8Output : s.dtype;
}

// Enqueues one attention call on the buffers and stream; returns "" or the reason it could not.
using Launcher = std::function<std::string(const Buffers&, cudaStream_t)>;

struct DeviceInfo {
  std::string name;
  int sm_count = 0, cc_major = 0, cc_minor = 0, clock_mhz = 0, mem_clock_mhz = 0, driver = 0, runtime = 0;
  long long l2_bytes = 0;
};

DeviceInfo device_info() {
  DeviceInfo d;
  int dev = 0;
  CHECK_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  CHECK_CUDA(cudaGetDeviceProperties(&p, dev));
  d.name = p.name;
  d.sm_count = p.multiProcessorCount;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.l2_bytes = p.l2CacheSize;
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) == cudaSuccess) d.clock_mhz = khz / 1000;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev) == cudaSuccess) d.mem_clock_mhz = khz / 1000;
  cudaDriverGetVersion(&d.driver);
  cudaRuntimeGetVersion(&d.runtime);
  return d;
}

evosdpa_params_t make_params(const BenchShape& s, const Buffers& b) {
  evosdpa_params_t p = evosdpa::make_params(b.q, b.k, b.v, b.o, s.dtype, s.batch, s.heads, s.seqlen_q, s.seqlen_k,
                                            s.head_dim, s.causal);
  p.lse = b.lse;
  if (s.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3) {
    p.o_dtype = kFp8Output;
    p.q_descale = b.descale;
    p.k_descale = b.descale + 1;
    p.v_descale = b.descale + 2;
  }
  return p;
}

std::vector<float> download(const void* d, int64_t n, evosdpa_dtype_t dtype) {
  std::vector<uint16_t> raw(static_cast<size_t>(n));
  CHECK_CUDA(cudaMemcpy(raw.data(), d, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) out[i] = evosdpa::host::decode(dtype, raw[i]);
  return out;
}

// FP8: the E4M3 codes, and their real values (code * descale) into `real`.
std::vector<uint8_t> download_codes(const void* d, int64_t n, std::vector<float>& real) {
  std::vector<uint8_t> codes(static_cast<size_t>(n));
  CHECK_CUDA(cudaMemcpy(codes.data(), d, n, cudaMemcpyDeviceToHost));
  real.resize(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) real[i] = evosdpa::host::decode_e4m3(codes[i]) * kFp8Descale;
  return codes;
}

// Check the kernel's output on set 0 against float64 on a sample of query rows (every row for small
// problems) under the library's accuracy contract, as the tests do (host/accuracy_check.hpp).
void verify(ResultRow& row, const Buffers& b, const Launcher& launch) {
  const BenchShape& s = row.shape;
  evosdpa::host::Shape hs;
  hs.batch = s.batch, hs.heads_q = hs.heads_kv = s.heads, hs.seqlen_q = s.seqlen_q, hs.seqlen_k = s.seqlen_k;
  hs.head_dim = s.head_dim, hs.causal = s.causal;
  const double work = static_cast<double>(s.batch) * s.heads * s.seqlen_q * s.seqlen_k * s.head_dim;
  const int64_t step = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(work / 4e9)));
  const bool fp8 = s.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3;
  CHECK_CUDA(cudaMemset(b.o, 0xff, hs.q_elems() * 2));
  const std::string err = launch(b, nullptr);
  if (!err.empty()) {
    row.ok = false;
    row.error = err;
    return;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  evosdpa::host::Expected e;
  e.row_step = step;
  e.o_dtype = output_dtype(s);
  if (fp8) {
    e.in.q8 = download_codes(b.q, hs.q_elems(), e.in.q);
    e.in.k8 = download_codes(b.k, hs.kv_elems(), e.in.k);
    e.in.v8 = download_codes(b.v, hs.kv_elems(), e.in.v);
    e.in.q_descale = e.in.k_descale = e.in.v_descale = {kFp8Descale};
  } else {
    e.in.q = download(b.q, hs.q_elems(), s.dtype);
    e.in.k = download(b.k, hs.kv_elems(), s.dtype);
    e.in.v = download(b.v, hs.kv_elems(), s.dtype);
  }
  std::vector<float> out;
  if (row.e4m3_output) download_codes(b.o, hs.q_elems(), out);
  else out = download(b.o, hs.q_elems(), e.o_dtype);
  e.ref = evosdpa::host::attention_f64(hs, e.in, step);
  const auto base = evosdpa::host::attention_fused_baseline(hs, e.in, s.dtype, step, e.o_dtype);
  auto sample = [&](const auto& x) { return evosdpa::host::sample_rows(x, hs, hs.head_dim, step); };
  e.baseline_error = evosdpa::host::max_abs_error(sample(base), sample(e.ref.o));
  evosdpa::host::Verdict v = evosdpa::host::check_attention(hs, s.dtype, e, out, nullptr);
  if (row.e4m3_output) {
    // O rounded to E4M3 (3 mantissa bits) on the way out: up to 2^-4 of |O| beyond the contract's
    // tolerance for a bf16 O. A check that the peer computes attention, not a claim on its accuracy.
    double max_ref = 0;
    for (double x : sample(e.ref.o)) max_ref = std::max(max_ref, std::fabs(x));
    v.tolerance += 0.0625 * max_ref;
    v.pass = v.error <= v.tolerance;
  }
  row.max_err = v.error;
  row.tol = v.tolerance;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s err %.1e tol %.1e%s%s", v.pass ? "PASS" : "FAIL", row.max_err, row.tol,
                step > 1 ? " (sampled)" : "", row.e4m3_output ? " (E4M3 O)" : "");
  row.verify = buf;
  if (!v.pass) row.ok = false;
}

void time_kernel(ResultRow& row, const std::vector<Buffers>& sets, const Options& o, const Launcher& launch_one) {
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<cudaGraphExec_t> graphs;
  if (o.graph) {
    for (const auto& b : sets) {
      cudaGraph_t g;
      CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      const std::string err = launch_one(b, stream);
      const cudaError_t end = cudaStreamEndCapture(stream, &g);
      if (!err.empty() || end != cudaSuccess) {
        row.ok = false;
        row.error = !err.empty() ? err : std::string("graph capture failed: ") + cudaGetErrorString(end);
        cudaGetLastError();
        return;
      }
      cudaGraphExec_t e;
      CHECK_CUDA(cudaGraphInstantiate(&e, g, 0));
      CHECK_CUDA(cudaGraphDestroy(g));
      graphs.push_back(e);
    }
  }
  auto launch = [&](int i) {
    const size_t set = static_cast<size_t>(i) % sets.size();
    if (o.graph) {
      CHECK_CUDA(cudaGraphLaunch(graphs[set], stream));
      return true;
    }
    const std::string err = launch_one(sets[set], stream);
    if (!err.empty()) {
      row.ok = false;
      row.error = err;
    }
    return err.empty();
  };
  for (int i = 0; i < o.warmup; ++i)
    if (!launch(i)) return;
  // Batches of o.iters timed runs, each run between its own pair of events, until the noise criterion
  // (relative standard error of the mean) or a limit is met.
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(o.iters));
  for (auto& e : ev) CHECK_CUDA(cudaEventCreate(&e));
  struct Release {  // on every way out, early error returns included
    std::vector<cudaEvent_t>& ev;
    std::vector<cudaGraphExec_t>& graphs;
    cudaStream_t stream;
    ~Release() {
      for (auto& e : ev) cudaEventDestroy(e);
      for (auto& g : graphs) cudaGraphExecDestroy(g);
      cudaStreamDestroy(stream);
    }
  } release{ev, graphs, stream};
  std::vector<double> us;
  double total_us = 0;
  int run = o.warmup;
  while (true) {
    for (int i = 0; i < o.iters; ++i) {
      CHECK_CUDA(cudaEventRecord(ev[2 * i], stream));
      if (!launch(run++)) return;
      CHECK_CUDA(cudaEventRecord(ev[2 * i + 1], stream));
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (int i = 0; i < o.iters; ++i) {
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
      us.push_back(ms * 1000.0);
      total_us += ms * 1000.0;
    }
    const Stats st = summarize(us);
    row.rse = st.mean > 0 ? st.stddev / st.mean / std::sqrt(static_cast<double>(st.count)) : 0;
    if (row.rse <= o.target_rse || static_cast<int>(us.size()) + o.iters > o.max_iters ||
        total_us * 1e-6 >= o.max_seconds)
      break;
  }
  row.us = summarize(us);
  row.tflops = row.shape.flops() / (row.us.median * 1e-6) / 1e12;
  row.gbps = row.shape.bytes() / (row.us.median * 1e-6) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string error;
  bool help = false;
  const auto opts = parse_options(std::vector<std::string>(argv + 1, argv + argc), error, help);
  if (!opts) {
    std::fprintf(help ? stdout : stderr, "%s%s", error.c_str(), help ? "" : "\n");
    return help ? 0 : 2;
  }
  Options o = *opts;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::fprintf(stderr,
                 "evosdpa-bench: no CUDA GPU on this machine (%s).\n"
                 "The benchmark needs an NVIDIA GPU of compute capability 8.0 or newer; run it on a GPU machine.\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 3;
  }
  if (o.kernels.size() == 1 && o.kernels[0] == "all") {
    o.kernels = evosdpa::kernel_names();
    o.kernels.push_back("cudnn");
  }
  // The cuDNN peer, created once if asked for ("cudnn" in --kernel).
#ifdef EVOSDPA_HAVE_CUDNN_PEER
  std::unique_ptr<evosdpa::bench::CudnnSdpa> cudnn;
  std::string cudnn_missing;
  if (std::find(o.kernels.begin(), o.kernels.end(), "cudnn") != o.kernels.end())
    cudnn = evosdpa::bench::CudnnSdpa::create(cudnn_missing);
#else
  const std::string cudnn_missing = "evosdpa-bench was built without cudnn_frontend headers";
#endif
  const DeviceInfo dev = device_info();
  std::printf("GPU %s (sm_%d%d, %d SMs, %d MHz, L2 %lld MB), driver %d, runtime %d, commit %s\n", dev.name.c_str(),
              dev.cc_major, dev.cc_minor, dev.sm_count, dev.clock_mhz, dev.l2_bytes >> 20, dev.driver, dev.runtime,
              EVOSDPA_GIT_COMMIT);
  std::printf("timing: %d warm-up, %d timed runs, CUDA events, median%s%s\n", o.warmup, o.iters,
              o.graph ? ", CUDA-graph replay" : "", o.cold_l2 ? ", cold L2 (rotating input sets)" : "");

  Report report;
  report.gpu = dev.name;
  report.compute_capability = std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor);
  report.sm_count = dev.sm_count;
  report.clock_mhz = dev.clock_mhz;
  report.memory_clock_mhz = dev.mem_clock_mhz;
  report.l2_bytes = dev.l2_bytes;
  report.driver_version = dev.driver;
  report.runtime_version = dev.runtime;
  report.git_commit = EVOSDPA_GIT_COMMIT;
  report.graph = o.graph;
  report.cold_l2 = o.cold_l2;
  report.warmup = o.warmup;
  report.iters = o.iters;
  std::vector<ResultRow>& rows = report.results;
  for (size_t si = 0; si < o.shapes.size(); ++si) {
    const BenchShape& s = o.shapes[si];
    const int64_t q_elems = s.batch * s.heads * s.seqlen_q * s.head_dim;
    const int64_t kv_elems = s.batch * s.heads * s.seqlen_k * s.head_dim;
    const int64_t in_bytes = static_cast<int64_t>(evosdpa_dtype_size(s.dtype));
    const double set_bytes = static_cast<double>(in_bytes * (q_elems + 2 * kv_elems) + 2 * q_elems);
    const int nsets = o.cold_l2 ? std::max(2, static_cast<int>(std::ceil(3.0 * dev.l2_bytes / set_bytes))) : 1;
    std::vector<Buffers> sets(static_cast<size_t>(nsets));
    for (int i = 0; i < nsets; ++i) {
      Buffers& b = sets[static_cast<size_t>(i)];
      CHECK_CUDA(cudaMalloc(&b.q, std::max<int64_t>(q_elems, 1) * in_bytes));
      CHECK_CUDA(cudaMalloc(&b.k, std::max<int64_t>(kv_elems, 1) * in_bytes));
      CHECK_CUDA(cudaMalloc(&b.v, std::max<int64_t>(kv_elems, 1) * in_bytes));
      CHECK_CUDA(cudaMalloc(&b.o, std::max<int64_t>(q_elems, 1) * 2));
      CHECK_CUDA(cudaMalloc(&b.lse, std::max<int64_t>(s.batch * s.heads * s.seqlen_q, 1) * 4));
      if (s.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3) {
        const float descales[3] = {kFp8Descale, kFp8Descale, kFp8Descale};
        CHECK_CUDA(cudaMalloc(&b.descale, sizeof descales));
        CHECK_CUDA(cudaMemcpy(b.descale, descales, sizeof descales, cudaMemcpyHostToDevice));
      }
      fill_random<<<1024, 256>>>(b.q, q_elems, 1000003ull * (3 * i + 1), s.dtype);
      fill_random<<<1024, 256>>>(b.k, kv_elems, 1000003ull * (3 * i + 2), s.dtype);
      fill_random<<<1024, 256>>>(b.v, kv_elems, 1000003ull * (3 * i + 3), s.dtype);
      CHECK_CUDA(cudaGetLastError());
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    for (const auto& kernel : o.kernels) {
      ResultRow row;
      row.shape = s;
      row.kernel = kernel;
      Launcher launch;
      if (kernel == "cudnn") {
        row.ran = "cudnn";
        std::string why = cudnn_missing;
#ifdef EVOSDPA_HAVE_CUDNN_PEER
        // FP8: cuDNN's Hopper engines write O in E4M3 (ours: bf16); scaled by 1 / kFp8Descale, |O| <= 3.46
        // (a weighted mean of V) fills E4M3's range.
        if (cudnn && cudnn->prepare(s, 1.f / kFp8Descale, why)) {
          evosdpa::bench::CudnnSdpa* peer = cudnn.get();
          row.e4m3_output = s.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3;
          launch = [peer](const Buffers& b, cudaStream_t st) {
            std::string err;
            return peer->run(b.q, b.k, b.v, b.o, b.descale, st, err) ? std::string() : err;
          };
        }
#endif
        if (!launch) {
          row.ok = false;
          row.error = "cuDNN peer unavailable: " + why;
        }
      } else {
        const auto sup = evosdpa::supports(make_params(s, sets[0]), kernel);
        row.ran = sup.ok() ? sup.kernel : "-";
        if (!sup.ok()) {
          row.ok = false;
          row.error = sup.message;
        } else {
          launch = [&s, kernel](const Buffers& b, cudaStream_t st) {
            const auto r = evosdpa::attention_forward(make_params(s, b), st, kernel);
            return r.ok() ? std::string() : r.message;
          };
        }
      }
      if (launch) {
        if (o.verify) verify(row, sets[0], launch);
        else row.verify = "skipped";
        if (row.error.empty()) time_kernel(row, sets, o, launch);
      }
      rows.push_back(row);
      std::fprintf(stderr, "[%zu/%zu] %s %s: %.2f us %s\n", si + 1, o.shapes.size(), s.label().c_str(),
                   row.ran.c_str(), row.us.median, row.ok ? "" : row.error.c_str());
    }
    for (auto& b : sets) {
      cudaFree(b.q);
      cudaFree(b.k);
      cudaFree(b.v);
      cudaFree(b.o);
      cudaFree(b.lse);
      cudaFree(b.descale);
    }
  }

  std::printf("\n| shape | kernel | median us | p90 us | min us | std us | runs | TFLOP/s | GB/s | verify |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  bool all_ok = true;
  for (const ResultRow& r : rows) {
    all_ok = all_ok && r.ok;
    if (!r.error.empty()) {
      std::printf("| %s | %s | - | - | - | - | - | - | - | error: %s |\n", r.shape.label().c_str(), r.kernel.c_str(),
                  r.error.c_str());
      continue;
    }
    std::printf("| %s | %s | %.2f | %.2f | %.2f | %.2f | %d | %.1f | %.0f | %s |\n", r.shape.label().c_str(),
                r.ran.c_str(), r.us.median, r.us.p90, r.us.min, r.us.stddev, r.us.count, r.tflops, r.gbps,
                r.verify.c_str());
  }
  if (!o.json_path.empty()) std::ofstream(o.json_path) << to_json(report);
  return all_ok ? 0 : 1;
}
