// Division by a divisor fixed for the whole launch, as a multiply-high and a shift (Granlund and
// Montgomery's round-up method): the divisor's magic numbers are found once on the host, so the device
// never runs a division. An integer division by a runtime value is ~20 instructions through the float
// reciprocal; the producer thread of the Hopper kernel ran ~15 of them before its first K/V load, which
// held its first K load ~1,350 cycles behind the Q load (clock64 trace at (1,8,512,64)): with them gone the
// first K tile lands at ~2,600 cycles from entry instead of ~3,350.
// Plain C++ (host and device): the CPU tests check it against `/` and `%`.
#pragma once

#include "kernels/rtc_std.hpp"

#if defined(__CUDACC__)
#define EVOSDPA_HOST_DEVICE __host__ __device__
#else
#define EVOSDPA_HOST_DEVICE
#endif

namespace evosdpa::detail::wgmma_sm90 {

struct QuotRem {
  int quot, rem;
};

class FastDiv {
 public:
  FastDiv() = default;
  // divisor >= 1 (0 is accepted for a divisor that is never divided by, and leaves div() meaningless).
  EVOSDPA_HOST_DEVICE explicit FastDiv(int divisor) : d_(divisor) {
    if (divisor <= 1) return;
    int log2_up = 0;  // ceil(log2(divisor)), >= 1 here
    while ((int64_t{1} << log2_up) < divisor) ++log2_up;
    // mul = ceil(2^(31 + log2_up) / d) < 2^32; n * mul >> (31 + log2_up) is n / d for 0 <= n < 2^31.
    const uint64_t p = uint64_t{1} << (31 + log2_up);
    mul_ = static_cast<uint32_t>((p + static_cast<uint64_t>(divisor) - 1) / static_cast<uint64_t>(divisor));
    shift_ = static_cast<uint32_t>(log2_up - 1);
  }
  EVOSDPA_HOST_DEVICE int divisor() const { return d_; }
  // n / divisor for 0 <= n < 2^31.
  EVOSDPA_HOST_DEVICE int div(int n) const {
    const uint32_t u = static_cast<uint32_t>(n);
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(u, mul_);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(u) * mul_) >> 32);
#endif
    return d_ == 1 ? n : static_cast<int>(hi >> shift_);
  }
  EVOSDPA_HOST_DEVICE QuotRem divmod(int n) const {
    const int q = div(n);
    return {q, n - q * d_};
  }

 private:
  int d_ = 1;
  uint32_t mul_ = 0;
  uint32_t shift_ = 0;
};

}  // namespace evosdpa::detail::wgmma_sm90
