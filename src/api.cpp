// The C ABI and the C++ API: argument checks, device checks, selection, launch, error messages.
#include <cuda_runtime_api.h>

#include <cstring>
#include <limits>
#include <string>

#include "dispatch.hpp"
#include "evosdpa/evosdpa.h"
#include "evosdpa/evosdpa.hpp"
#include "selection.hpp"

#define EVOSDPA_STRINGIFY_(x) #x
#define EVOSDPA_STRINGIFY(x) EVOSDPA_STRINGIFY_(x)
#define EVOSDPA_VERSION_STRING                                                     \
  EVOSDPA_STRINGIFY(EVOSDPA_VERSION_MAJOR) "." EVOSDPA_STRINGIFY(EVOSDPA_VERSION_MINOR) "." \
      EVOSDPA_STRINGIFY(EVOSDPA_VERSION_PATCH)

namespace evosdpa::detail {
namespace {

thread_local std::string t_message;

evosdpa_status_t report(evosdpa_status_t status, std::string message) {
  t_message = std::move(message);
  return status;
}

evosdpa_status_t report(const Check& c) { return report(c.status, c.message); }

// Describe the current device, or fail with NO_DEVICE.
Check current_device(DeviceInfo& dev) {
  int ordinal = -1;
  cudaError_t err = cudaGetDevice(&ordinal);
  if (err == cudaSuccess) {
    int count = 0;
    err = cudaGetDeviceCount(&count);
    if (err == cudaSuccess && count == 0) err = cudaErrorNoDevice;
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return {EVOSDPA_ERROR_NO_DEVICE, std::string("no usable CUDA device: ") + cudaGetErrorString(err)};
  }
  int smem = 0;
  dev.ordinal = ordinal;
  if (cudaDeviceGetAttribute(&dev.cc_major, cudaDevAttrComputeCapabilityMajor, ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&dev.cc_minor, cudaDevAttrComputeCapabilityMinor, ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&dev.sm_count, cudaDevAttrMultiProcessorCount, ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal) != cudaSuccess) {
    const cudaError_t e = cudaGetLastError();
    return {EVOSDPA_ERROR_CUDA, std::string("cannot query device attributes: ") + cudaGetErrorString(e)};
  }
  dev.max_smem_per_block_optin = smem;
  dev.is_real = true;
  return {};
}

// Each non-empty tensor must be device (or managed) memory of the current device.
Check check_pointer(const char* name, const void* ptr, const DeviceInfo& dev) {
  if (ptr == nullptr) return {};
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return {EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(name) + " is not a CUDA pointer (" + cudaGetErrorString(err) + ")"};
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    return {EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(name) + " is host memory; pass device memory"};
  if (attr.type == cudaMemoryTypeDevice && attr.device != dev.ordinal)
    return {EVOSDPA_ERROR_DEVICE, std::string(name) + " is on device " + std::to_string(attr.device) +
                                      " but the current device is " + std::to_string(dev.ordinal)};
  return {};
}

Check check_pointers(const evosdpa_params_t& p, const DeviceInfo& dev) {
  const bool no_q = has_no_queries(p);
  const bool no_kv = p.batch == 0 || p.heads_kv == 0 || p.seqlen_k == 0;
  const std::pair<const char*, const void*> ptrs[] = {
      {"q", no_q ? nullptr : p.q}, {"k", no_kv ? nullptr : p.k}, {"v", no_kv ? nullptr : p.v},
      {"o", no_q ? nullptr : p.o}, {"lse", no_q ? nullptr : p.lse},
      {"q_descale", no_q ? nullptr : p.q_descale}, {"k_descale", no_q || no_kv ? nullptr : p.k_descale},
      {"v_descale", no_q || no_kv ? nullptr : p.v_descale},
      {"seqused_k", no_q ? nullptr : p.seqused_k}, {"page_table", no_q || no_kv ? nullptr : p.page_table},
      {"cu_seqlens_q", no_q ? nullptr : p.cu_seqlens_q}, {"cu_seqlens_k", no_q ? nullptr : p.cu_seqlens_k},
      {"mask", no_q || no_kv ? nullptr : p.mask}, {"alibi_slopes", no_q ? nullptr : p.alibi_slopes}};
  for (const auto& [name, ptr] : ptrs)
    if (Check c = check_pointer(name, ptr, dev); !c.ok()) return c;
  return {};
}

// Everything up to the launch: normalises the caller's struct into `p`, sets `chosen` to the kernel to
// run, or `nothing_to_do` for an empty problem. For the workspace query (`workspace_query`) the caller's
// workspace is not read (Selection::workspace_wanted answers it).
evosdpa_status_t prepare(const evosdpa_params_t* params, const char* kernel, evosdpa_params_t& p, Selection& chosen,
                         bool& nothing_to_do, bool workspace_query = false) {
  nothing_to_do = false;
  if (Check c = normalize_params(params, p); !c.ok()) return report(c);
  // The forward reads workspace and workspace_size only for callers of 0.5 headers and later: a 0.4
  // caller may have set them for the backward, which they then belonged to alone.
  if (workspace_query || !knows_forward_workspace(params->struct_size)) {
    p.workspace = nullptr;
    p.workspace_size = 0;
  }
  if (Check c = check_kernel_name(kernel); !c.ok()) return report(c);
  if (Check c = validate_params(p); !c.ok()) return report(c);
  if (has_no_queries(p)) {
    nothing_to_do = true;
    return report(EVOSDPA_SUCCESS, "");
  }
  DeviceInfo dev;
  if (Check c = current_device(dev); !c.ok()) return report(c);
  const Selection sel = select_kernel(p, dev, kernel);
  if (!sel.check.ok()) return report(sel.check);
  if (Check c = check_pointers(p, dev); !c.ok()) return report(c);
  if (!workspace_query) {
    if (Check c = check_forward_workspace(p, sel.workspace_bytes); !c.ok()) return report(c);
    if (sel.workspace_bytes > 0)
      if (Check c = check_pointer("workspace", p.workspace, dev); !c.ok()) return report(c);
  }
  chosen = sel;
  return report(EVOSDPA_SUCCESS, "");
}

Check check_backward_pointers(const evosdpa_params_t& p, const DeviceInfo& dev, size_t workspace_bytes) {
  const bool no_q = has_no_queries(p);
  const bool no_kv = p.batch == 0 || p.heads_kv == 0 || p.seqlen_k == 0;
  const std::pair<const char*, const void*> ptrs[] = {
      {"q", no_q ? nullptr : p.q},       {"k", no_kv ? nullptr : p.k},     {"v", no_kv ? nullptr : p.v},
      {"o", no_q ? nullptr : p.o},       {"lse", no_q ? nullptr : p.lse},  {"dout", no_q ? nullptr : p.dout},
      {"dq", no_q ? nullptr : p.dq},     {"dk", no_kv ? nullptr : p.dk},   {"dv", no_kv ? nullptr : p.dv},
      {"workspace", workspace_bytes == 0 ? nullptr : p.workspace}};
  for (const auto& [name, ptr] : ptrs)
    if (Check c = check_pointer(name, ptr, dev); !c.ok()) return c;
  return {};
}

// prepare() for the backward pass; `workspace_bytes` receives what the chosen kernel needs, which is
// checked against the caller's workspace when `check_workspace_too`.
evosdpa_status_t prepare_backward(const evosdpa_params_t* params, const char* kernel, evosdpa_params_t& p,
                                  Selection& chosen, bool& nothing_to_do, size_t& workspace_bytes,
                                  bool check_workspace_too) {
  nothing_to_do = false;
  workspace_bytes = 0;
  if (Check c = normalize_params(params, p); !c.ok()) return report(c);
  if (Check c = check_kernel_name(kernel); !c.ok()) return report(c);
  if (Check c = validate_backward_params(p); !c.ok()) return report(c);
  if (backward_has_no_work(p)) {
    nothing_to_do = true;
    return report(EVOSDPA_SUCCESS, "");
  }
  // No query heads under K/V heads (0 is a multiple of any heads_kv): no query sees any key, so dK and dV
  // are 0 (evosdpa.h). Run it as the case of no query rows, one query head per K/V head, whose kernels
  // zero-fill dK and dV; q, o, lse, dout and dq stay empty.
  if (p.heads_q == 0) {
    p.heads_q = p.heads_kv;
    p.seqlen_q = 0;
  }
  DeviceInfo dev;
  if (Check c = current_device(dev); !c.ok()) return report(c);
  const Selection sel = select_kernel(p, dev, kernel, registry(), Pass::kBackward);
  if (!sel.check.ok()) return report(sel.check);
  workspace_bytes = sel.family->backward->workspace_bytes(p, sel.variant);
  if (check_workspace_too)
    if (Check c = check_workspace(p, workspace_bytes); !c.ok()) return report(c);
  if (Check c = check_backward_pointers(p, dev, check_workspace_too ? workspace_bytes : 0); !c.ok()) return report(c);
  chosen = sel;
  return report(EVOSDPA_SUCCESS, "");
}

}  // namespace
}  // namespace evosdpa::detail

