// evosdpa-bench: times evosdpa kernels with CUDA events after warm-up and verifies each against the
// float64 CPU reference first. With no arguments: the default shape B=1 H=8 L=512 D=64 fp16, forward.
// --pass bwd times the backward alone and --pass fwdbwd a forward then a backward.
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
#include <utility>
#include <vector>

#include "bench_options.hpp"
#include "bench_report.hpp"
#ifdef EVOSDPA_HAVE_CUDNN_PEER
#include "cudnn_peer.hpp"
#endif
#include "evosdpa/evosdpa.hpp"
#include "host/accuracy_check.hpp"
#include "host/backward_check.hpp"

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
  // Passes with a backward: dO (read) and dQ, dK, dV (written), 16-bit BHSD like Q, K and V.
  void *dout = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
};

int64_t q_elems(const BenchShape& s) { return s.batch * s.heads * s.seqlen_q * s.head_dim; }
int64_t kv_elems(const BenchShape& s) { return s.batch * s.heads * s.seqlen_k * s.head_dim; }

// Input set `index` of shape s, with values of its own, and the tensors `pass` needs.
Buffers make_set(const BenchShape& s, Pass pass, int index) {
  const int64_t in_bytes = static_cast<int64_t>(evosdpa_dtype_size(s.dtype));
  const int64_t nq = std::max<int64_t>(q_elems(s), 1), nkv = std::max<int64_t>(kv_elems(s), 1);
  Buffers b;
  CHECK_CUDA(cudaMalloc(&b.q, nq * in_bytes));
  CHECK_CUDA(cudaMalloc(&b.k, nkv * in_bytes));
  CHECK_CUDA(cudaMalloc(&b.v, nkv * in_bytes));
  CHECK_CUDA(cudaMalloc(&b.o, nq * 2));
  CHECK_CUDA(cudaMalloc(&b.lse, std::max<int64_t>(s.batch * s.heads * s.seqlen_q, 1) * 4));
  if (s.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3) {
    const float descales[3] = {kFp8Descale, kFp8Descale, kFp8Descale};
    CHECK_CUDA(cudaMalloc(&b.descale, sizeof descales));
    CHECK_CUDA(cudaMemcpy(b.descale, descales, sizeof descales, cudaMemcpyHostToDevice));
  }
  fill_random<<<1024, 256>>>(b.q, q_elems(s), 1000003ull * (3 * index + 1), s.dtype);
  fill_random<<<1024, 256>>>(b.k, kv_elems(s), 1000003ull * (3 * index + 2), s.dtype);
  fill_random<<<1024, 256>>>(b.v, kv_elems(s), 1000003ull * (3 * index + 3), s.dtype);
  if (pass != Pass::Fwd) {
    CHECK_CUDA(cudaMalloc(&b.dout, nq * 2));
    CHECK_CUDA(cudaMalloc(&b.dq, nq * 2));
    CHECK_CUDA(cudaMalloc(&b.dk, nkv * 2));
    CHECK_CUDA(cudaMalloc(&b.dv, nkv * 2));
    fill_random<<<1024, 256>>>(b.dout, q_elems(s), 0x5EEDD0ull + index, s.dtype);  // a stream apart from Q, K, V's
  }
  CHECK_CUDA(cudaGetLastError());
  return b;
}

void free_set(Buffers& b) {
  for (void* p : {b.q, b.k, b.v, static_cast<void*>(b.o), static_cast<void*>(b.lse), static_cast<void*>(b.descale),
                  b.dout, b.dq, b.dk, b.dv})
    cudaFree(p);
  b = Buffers{};
}

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

// The backward's arguments: the forward's, with dO, the gradients, the workspace and the mode.
evosdpa_params_t backward_params(const BenchShape& s, const Buffers& b, evosdpa_backward_mode_t mode,
                                 void* workspace, size_t workspace_bytes) {
  evosdpa_params_t p = make_params(s, b);  // BHSD strides for every tensor, the backward's included
  p.dout = b.dout;
  p.dq = b.dq;
  p.dk = b.dk;
  p.dv = b.dv;
  p.workspace = workspace;
  p.workspace_size = workspace_bytes;
  p.backward_mode = mode;
  return p;
}

// How one row runs: the timed call, and what runs once on every input set before verification and timing.
struct Runner {
  std::string ran = "-";  // the kernel(s) that run
  std::string error;      // why it cannot run (then launch is empty)
  Launcher launch;
  Launcher prepare;          // the backward pass: the forward that makes the O and lse it reads; else empty
  bool e4m3_output = false;  // see ResultRow
};

