#include "cudnn_peer.hpp"

#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <unordered_map>

namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;  // the frontend's dynamic-loading hook: set before any cuDNN call
}

namespace evosdpa::bench {

namespace fe = cudnn_frontend;

struct CudnnSdpa::State {
  cudnnHandle_t handle = nullptr;
  std::shared_ptr<fe::graph::Graph> forward, backward;  // backward: null when the pass has none
  bool fp8 = false;    // the forward is sdpa_fp8's
  bool stats = false;  // the forward writes the stats
  void* workspace = nullptr;  // shared by the two graphs, which run one after the other on one stream
  int64_t workspace_bytes = 0;
  // FP8: descale_s, scale_s and scale_o (constants), then the amax outputs, which nothing reads.
  float* fp8_scalars = nullptr;
};

namespace {
constexpr int64_t kQ = 1, kK = 2, kV = 3, kO = 4;
// FP8 scalars (sdpa_fp8's uids): the inputs' descales, then S's and O's scales and the amax outputs.
constexpr int64_t kDescaleQ = 5, kDescaleK = 6, kDescaleV = 7, kDescaleS = 8, kScaleS = 9, kScaleO = 10,
                  kAmaxS = 11, kAmaxO = 12;
// The backward's: the forward's stats, dO and the gradients.
constexpr int64_t kStats = 13, kDO = 14, kDQ = 15, kDK = 16, kDV = 17;
// P (at most 1) is quantised to E4M3 as P * scale_s: 448 puts 1 at E4M3's largest value, as
// FlashAttention-3 does; at scale_s = 1, P's small values fall into E4M3's subnormals (docs/fp8-design.md:
// 64% of one scratch run's outputs were more than 12.5% off).
constexpr float kPScale = 448.f;

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

std::shared_ptr<fe::graph::Graph> new_graph(evosdpa_dtype_t dtype) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ? fe::DataType_t::FP8_E4M3
                      : dtype == EVOSDPA_DTYPE_BFLOAT16  ? fe::DataType_t::BFLOAT16
                                                         : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// Dims and strides of a BHSD contiguous [b, h, len, d] tensor.
fe::graph::Tensor_attributes& bhsd(fe::graph::Tensor_attributes& t, const BenchShape& s, int64_t len) {
  const int64_t h = s.heads, d = s.head_dim;
  return t.set_dim({s.batch, h, len, d}).set_stride({h * len * d, len * d, d, 1});
}

TensorPtr input(fe::graph::Graph& g, const char* name, int64_t uid, const BenchShape& s, int64_t len) {
  fe::graph::Tensor_attributes t;
  t.set_name(name).set_uid(uid);
  return g.tensor(bhsd(t, s, len));
}

// The stats: float32 [b, h, Lq, 1], contiguous like evosdpa's lse.
fe::graph::Tensor_attributes& stats_layout(fe::graph::Tensor_attributes& t, const BenchShape& s) {
  return t.set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({s.batch, s.heads, s.seqlen_q, 1})
      .set_stride({s.heads * s.seqlen_q, s.seqlen_q, 1, 1});
}

float attn_scale(const BenchShape& s) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim))); }