using namespace evosdpa::detail;

extern "C" {

evosdpa_status_t evosdpa_params_init_sized(evosdpa_params_t* p, size_t struct_size) {
  if (p == nullptr) return report(EVOSDPA_ERROR_INVALID_ARGUMENT, "params is a null pointer");
  if (Check c = check_struct_size(struct_size); !c.ok()) return report(c);
  // Zero all the caller's bytes (appended fields default to zero), then the library's known defaults.
  std::memset(static_cast<void*>(p), 0, struct_size);
  p->struct_size = struct_size;
  p->dtype = EVOSDPA_DTYPE_FLOAT16;
  p->causal = EVOSDPA_CAUSAL_NONE;
  p->softmax_scale = std::numeric_limits<float>::quiet_NaN();
  return report(EVOSDPA_SUCCESS, "");
}

size_t evosdpa_dtype_size(evosdpa_dtype_t dtype) {
  switch (dtype) {
    case EVOSDPA_DTYPE_FLOAT16: return 2;
    case EVOSDPA_DTYPE_BFLOAT16: return 2;
    case EVOSDPA_DTYPE_FLOAT8_E4M3: return 1;
  }
  return 0;
}

const char* evosdpa_version(void) { return EVOSDPA_VERSION_STRING; }

void evosdpa_params_set_bhsd_strides(evosdpa_params_t* p) {
  if (p == nullptr) return;
  const int64_t d = p->head_dim;
  p->dout_seq_stride = p->dq_seq_stride = d;
  p->dout_head_stride = p->dq_head_stride = p->seqlen_q * d;
  p->dout_batch_stride = p->dq_batch_stride = p->heads_q * p->seqlen_q * d;
  p->dk_seq_stride = p->dv_seq_stride = d;
  p->dk_head_stride = p->dv_head_stride = p->seqlen_k * d;
  p->dk_batch_stride = p->dv_batch_stride = p->heads_kv * p->seqlen_k * d;
  // Packed sequences: one batch of total rows.
  const bool packed_q = p->cu_seqlens_q != nullptr, packed_k = p->cu_seqlens_k != nullptr;
  const int64_t rows_q = packed_q ? p->total_q : p->seqlen_q, rows_k = packed_k ? p->total_k : p->seqlen_k;
  p->q_seq_stride = p->o_seq_stride = d;
  p->q_head_stride = p->o_head_stride = rows_q * d;
  p->q_batch_stride = p->o_batch_stride = packed_q ? 0 : p->heads_q * rows_q * d;
  p->k_seq_stride = p->v_seq_stride = d;
  p->k_head_stride = p->v_head_stride = rows_k * d;
  p->k_batch_stride = p->v_batch_stride = packed_k ? 0 : p->heads_kv * rows_k * d;
}

void evosdpa_params_set_bshd_strides(evosdpa_params_t* p) {
  if (p == nullptr) return;
  const int64_t d = p->head_dim;
  p->dout_head_stride = p->dq_head_stride = d;
  p->dout_seq_stride = p->dq_seq_stride = p->heads_q * d;
  p->dout_batch_stride = p->dq_batch_stride = p->seqlen_q * p->heads_q * d;
  p->dk_head_stride = p->dv_head_stride = d;
  p->dk_seq_stride = p->dv_seq_stride = p->heads_kv * d;
  p->dk_batch_stride = p->dv_batch_stride = p->seqlen_k * p->heads_kv * d;
  p->q_head_stride = p->o_head_stride = d;
  p->q_seq_stride = p->o_seq_stride = p->heads_q * d;
  p->q_batch_stride = p->o_batch_stride = p->cu_seqlens_q != nullptr ? 0 : p->seqlen_q * p->heads_q * d;
  p->k_head_stride = p->v_head_stride = d;
  p->k_seq_stride = p->v_seq_stride = p->heads_kv * d;
  p->k_batch_stride = p->v_batch_stride = p->cu_seqlens_k != nullptr ? 0 : p->seqlen_k * p->heads_kv * d;
}

evosdpa_status_t evosdpa_attention_forward(const evosdpa_params_t* params, const char* kernel, void* stream) {
  evosdpa_params_t p;
  Selection chosen;
  bool nothing_to_do = false;
  const evosdpa_status_t s = prepare(params, kernel, p, chosen, nothing_to_do);
  if (s != EVOSDPA_SUCCESS || nothing_to_do) return s;
  const cudaError_t err = run_kernel(chosen, p, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess)
    return report(EVOSDPA_ERROR_CUDA,
                  std::string(chosen.family->name) + " launch failed: " + cudaGetErrorString(err));
  return EVOSDPA_SUCCESS;
}

evosdpa_status_t evosdpa_supports(const evosdpa_params_t* params, const char* kernel, const char** selected) {
  evosdpa_params_t p;
  Selection chosen;
  bool nothing_to_do = false;
  const evosdpa_status_t s = prepare(params, kernel, p, chosen, nothing_to_do);
  if (selected != nullptr) *selected = (s == EVOSDPA_SUCCESS && !nothing_to_do) ? chosen.family->name : nullptr;
  return s;
}

evosdpa_status_t evosdpa_forward_workspace_size(const evosdpa_params_t* params, const char* kernel, size_t* bytes) {
  if (bytes == nullptr) return report(EVOSDPA_ERROR_INVALID_ARGUMENT, "bytes is a null pointer");
  *bytes = 0;
  evosdpa_params_t p;
  Selection chosen;
  bool nothing_to_do = false;
  const evosdpa_status_t s = prepare(params, kernel, p, chosen, nothing_to_do, true);
  if (s == EVOSDPA_SUCCESS && !nothing_to_do) *bytes = chosen.workspace_wanted;
  return s;
}

evosdpa_status_t evosdpa_attention_backward(const evosdpa_params_t* params, const char* kernel, void* stream) {
  evosdpa_params_t p;
  Selection chosen;
  bool nothing_to_do = false;
  size_t workspace_bytes = 0;
  const evosdpa_status_t s = prepare_backward(params, kernel, p, chosen, nothing_to_do, workspace_bytes, true);
  if (s != EVOSDPA_SUCCESS || nothing_to_do) return s;
  const cudaError_t err = run_backward(chosen, p, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess)
    return report(EVOSDPA_ERROR_CUDA,
                  std::string(chosen.family->name) + " backward launch failed: " + cudaGetErrorString(err));
  return EVOSDPA_SUCCESS;
}

evosdpa_status_t evosdpa_backward_workspace_size(const evosdpa_params_t* params, const char* kernel, size_t* bytes) {
  if (bytes == nullptr) return report(EVOSDPA_ERROR_INVALID_ARGUMENT, "bytes is a null pointer");
  *bytes = 0;
  evosdpa_params_t p;
  Selection chosen;
  bool nothing_to_do = false;
  size_t workspace_bytes = 0;
  const evosdpa_status_t s = prepare_backward(params, kernel, p, chosen, nothing_to_do, workspace_bytes, false);
  if (s == EVOSDPA_SUCCESS) *bytes = workspace_bytes;
  return s;
}

evosdpa_status_t evosdpa_supports_backward(const evosdpa_params_t* params, const char* kernel, const char** selected) {
  evosdpa_params_t p;
  Selection chosen;
  bool nothing_to_do = false;
  size_t workspace_bytes = 0;
  const evosdpa_status_t s = prepare_backward(params, kernel, p, chosen, nothing_to_do, workspace_bytes, true);
  if (selected != nullptr) *selected = (s == EVOSDPA_SUCCESS && !nothing_to_do) ? chosen.family->name : nullptr;
  return s;
}

int evosdpa_kernel_count(void) { return kernel_count(); }

const char* evosdpa_kernel_name(int index) { return kernel_name(index); }

const char* evosdpa_last_error_message(void) { return t_message.c_str(); }

const char* evosdpa_status_string(evosdpa_status_t status) {
  switch (status) {
    case EVOSDPA_SUCCESS: return "EVOSDPA_SUCCESS";
    case EVOSDPA_ERROR_INVALID_ARGUMENT: return "EVOSDPA_ERROR_INVALID_ARGUMENT";
    case EVOSDPA_ERROR_NOT_SUPPORTED: return "EVOSDPA_ERROR_NOT_SUPPORTED";
    case EVOSDPA_ERROR_NO_DEVICE: return "EVOSDPA_ERROR_NO_DEVICE";
    case EVOSDPA_ERROR_DEVICE: return "EVOSDPA_ERROR_DEVICE";
    case EVOSDPA_ERROR_CUDA: return "EVOSDPA_ERROR_CUDA";
  }
  return "EVOSDPA_UNKNOWN_STATUS";
}

}  // extern "C"