Runner cannot_run(std::string why, std::string ran = "-") {
  Runner r;
  r.ran = std::move(ran);
  r.error = std::move(why);
  return r;
}

// a, then b, as one call.
Launcher then(Launcher a, Launcher b) {
  return [a = std::move(a), b = std::move(b)](const Buffers& buf, cudaStream_t st) {
    const std::string err = a(buf, st);
    return err.empty() ? b(buf, st) : err;
  };
}

// The forward with the workspace the library asks for (its key splits; none for most kernels), sized
// and allocated once, as a caller would.
Runner forward_runner(const BenchShape& s, const Buffers& probe, const std::string& kernel) {
  size_t bytes = 0;
  const auto size = evosdpa::forward_workspace_size(make_params(s, probe), bytes, kernel);
  if (!size.ok()) return cannot_run(size.message);
  void* raw = nullptr;
  if (bytes > 0) CHECK_CUDA(cudaMalloc(&raw, bytes));
  const std::shared_ptr<void> workspace(raw, [](void* p) { cudaFree(p); });
  const auto with_workspace = [&s, workspace, bytes](const Buffers& b) {
    evosdpa_params_t p = make_params(s, b);
    p.workspace = workspace.get();
    p.workspace_size = bytes;
    return p;
  };
  const auto sup = evosdpa::supports(with_workspace(probe), kernel);
  if (!sup.ok()) return cannot_run(sup.message);
  Runner r;
  r.ran = sup.kernel;
  r.launch = [with_workspace, kernel](const Buffers& b, cudaStream_t st) {
    const auto res = evosdpa::attention_forward(with_workspace(b), st, kernel);
    return res.ok() ? std::string() : res.message;
  };
  return r;
}

// The workspace is sized and allocated once for the shape, kernel and mode, and lives as long as the launcher.
Runner backward_runner(const BenchShape& s, const Buffers& probe, const std::string& kernel,
                       evosdpa_backward_mode_t mode) {
  size_t bytes = 0;
  const auto size = evosdpa::backward_workspace_size(backward_params(s, probe, mode, nullptr, 0), bytes, kernel);
  if (!size.ok()) return cannot_run(size.message);
  void* raw = nullptr;
  if (bytes > 0) {
    CHECK_CUDA(cudaMalloc(&raw, bytes));  // 256-byte aligned, beyond the 16 the ABI asks
    // Not zeros, which fresh memory often is: a kernel that relies on an initialised workspace fails verification.
    CHECK_CUDA(cudaMemset(raw, 0xff, bytes));
  }
  const std::shared_ptr<void> workspace(raw, [](void* p) { cudaFree(p); });
  const auto sup = evosdpa::supports_backward(backward_params(s, probe, mode, raw, bytes), kernel);
  if (!sup.ok()) return cannot_run(sup.message);
  Runner r;
  r.ran = sup.kernel;
  r.launch = [&s, kernel, mode, workspace, bytes](const Buffers& b, cudaStream_t st) {
    const auto res = evosdpa::attention_backward(backward_params(s, b, mode, workspace.get(), bytes), st, kernel);
    return res.ok() ? std::string() : res.message;
  };
  return r;
}

Runner evosdpa_runner(const BenchShape& s, const Buffers& probe, const std::string& kernel, const Options& o) {
  if (o.pass == Pass::Fwd) return forward_runner(s, probe, kernel);
  const bool bwd_only = o.pass == Pass::Bwd;
  // bwd: O and lse as a user's forward makes them, with the default kernel, whichever backward is timed.
  const Runner fwd = forward_runner(s, probe, bwd_only ? "auto" : kernel);
  if (!fwd.error.empty())
    return cannot_run((bwd_only ? "the forward that makes O and lse: " : "forward: ") + fwd.error);
  Runner bwd = backward_runner(s, probe, kernel, o.bwd_mode);
  if (!bwd.error.empty()) return bwd_only ? bwd : cannot_run("backward: " + bwd.error);
  if (bwd_only) {
    bwd.prepare = fwd.launch;
    return bwd;
  }
  Runner r;
  r.ran = fwd.ran == bwd.ran ? fwd.ran : fwd.ran + "+" + bwd.ran;
  r.launch = then(fwd.launch, bwd.launch);
  return r;
}

