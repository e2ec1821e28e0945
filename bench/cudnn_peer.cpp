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
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};

namespace {
constexpr int64_t kQ = 1, kK = 2, kV = 3, kO = 4;
}

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
  if (state_->handle) fe::detail::destroy_handle(state_->handle);
}

bool CudnnSdpa::prepare(const BenchShape& s, std::string& why_not) {
  const int64_t b = s.batch, h = s.heads, lq = s.seqlen_q, lk = s.seqlen_k, d = s.head_dim;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(s.dtype == EVOSDPA_DTYPE_BFLOAT16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
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
  auto [o, stats] = g->sdpa(q, k, v, options);
  (void)stats;
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
  state_->graph = g;
  return true;
}

bool CudnnSdpa::run(const void* q, const void* k, const void* v, void* o, cudaStream_t stream,
                    std::string& why_not) {
  if (fe::detail::set_stream(state_->handle, stream) != CUDNN_STATUS_SUCCESS) {
    why_not = "cudnnSetStream failed";
    return false;
  }
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(q)}, {kK, const_cast<void*>(k)},
                                          {kV, const_cast<void*>(v)}, {kO, o}};
  fe::error_t e = state_->graph->execute(state_->handle, pack, state_->workspace);
  if (!e.is_good()) {
    why_not = "cuDNN execute: " + e.get_message();
    return false;
  }
  return true;
}

}  // namespace evosdpa::bench