std::shared_ptr<fe::graph::Graph> forward_graph(const BenchShape& s, bool stats) {
  const bool fp8 = s.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3;
  auto g = new_graph(s.dtype);
  auto q = input(*g, "Q", kQ, s, s.seqlen_q);
  auto k = input(*g, "K", kK, s, s.seqlen_k);
  auto v = input(*g, "V", kV, s, s.seqlen_k);
  auto options = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(stats).set_attn_scale(attn_scale(s));
  if (s.causal == EVOSDPA_CAUSAL_TOP_LEFT) options.set_causal_mask(true);
  if (s.causal == EVOSDPA_CAUSAL_BOTTOM_RIGHT) options.set_causal_mask_bottom_right(true);
  TensorPtr o;
  if (fp8) {
    auto scalar = [&](const char* name, int64_t uid) {
      return g->tensor(fe::graph::Tensor_attributes()
                           .set_name(name)
                           .set_uid(uid)
                           .set_dim({1, 1, 1, 1})
                           .set_stride({1, 1, 1, 1})
                           .set_data_type(fe::DataType_t::FLOAT));
    };
    auto out = g->sdpa_fp8(q, k, v, scalar("descale_q", kDescaleQ), scalar("descale_k", kDescaleK),
                           scalar("descale_v", kDescaleV), scalar("descale_s", kDescaleS),
                           scalar("scale_s", kScaleS), scalar("scale_o", kScaleO), options);
    o = out[0];
    for (auto [amax, uid] : {std::pair{out[2], kAmaxS}, std::pair{out[3], kAmaxO}})
      amax->set_output(true).set_uid(uid).set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(
          fe::DataType_t::FLOAT);
  } else {
    auto out = g->sdpa(q, k, v, options);
    o = out[0];
    if (stats) stats_layout(out[1]->set_output(true), s);
  }
  bhsd(o->set_output(true).set_uid(kO), s, s.seqlen_q);
  return g;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const BenchShape& s, evosdpa_backward_mode_t mode) {
  auto g = new_graph(s.dtype);
  auto q = input(*g, "Q", kQ, s, s.seqlen_q);
  auto k = input(*g, "K", kK, s, s.seqlen_k);
  auto v = input(*g, "V", kV, s, s.seqlen_k);
  auto o = input(*g, "O", kO, s, s.seqlen_q);
  auto dout = input(*g, "dO", kDO, s, s.seqlen_q);
  fe::graph::Tensor_attributes st;
  auto stats = g->tensor(stats_layout(st.set_name("stats"), s));
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("sdpa_backward")
                     .set_attn_scale(attn_scale(s))
                     .set_deterministic_algorithm(mode == EVOSDPA_BACKWARD_DETERMINISTIC);
  if (s.causal == EVOSDPA_CAUSAL_TOP_LEFT) options.set_causal_mask(true);
  if (s.causal == EVOSDPA_CAUSAL_BOTTOM_RIGHT) options.set_causal_mask_bottom_right(true);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, options);
  bhsd(dq->set_output(true).set_uid(kDQ), s, s.seqlen_q);
  bhsd(dk->set_output(true).set_uid(kDK), s, s.seqlen_k);
  bhsd(dv->set_output(true).set_uid(kDV), s, s.seqlen_k);
  return g;
}

bool check(fe::error_t e, const char* step, std::string& why_not) {
  if (e.is_good()) return true;
  why_not = std::string("cuDNN ") + step + ": " + e.get_message();
  return false;
}

// Validates the graph, picks its plan and grows the shared workspace to what the plan needs.
bool build(fe::graph::Graph& g, CudnnSdpa::State& st, std::string& why_not) {
  if (!check(g.validate(), "validate", why_not) ||
      !check(g.build_operation_graph(st.handle), "build graph", why_not) ||
      !check(g.create_execution_plans({fe::HeurMode_t::A}), "plans", why_not) ||
      !check(g.check_support(st.handle), "support", why_not) ||
      !check(g.build_plans(st.handle), "build plans", why_not))
    return false;
  int64_t ws = 0;
  if (!check(g.get_workspace_size(ws), "workspace", why_not)) return false;
  if (ws > st.workspace_bytes) {
    if (st.workspace) cudaFree(st.workspace);
    st.workspace = nullptr;
    st.workspace_bytes = 0;
    if (cudaMalloc(&st.workspace, ws) != cudaSuccess) {
      why_not = "cannot allocate the cuDNN workspace";
      return false;
    }
    st.workspace_bytes = ws;
  }
  return true;
}

bool execute(CudnnSdpa::State& st, fe::graph::Graph& g, std::unordered_map<int64_t, void*>& pack, cudaStream_t stream,
             std::string& why_not) {
  if (fe::detail::set_stream(st.handle, stream) != CUDNN_STATUS_SUCCESS) {
    why_not = "cudnnSetStream failed";
    return false;
  }
  return check(g.execute(st.handle, pack, st.workspace), "execute", why_not);
}

}  // namespace