// The direct cuDNN peer, made once when "cudnn" is among the kernels; why_not says why it is missing.
struct CudnnPeer {
#ifdef EVOSDPA_HAVE_CUDNN_PEER
  std::unique_ptr<evosdpa::bench::CudnnSdpa> sdpa;
#endif
  std::string why_not;
};

CudnnPeer make_cudnn_peer(const std::vector<std::string>& kernels) {
  CudnnPeer peer;
#ifdef EVOSDPA_HAVE_CUDNN_PEER
  if (std::find(kernels.begin(), kernels.end(), "cudnn") != kernels.end())
    peer.sdpa = evosdpa::bench::CudnnSdpa::create(peer.why_not);
#else
  (void)kernels;
  peer.why_not = "evosdpa-bench was built without cudnn_frontend headers";
#endif
  return peer;
}

#ifdef EVOSDPA_HAVE_CUDNN_PEER
evosdpa::bench::CudnnTensors cudnn_tensors(const Buffers& b) {
  evosdpa::bench::CudnnTensors t;
  t.q = b.q, t.k = b.k, t.v = b.v, t.o = b.o, t.stats = b.lse, t.descales = b.descale;
  t.dout = b.dout, t.dq = b.dq, t.dk = b.dk, t.dv = b.dv;
  return t;
}
#endif

// cuDNN's passes as evosdpa's: its backward reads the O and stats (its lse) of its own forward.
Runner cudnn_runner(CudnnPeer& peer, const BenchShape& s, const Options& o) {
  std::string why = peer.why_not;
#ifdef EVOSDPA_HAVE_CUDNN_PEER
  // FP8: cuDNN's Hopper engines write O in E4M3 (ours: bf16); scaled by 1 / kFp8Descale, |O| <= 3.46
  // (a weighted mean of V) fills E4M3's range.
  evosdpa::bench::CudnnSdpa* sdpa = peer.sdpa.get();
  if (sdpa && sdpa->prepare(s, o.pass, o.bwd_mode, 1.f / kFp8Descale, why)) {
    const Launcher forward = [sdpa](const Buffers& b, cudaStream_t st) {
      std::string err;
      return sdpa->forward(cudnn_tensors(b), st, err) ? std::string() : err;
    };
    const Launcher backward = [sdpa](const Buffers& b, cudaStream_t st) {
      std::string err;
      return sdpa->backward(cudnn_tensors(b), st, err) ? std::string() : err;
    };
    Runner r;
    r.ran = "cudnn";
    r.e4m3_output = s.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3;
    r.launch = o.pass == Pass::Fwd ? forward : o.pass == Pass::Bwd ? backward : then(forward, backward);
    if (o.pass == Pass::Bwd) r.prepare = forward;
    return r;
  }
#else
  (void)s, (void)o;
#endif
  return cannot_run("cuDNN peer unavailable: " + why, "cudnn");
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

// The benchmark shape as the host checks describe it (one head count for Q and K/V).
evosdpa::host::Shape host_shape(const BenchShape& s) {
  evosdpa::host::Shape hs;
  hs.batch = s.batch, hs.heads_q = hs.heads_kv = s.heads, hs.seqlen_q = s.seqlen_q, hs.seqlen_k = s.seqlen_k;
  hs.head_dim = s.head_dim, hs.causal = s.causal;
  return hs;
}

// Check the kernel's output on set 0 against float64 on a sample of query rows (every row for small
// problems) under the library's accuracy contract, as the tests do (host/accuracy_check.hpp).
void verify(ResultRow& row, const Buffers& b, const Launcher& launch) {
  const BenchShape& s = row.shape;
  const evosdpa::host::Shape hs = host_shape(s);
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

// Every row_step-th query row (dQ) and key (dK, dV) of every head, and the last, are checked. A step of
// work / 2.5e8 bounds the float64 backward and the baseline to seconds per shape: 2 s each on 2 cores at
// B1 H32 L16384 D64 (step 2200: 9 rows and 9 keys of each head), less at the fa3 grid's other points.
int64_t backward_row_step(const BenchShape& s) {
  const double work = static_cast<double>(s.batch) * s.heads * s.seqlen_q * s.seqlen_k * s.head_dim;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(work / 2.5e8)));
}