namespace evosdpa {

Params make_params(const void* q, const void* k, const void* v, void* o, DType dtype, int64_t batch, int64_t heads,
                   int64_t seqlen_q, int64_t seqlen_k, int64_t head_dim, Causal causal, Layout layout) {
  Params p;
  evosdpa_params_init(&p);
  p.q = q;
  p.k = k;
  p.v = v;
  p.o = o;
  p.dtype = dtype;
  p.batch = batch;
  p.heads_q = p.heads_kv = heads;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  p.causal = causal;
  if (layout == Layout::BHSD)
    evosdpa_params_set_bhsd_strides(&p);
  else
    evosdpa_params_set_bshd_strides(&p);
  return p;
}

Result attention_forward(const Params& params, cudaStream_t stream, const std::string& kernel) {
  Result r;
  r.status = evosdpa_attention_forward(&params, kernel.c_str(), stream);
  if (!r.ok()) r.message = evosdpa_last_error_message();
  return r;
}

Result supports(const Params& params, const std::string& kernel) {
  Result r;
  const char* selected = nullptr;
  r.status = evosdpa_supports(&params, kernel.c_str(), &selected);
  if (!r.ok()) r.message = evosdpa_last_error_message();
  if (selected != nullptr) r.kernel = selected;
  return r;
}

Result attention_backward(const Params& params, cudaStream_t stream, const std::string& kernel) {
  Result r;
  r.status = evosdpa_attention_backward(&params, kernel.c_str(), stream);
  if (!r.ok()) r.message = evosdpa_last_error_message();
  return r;
}

Result forward_workspace_size(const Params& params, size_t& bytes, const std::string& kernel) {
  Result r;
  r.status = evosdpa_forward_workspace_size(&params, kernel.c_str(), &bytes);
  if (!r.ok()) r.message = evosdpa_last_error_message();
  return r;
}

Result backward_workspace_size(const Params& params, size_t& bytes, const std::string& kernel) {
  Result r;
  r.status = evosdpa_backward_workspace_size(&params, kernel.c_str(), &bytes);
  if (!r.ok()) r.message = evosdpa_last_error_message();
  return r;
}

Result supports_backward(const Params& params, const std::string& kernel) {
  Result r;
  const char* selected = nullptr;
  r.status = evosdpa_supports_backward(&params, kernel.c_str(), &selected);
  if (!r.ok()) r.message = evosdpa_last_error_message();
  if (selected != nullptr) r.kernel = selected;
  return r;
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (int i = 0; i < evosdpa_kernel_count(); ++i) names.emplace_back(evosdpa_kernel_name(i));
  return names;
}

}  // namespace evosdpa