std::unique_ptr<CudnnSdpa> CudnnSdpa::create(std::string& why_not) {
  if (fe::cudnn_dlhandle == nullptr) {
    const char* env = std::getenv("EVOSDPA_CUDNN_LIBRARY");
    for (const char* name : {env, "libcudnn.so.9", "libcudnn.so"}) {
      if (name == nullptr) continue;
      fe::cudnn_dlhandle = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
      if (fe::cudnn_dlhandle != nullptr) break;
    }
    if (fe::cudnn_dlhandle == nullptr) {
      why_not = "libcudnn.so.9 not found (set EVOSDPA_CUDNN_LIBRARY or LD_LIBRARY_PATH)";
      return nullptr;
    }
  }
  auto state = std::make_unique<State>();
  if (fe::detail::create_handle(&state->handle) != CUDNN_STATUS_SUCCESS) {
    why_not = "cudnnCreate failed";
    return nullptr;
  }
  return std::unique_ptr<CudnnSdpa>(new CudnnSdpa(std::move(state)));
}

CudnnSdpa::CudnnSdpa(std::unique_ptr<State> s) : state_(std::move(s)) {}

CudnnSdpa::~CudnnSdpa() {
  if (state_->workspace) cudaFree(state_->workspace);
  if (state_->fp8_scalars) cudaFree(state_->fp8_scalars);
  if (state_->handle) fe::detail::destroy_handle(state_->handle);
}

bool CudnnSdpa::prepare(const BenchShape& s, Pass pass, evosdpa_backward_mode_t mode, float o_scale,
                        std::string& why_not) {
  State& st = *state_;
  const bool fp8 = s.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3;
  const bool with_backward = pass != Pass::Fwd;
  auto forward = forward_graph(s, with_backward);
  if (!build(*forward, st, why_not)) return false;
  std::shared_ptr<fe::graph::Graph> backward;
  if (with_backward) {
    backward = backward_graph(s, mode);
    if (!build(*backward, st, why_not)) {
      why_not = "backward: " + why_not;
      return false;
    }
  }
  if (fp8) {
    const float scalars[5] = {1.f / kPScale, kPScale, o_scale, 0.f, 0.f};
    const size_t bytes = sizeof scalars;
    if (st.fp8_scalars == nullptr && cudaMalloc(reinterpret_cast<void**>(&st.fp8_scalars), bytes) != cudaSuccess) {
      why_not = "cannot allocate the cuDNN FP8 scalars";
      return false;
    }
    if (cudaMemcpy(st.fp8_scalars, scalars, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
      why_not = "cannot set the cuDNN FP8 scalars";
      return false;
    }
  }
  st.forward = forward;
  st.backward = backward;
  st.fp8 = fp8;
  st.stats = with_backward;
  return true;
}

bool CudnnSdpa::forward(const CudnnTensors& t, cudaStream_t stream, std::string& why_not) {
  State& st = *state_;
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(t.q)}, {kK, const_cast<void*>(t.k)},
                                          {kV, const_cast<void*>(t.v)}, {kO, t.o}};
  if (st.stats) pack[kStats] = t.stats;
  if (st.fp8) {
    if (t.descales == nullptr) {
      why_not = "FP8 inputs without descales";
      return false;
    }
    const int64_t uids[3] = {kDescaleQ, kDescaleK, kDescaleV};
    for (int i = 0; i < 3; ++i) pack[uids[i]] = const_cast<float*>(t.descales + i);
    const int64_t own[5] = {kDescaleS, kScaleS, kScaleO, kAmaxS, kAmaxO};
    for (int i = 0; i < 5; ++i) pack[own[i]] = st.fp8_scalars + i;
  }
  return execute(st, *st.forward, pack, stream, why_not);
}

bool CudnnSdpa::backward(const CudnnTensors& t, cudaStream_t stream, std::string& why_not) {
  State& st = *state_;
  if (!st.backward) {
    why_not = "cuDNN peer: no backward graph prepared";
    return false;
  }
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(t.q)},  {kK, const_cast<void*>(t.k)},
                                          {kV, const_cast<void*>(t.v)},  {kO, t.o},
                                          {kDO, const_cast<void*>(t.dout)}, {kStats, t.stats},
                                          {kDQ, t.dq}, {kDK, t.dk}, {kDV, t.dv}};
  return execute(st, *st.backward, pack, stream, why_not);
}

}  // namespace evosdpa::bench