// What the backward read (set 0's inputs, dO, and O and lse as the forward before it stored them) and
// the float64 gradients and baseline errors from them (host/backward_check.hpp).
evosdpa::host::BackwardExpected backward_expected(const evosdpa::host::Shape& hs, evosdpa_dtype_t dtype,
                                                  const Buffers& b, int64_t step) {
  using namespace evosdpa::host;
  BackwardInputs in;
  in.q = download(b.q, hs.q_elems(), dtype);
  in.k = download(b.k, hs.kv_elems(), dtype);
  in.v = download(b.v, hs.kv_elems(), dtype);
  in.dout = download(b.dout, hs.q_elems(), dtype);
  in.o = download(b.o, hs.q_elems(), dtype);
  in.lse.resize(static_cast<size_t>(hs.rows()));
  CHECK_CUDA(cudaMemcpy(in.lse.data(), b.lse, hs.rows() * sizeof(float), cudaMemcpyDeviceToHost));
  return backward_expected_from(hs, dtype, std::move(in), step);
}

// Run the call once on set 0 (bwd: the backward on the prepared O and lse; fwdbwd: the forward, then the
// backward on what it stored) and check dQ, dK and dV against float64 under the accuracy contract, as
// the tests do: every element finite, the sampled rows and keys within the rule. row.max_err and row.tol
// are those of the gradient nearest its bound.
void verify_backward(ResultRow& row, const Buffers& b, const Launcher& launch) {
  using namespace evosdpa::host;
  const BenchShape& s = row.shape;
  const Shape hs = host_shape(s);
  // All bits set is a NaN in fp16 and bf16: an element the call does not write fails.
  CHECK_CUDA(cudaMemset(b.dq, 0xff, hs.q_elems() * 2));
  CHECK_CUDA(cudaMemset(b.dk, 0xff, hs.kv_elems() * 2));
  CHECK_CUDA(cudaMemset(b.dv, 0xff, hs.kv_elems() * 2));
  const std::string err = launch(b, nullptr);
  if (!err.empty()) {
    row.ok = false;
    row.error = err;
    return;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  const int64_t step = backward_row_step(s);
  const BackwardExpected e = backward_expected(hs, s.dtype, b, step);
  Gradients got;
  got.dq = download(b.dq, hs.q_elems(), s.dtype);
  got.dk = download(b.dk, hs.kv_elems(), s.dtype);
  got.dv = download(b.dv, hs.kv_elems(), s.dtype);
  const BackwardVerdict v = check_backward(hs, s.dtype, e, got);
  Grad nearest = Grad::dQ;
  for (Grad g : kGrads) {
    const GradientVerdict& a = v.grad[static_cast<size_t>(g)];
    const GradientVerdict& n = v.grad[static_cast<size_t>(nearest)];
    if (a.error * n.tolerance > n.error * a.tolerance) nearest = g;  // a.error / a.tol > n.error / n.tol
  }
  row.max_err = v.grad[static_cast<size_t>(nearest)].error;
  row.tol = v.grad[static_cast<size_t>(nearest)].tolerance;
  if (!v.pass) {
    row.ok = false;
    row.verify = "FAIL " + v.message;
    return;
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "PASS err %.1e tol %.1e (%s)%s", row.max_err, row.tol, grad_name(nearest),
                step > 1 ? " (sampled)" : "");
  row.verify = buf;
}

// Run `prepare` once on every set (the backward pass: the forward whose O and lse the backward reads).
void prepare_sets(ResultRow& row, const std::vector<Buffers>& sets, const Launcher& prepare) {
  if (!prepare) return;
  for (const Buffers& b : sets) {
    const std::string err = prepare(b, nullptr);
    if (!err.empty()) {
      row.ok = false;
      row.error = "the forward that makes O and lse: " + err;
      return;
    }
  }
  CHECK_CUDA(cudaDeviceSynchronize());
}

// One row's timing state: its stream, its graphs (--graph), its events and the times so far.
class Timer {
 public:
  Timer(ResultRow& row, const std::vector<Buffers>& sets, const Options& o, Launcher launch)
      : row_(row), sets_(sets), o_(o), launch_(std::move(launch)), ev_(2 * static_cast<size_t>(o.iters)) {
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (auto& e : ev_) CHECK_CUDA(cudaEventCreate(&e));
    if (o.graph)
      for (const auto& b : sets) {
        cudaGraph_t g;
        CHECK_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        const std::string err = launch_(b, stream_);
        const cudaError_t end = cudaStreamEndCapture(stream_, &g);
        if (!err.empty() || end != cudaSuccess) {
          fail(!err.empty() ? err : std::string("graph capture failed: ") + cudaGetErrorString(end));
          cudaGetLastError();
          return;
        }
        cudaGraphExec_t e;
        CHECK_CUDA(cudaGraphInstantiate(&e, g, 0));
        CHECK_CUDA(cudaGraphDestroy(g));
        graphs_.push_back(e);
      }
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  ~Timer() {
    for (auto& e : ev_) cudaEventDestroy(e);
    for (auto& g : graphs_) cudaGraphExecDestroy(g);
    cudaStreamDestroy(stream_);
  }

  bool ok() const { return row_.error.empty(); }  // a row that fails its check is still timed
  void warm_up() {
    for (int i = 0; i < o_.warmup && ok(); ++i) launch(run_++);
    CHECK_CUDA(cudaStreamSynchronize(stream_));
  }
  // o.iters runs, each between its own pair of events; returns their total in microseconds.
  double batch() {
    for (int i = 0; i < o_.iters && ok(); ++i) {
      CHECK_CUDA(cudaEventRecord(ev_[2 * i], stream_));
      launch(run_++);
      CHECK_CUDA(cudaEventRecord(ev_[2 * i + 1], stream_));
    }
    CHECK_CUDA(cudaStreamSynchronize(stream_));
    if (!ok()) return 0;
    double total = 0;
    for (int i = 0; i < o_.iters; ++i) {
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, ev_[2 * i], ev_[2 * i + 1]));
      us_.push_back(ms * 1000.0);
      total += ms * 1000.0;
    }
    const Stats st = summarize(us_);
    row_.rse = st.mean > 0 ? st.stddev / st.mean / std::sqrt(static_cast<double>(st.count)) : 0;
    return total;
  }
  bool quiet() const { return row_.rse <= o_.target_rse; }
  bool full() const { return static_cast<int>(us_.size()) + o_.iters > o_.max_iters; }
  void finish() {
    row_.us = summarize(us_);
    row_.tflops = row_.shape.flops(row_.pass) / (row_.us.median * 1e-6) / 1e12;
    row_.gbps = row_.shape.bytes(row_.pass) / (row_.us.median * 1e-6) / 1e9;
  }

 private:
  void fail(std::string why) {
    row_.ok = false;
    row_.error = std::move(why);
  }
  void launch(int i) {
    const size_t set = static_cast<size_t>(i) % sets_.size();
    if (o_.graph) {
      CHECK_CUDA(cudaGraphLaunch(graphs_[set], stream_));
      return;
    }
    const std::string err = launch_(sets_[set], stream_);
    if (!err.empty()) fail(err);
  }

  ResultRow& row_;
  const std::vector<Buffers>& sets_;
  const Options& o_;
  Launcher launch_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaGraphExec_t> graphs_;
  std::vector<cudaEvent_t> ev_;
  std::vector<double> us_;
  int run_ = 0;
};

