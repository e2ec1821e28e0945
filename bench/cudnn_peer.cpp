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
  std::shared_ptr<fe::graph::Graph> graph;
  bool fp8 = false;  // the graph is sdpa_fp8's
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  // FP8: descale_s, scale_s and scale_o (constants), then the amax outputs, which nothing reads.
  float* fp8_scalars = nullptr;
};

namespace {
constexpr int64_t kQ = 1, kK = 2, kV = 3, kO = 4;
// FP8 scalars (sdpa_fp8's uids): the inputs' descales, then S's and O's scales and the amax outputs.
constexpr int64_t kDescaleQ = 5, kDescaleK = 6, kDescaleV = 7, kDescaleS = 8, kScaleS = 9, kScaleO = 10,
                  kAmaxS = 11, kAmaxO = 12;
// P (at most 1) is quantised to E4M3 as P * scale_s: 448 puts 1 at E4M3's largest value, as
// FlashAttention-3 does; at scale_s = 1, P's small values fall into E4M3's subnormals (docs/fp8-design.md:
// 64% of one scratch run's outputs were more than 12.5% off).
constexpr float kPScale = 448.f;
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

bool CudnnSdpa::prepare(const BenchShape& s, float o_scale, std::string& why_not) {
  const int64_t b = s.batch, h = s.heads, lq = s.seqlen_q, lk = s.seqlen_k, d = s.head_dim;
  const bool fp8 = s.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fp8                                 ? fe::DataType_t::FP8_E4M3
                      : s.dtype == EVOSDPA_DTYPE_BFLOAT16 ? fe::DataType_t::BFLOAT16
                                                          : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, int64_t uid, int64_t len) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim({b, h, len, d})
                         .set_stride({h * len * d, len * d, d, 1}));
  };
  auto q = tensor("Q", kQ, lq);
  auto k = tensor("K", kK, lk);
  auto v = tensor("V", kV, lk);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("sdpa")
                     .set_generate_stats(false)
                     .set_attn_scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))));
  if (s.causal == EVOSDPA_CAUSAL_TOP_LEFT) options.set_causal_mask(true);
  if (s.causal == EVOSDPA_CAUSAL_BOTTOM_RIGHT) options.set_causal_mask_bottom_right(true);
  std::shared_ptr<fe::graph::Tensor_attributes> o;
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
    o = g->sdpa(q, k, v, options)[0];
  }
  o->set_output(true).set_uid(kO).set_dim({b, h, lq, d}).set_stride({h * lq * d, lq * d, d, 1});

  auto check = [&](fe::error_t e, const char* step) {
    if (e.is_good()) return true;
    why_not = std::string("cuDNN ") + step + ": " + e.get_message();
    return false;
  };
  if (!check(g->validate(), "validate") || !check(g->build_operation_graph(state_->handle), "build graph") ||
      !check(g->create_execution_plans({fe::HeurMode_t::A}), "plans") ||
      !check(g->check_support(state_->handle), "support") || !check(g->build_plans(state_->handle), "build plans"))
    return false;
  int64_t ws = 0;
  if (!check(g->get_workspace_size(ws), "workspace")) return false;
  if (ws > state_->workspace_bytes) {
    if (state_->workspace) cudaFree(state_->workspace);
    state_->workspace = nullptr;
    if (cudaMalloc(&state_->workspace, ws) != cudaSuccess) {
      why_not = "cannot allocate the cuDNN workspace";
      return false;
    }
    state_->workspace_bytes = ws;
  }
  if (fp8) {
    const float scalars[5] = {1.f / kPScale, kPScale, o_scale, 0.f, 0.f};
    const size_t bytes = sizeof scalars;
    if (state_->fp8_scalars == nullptr &&
        cudaMalloc(reinterpret_cast<void**>(&state_->fp8_scalars), bytes) != cudaSuccess) {
      why_not = "cannot allocate the cuDNN FP8 scalars";
      return false;
    }
    if (cudaMemcpy(state_->fp8_scalars, scalars, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
      why_not = "cannot set the cuDNN FP8 scalars";
      return false;
    }
  }
  state_->graph = g;
  state_->fp8 = fp8;
  return true;
}

bool CudnnSdpa::run(const void* q, const void* k, const void* v, void* o, const float* descales,
                    cudaStream_t stream, std::string& why_not) {
  if (fe::detail::set_stream(state_->handle, stream) != CUDNN_STATUS_SUCCESS) {
    why_not = "cudnnSetStream failed";
    return false;
  }
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(q)}, {kK, const_cast<void*>(k)},
                                          {kV, const_cast<void*>(v)}, {kO, o}};
  if (state_->fp8) {
    if (descales == nullptr) {
      why_not = "FP8 inputs without descales";
      return false;
    }
    const int64_t uids[3] = {kDescaleQ, kDescaleK, kDescaleV};
    for (int i = 0; i < 3; ++i) pack[uids[i]] = const_cast<float*>(descales + i);
    const int64_t own[5] = {kDescaleS, kScaleS, kScaleO, kAmaxS, kAmaxO};
    for (int i = 0; i < 5; ++i) pack[own[i]] = state_->fp8_scalars + i;
  }
  fe::error_t e = state_->graph->execute(state_->handle, pack, state_->workspace);
  if (!e.is_good()) {
    why_not = "cuDNN execute: " + e.get_message();
    return false;
  }
  return true;
}

}  // namespace evosdpa::bench
