// Uses evosdpa the way an application would: version, kernel names, parameters, and whether a problem is
// supported. Without a GPU that last answer must be EVOSDPA_ERROR_NO_DEVICE; with one, the device path
// runs and refuses the made-up tensor addresses. Exits 0 when everything is as expected.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "evosdpa/evosdpa.h"
#ifdef CONSUMER_CXX_API
#include "evosdpa/evosdpa.hpp"
#endif

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures;
}

// The status supports() must give here: NO_DEVICE without a GPU; with one, the made-up addresses are
// refused as "not a CUDA pointer".
bool expected_status(evosdpa_status_t s, const char* message) {
  if (s == EVOSDPA_ERROR_NO_DEVICE) return true;
  return s == EVOSDPA_ERROR_INVALID_ARGUMENT && std::strstr(message, "not a CUDA pointer") != nullptr;
}

}  // namespace

int main() {
  char header_version[32];
  std::snprintf(header_version, sizeof header_version, "%d.%d.%d", EVOSDPA_VERSION_MAJOR, EVOSDPA_VERSION_MINOR,
                EVOSDPA_VERSION_PATCH);
  const char* version = evosdpa_version();
  expect(version != nullptr && std::strcmp(version, header_version) == 0,
         std::string("evosdpa_version() ") + (version ? version : "(null)") + " matches the header's " + header_version);

  const int n = evosdpa_kernel_count();
  expect(n >= 1, "evosdpa_kernel_count() = " + std::to_string(n));
  for (int i = 0; i < n; ++i) {
    const char* name = evosdpa_kernel_name(i);
    expect(name != nullptr && *name != '\0', "kernel " + std::to_string(i) + ": " + (name ? name : "(null)"));
  }

  evosdpa_params_t p;
  evosdpa_params_init(&p);
  expect(p.struct_size == sizeof p, "evosdpa_params_init sets struct_size");
  // Made-up, well-aligned device addresses: nothing is dereferenced before the device checks.
  p.q = reinterpret_cast<const void*>(uintptr_t{0x10000000});
  p.k = reinterpret_cast<const void*>(uintptr_t{0x20000000});
  p.v = reinterpret_cast<const void*>(uintptr_t{0x30000000});
  p.o = reinterpret_cast<void*>(uintptr_t{0x40000000});
  p.batch = 1;
  p.heads_q = p.heads_kv = 8;
  p.seqlen_q = p.seqlen_k = 512;
  p.head_dim = 64;
  evosdpa_params_set_bhsd_strides(&p);
  const char* selected = "untouched";
  const evosdpa_status_t s = evosdpa_supports(&p, "auto", &selected);
  const std::string message = evosdpa_last_error_message();
  expect(expected_status(s, message.c_str()),
         std::string("evosdpa_supports: ") + evosdpa_status_string(s) + " (" + message + ")");
  expect(selected == nullptr, "no kernel selected");

  // The backward pass (ABI 0.4): its entry points are exported and check the call the same way.
  p.lse = reinterpret_cast<float*>(uintptr_t{0x50000000});
  p.dout = reinterpret_cast<const void*>(uintptr_t{0x60000000});
  p.dq = reinterpret_cast<void*>(uintptr_t{0x70000000});
  p.dk = reinterpret_cast<void*>(uintptr_t{0x80000000});
  p.dv = reinterpret_cast<void*>(uintptr_t{0x90000000});
  evosdpa_params_set_bhsd_strides(&p);
  size_t workspace = 1;
  const evosdpa_status_t ws = evosdpa_backward_workspace_size(&p, "auto", &workspace);
  const std::string ws_message = evosdpa_last_error_message();
  expect(expected_status(ws, ws_message.c_str()) && workspace == 0,
         std::string("evosdpa_backward_workspace_size: ") + evosdpa_status_string(ws) + " (" + ws_message + ")");
  p.lse = nullptr;
  expect(evosdpa_attention_backward(&p, "auto", nullptr) == EVOSDPA_ERROR_INVALID_ARGUMENT,
         "evosdpa_attention_backward refuses a null lse");

#ifdef CONSUMER_CXX_API
  const evosdpa::Params cp = evosdpa::make_params(p.q, p.k, p.v, p.o, EVOSDPA_DTYPE_BFLOAT16, 1, 8, 512, 512, 128,
                                                  EVOSDPA_CAUSAL_TOP_LEFT);
  const evosdpa::Result r = evosdpa::supports(cp);
  expect(expected_status(r.status, r.message.c_str()) && r.kernel.empty(),
         std::string("evosdpa::supports: ") + evosdpa_status_string(r.status) + " (" + r.message + ")");
  expect(evosdpa::kernel_names().size() == static_cast<size_t>(n), "evosdpa::kernel_names()");
  const evosdpa::Result b = evosdpa::supports_backward(p);
  expect(b.status == EVOSDPA_ERROR_INVALID_ARGUMENT && b.kernel.empty(),
         std::string("evosdpa::supports_backward: ") + evosdpa_status_string(b.status) + " (" + b.message + ")");
#endif

  std::printf("%s\n", failures == 0 ? "consumer: PASS" : "consumer: FAIL");
  return failures == 0 ? 0 : 1;
}