// Time the verified rows of one shape side by side: their batches of o.iters runs alternate (A B, then
// B A, ...) until every row meets the noise criterion (relative standard error of the mean) or a row
// reaches max_iters, or the rows together have run max_seconds each. Timed one after the other, the
// long fa3 points ran their first batch at the clock the idle GPU boosts to and the rest at the clock
// its power limit allows: 10-13% between min and median (H100, docs/benchmarks.md of 3e1c38d, e.g.
// D=128 L=8192 1,591 vs 1,799 us), so the row timed longer was the slower one. Alternating, the rows see
// the same clocks. With a backward, each batch goes on O and lse made by the row's own forward.
void time_rows(std::vector<ResultRow>& rows, const std::vector<Runner>& runs, const std::vector<Buffers>& sets,
               const Options& o) {
  std::vector<std::unique_ptr<Timer>> timers;
  std::vector<size_t> index;  // the row of each timer
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].error.empty()) continue;
    timers.push_back(std::make_unique<Timer>(rows[i], sets, o, runs[i].launch));
    index.push_back(i);
  }
  const bool reprepare = timers.size() > 1;
  for (size_t t = 0; t < timers.size(); ++t) {
    if (reprepare) prepare_sets(rows[index[t]], sets, runs[index[t]].prepare);
    if (timers[t]->ok()) timers[t]->warm_up();
  }
  double total_us = 0;
  for (int round = 0;; ++round) {
    bool quiet = true, full = false, any = false;
    for (size_t k = 0; k < timers.size(); ++k) {
      const size_t t = round % 2 == 0 ? k : timers.size() - 1 - k;
      if (!timers[t]->ok()) continue;
      if (reprepare) prepare_sets(rows[index[t]], sets, runs[index[t]].prepare);
      total_us += timers[t]->batch();
      if (!timers[t]->ok()) continue;
      any = true;
      quiet = quiet && timers[t]->quiet();
      full = full || timers[t]->full();
    }
    if (!any || quiet || full || total_us * 1e-6 >= o.max_seconds * static_cast<double>(timers.size())) break;
  }
  for (auto& t : timers)
    if (t->ok()) t->finish();
}

