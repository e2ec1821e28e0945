// Valid parameters over fake, well-aligned addresses: validation and selection never dereference them.
#pragma once

#include <cstdint>
#include <string>

#include "evosdpa/evosdpa.h"
#include "selection.hpp"

inline evosdpa_params_t valid_params(int64_t b = 2, int64_t h = 8, int64_t lq = 512, int64_t lk = 512,
                                     int64_t d = 64) {
  evosdpa_params_t p;
  evosdpa_params_init(&p);
  p.q = reinterpret_cast<const void*>(uintptr_t{0x10000000});
  p.k = reinterpret_cast<const void*>(uintptr_t{0x20000000});
  p.v = reinterpret_cast<const void*>(uintptr_t{0x30000000});
  p.o = reinterpret_cast<void*>(uintptr_t{0x40000000});
  p.batch = b;
  p.heads_q = p.heads_kv = h;
  p.seqlen_q = lq;
  p.seqlen_k = lk;
  p.head_dim = d;
  evosdpa_params_set_bhsd_strides(&p);
  return p;
}

inline evosdpa::detail::DeviceInfo device(int major, int minor, long long smem = 227 * 1024) {
  evosdpa::detail::DeviceInfo d;
  d.cc_major = major;
  d.cc_minor = minor;
  d.max_smem_per_block_optin = smem;
  return d;
}

// The family a selection names, "(none)" when it refused.
inline std::string name_of(const evosdpa::detail::Selection& s) {
  return s.family != nullptr ? s.family->name : "(none)";
}
