/* The C ABI from a C translation unit (C99, no extensions, pedantic errors): evosdpa.h must hold nothing
 * C++-only. Linked to the shared library (consumer_c) and to the static one (consumer_c_static, which
 * needs the C++ runtime: the project enables CXX, so CMake links it with the C++ driver). The same
 * checks as main.cpp's C part; exits 0 when everything is as expected. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "evosdpa/evosdpa.h"

static int failures = 0;

static void expect(int ok, const char* what) {
  printf("%s: %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) ++failures;
}

/* NO_DEVICE without a GPU; with one, the made-up addresses are refused as "not a CUDA pointer". */
static int expected_status(evosdpa_status_t s, const char* message) {
  if (s == EVOSDPA_ERROR_NO_DEVICE) return 1;
  return s == EVOSDPA_ERROR_INVALID_ARGUMENT && strstr(message, "not a CUDA pointer") != NULL;
}

int main(void) {
  char header_version[32];
  const char* version = evosdpa_version();
  const char* selected = "untouched";
  evosdpa_params_t p;
  evosdpa_status_t s;

  snprintf(header_version, sizeof header_version, "%d.%d.%d", EVOSDPA_VERSION_MAJOR, EVOSDPA_VERSION_MINOR,
           EVOSDPA_VERSION_PATCH);
  expect(version != NULL && strcmp(version, header_version) == 0, "evosdpa_version() matches the header's");
  expect(evosdpa_kernel_count() >= 1 && evosdpa_kernel_name(0) != NULL,
         "evosdpa_kernel_count(), evosdpa_kernel_name(0)");
  expect(evosdpa_dtype_size(EVOSDPA_DTYPE_BFLOAT16) == 2, "evosdpa_dtype_size(EVOSDPA_DTYPE_BFLOAT16) == 2");

  evosdpa_params_init(&p);
  expect(p.struct_size == sizeof p && p.softmax_scale != p.softmax_scale,
         "evosdpa_params_init: struct_size, NaN scale");
  p.q = (const void*)(uintptr_t)0x10000000u;
  p.k = (const void*)(uintptr_t)0x20000000u;
  p.v = (const void*)(uintptr_t)0x30000000u;
  p.o = (void*)(uintptr_t)0x40000000u;
  p.batch = 1;
  p.heads_q = p.heads_kv = 8;
  p.seqlen_q = p.seqlen_k = 512;
  p.head_dim = 64;
  p.causal = EVOSDPA_CAUSAL_BOTTOM_RIGHT;
  evosdpa_params_set_bshd_strides(&p);
  expect(p.q_seq_stride == 8 * 64 && p.q_head_stride == 64, "evosdpa_params_set_bshd_strides");
  s = evosdpa_supports(&p, "auto", &selected);
  expect(expected_status(s, evosdpa_last_error_message()), evosdpa_status_string(s));
  expect(selected == NULL, "no kernel selected");
  p.head_dim = 96;
  s = evosdpa_supports(&p, NULL, NULL);
  expect(s == EVOSDPA_ERROR_NOT_SUPPORTED && strstr(evosdpa_last_error_message(), "head_dim") != NULL,
         "head_dim 96: NOT_SUPPORTED, the message names head_dim");

  printf("%s\n", failures == 0 ? "consumer: PASS" : "consumer: FAIL");
  return failures == 0 ? 0 : 1;
}