// Prepare the sets and verify the call (unless --no-verify); the timing comes after, with the shape's
// other rows (time_rows).
void check(ResultRow& row, const Runner& run, const std::vector<Buffers>& sets, const Options& o) {
  prepare_sets(row, sets, run.prepare);
  if (!row.error.empty()) return;
  if (!o.verify) row.verify = "skipped";
  else if (o.pass == Pass::Fwd) verify(row, sets[0], run.launch);
  else verify_backward(row, sets[0], run.launch);
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
  CudnnPeer cudnn = make_cudnn_peer(o.kernels);
  const DeviceInfo dev = device_info();
  std::printf("GPU %s (sm_%d%d, %d SMs, %d MHz, L2 %lld MB), driver %d, runtime %d, commit %s\n", dev.name.c_str(),
              dev.cc_major, dev.cc_minor, dev.sm_count, dev.clock_mhz, dev.l2_bytes >> 20, dev.driver, dev.runtime,
              EVOSDPA_GIT_COMMIT);
  std::printf("timing: %d warm-up, %d timed runs, CUDA events, median%s%s", o.warmup, o.iters,
              o.graph ? ", CUDA-graph replay" : "", o.cold_l2 ? ", cold L2 (rotating input sets)" : "");
  if (o.pass != Pass::Fwd)
    std::printf("; pass %s, %s backward, FLOPs %.1fx the forward's", pass_label(o.pass), bwd_mode_label(o.bwd_mode),
                flop_factor(o.pass));
  std::printf("\n");

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
    // The tensors of one set: a backward's reads and writes cover the forward's.
    const double set_bytes = s.bytes(o.pass == Pass::Fwd ? Pass::Fwd : Pass::Bwd);
    const int nsets = o.cold_l2 ? std::max(2, static_cast<int>(std::ceil(3.0 * dev.l2_bytes / set_bytes))) : 1;
    std::vector<Buffers> sets;
    for (int i = 0; i < nsets; ++i) sets.push_back(make_set(s, o.pass, i));
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<ResultRow> shape_rows;
    std::vector<Runner> runs;
    for (const auto& kernel : o.kernels) {
      runs.push_back(kernel == "cudnn" ? cudnn_runner(cudnn, s, o) : evosdpa_runner(s, sets[0], kernel, o));
      const Runner& run = runs.back();
      ResultRow row;
      row.shape = s;
      row.pass = o.pass;
      row.bwd_mode = o.bwd_mode;
      row.kernel = kernel;
      row.ran = run.ran;
      row.e4m3_output = run.e4m3_output;
      if (!run.error.empty()) {
        row.ok = false;
        row.error = run.error;
      } else {
        check(row, run, sets, o);
      }
      shape_rows.push_back(row);
    }
    time_rows(shape_rows, runs, sets, o);
    for (const ResultRow& row : shape_rows) {
      rows.push_back(row);
      std::fprintf(stderr, "[%zu/%zu] %s %s: %.2f us %s\n", si + 1, o.shapes.size(), row.case_label().c_str(),
                   row.ran.c_str(), row.us.median, row.ok ? "" : row.error.c_str());
    }
    for (auto& b : sets) free_set(b);
  }

  std::printf("\n| shape | kernel | median us | p90 us | min us | std us | runs | TFLOP/s | GB/s | verify |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  bool all_ok = true;
  for (const ResultRow& r : rows) {
    all_ok = all_ok && r.ok;
    if (!r.error.empty()) {
      std::printf("| %s | %s | - | - | - | - | - | - | - | error: %s |\n", r.case_label().c_str(), r.kernel.c_str(),
                  r.error.c_str());
      continue;
    }
    std::printf("| %s | %s | %.2f | %.2f | %.2f | %.2f | %d | %.1f | %.0f | %s |\n", r.case_label().c_str(),
                r.ran.c_str(), r.us.median, r.us.p90, r.us.min, r.us.stddev, r.us.count, r.tflops, r.gbps,
                r.verify.c_str());
  }
  if (!o.json_path.empty()) std::ofstream(o.json_path) << to_json(report);
  return all_ok ? 0 : 1;
}
