// The host E4M3 codec (host_tensor.hpp) against the format's definition: every code decoded by the
// formula, every finite value round-tripped, ties to even, saturation and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "host/host_tensor.hpp"

using namespace evosdpa::host;

namespace {

// E4M3 by its definition: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal
// (m/8 * 2^-6); S.1111.111 is NaN; there are no infinities.
double by_formula(uint8_t c) {
  const int sign = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
  return sign ? -mag : mag;
}

TEST(Fp8Codec, DecodesEveryCodeByTheFormula) {
  for (int c = 0; c < 256; ++c) {
    const double want = by_formula(static_cast<uint8_t>(c));
    const float got = decode_e4m3(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << c;
    }
  }
  EXPECT_EQ(decode_e4m3(0x7e), kE4m3Max);
  EXPECT_EQ(decode_e4m3(0x01), std::ldexp(1.f, -9));  // the smallest subnormal
}

TEST(Fp8Codec, RoundTripsEveryFiniteValueAndRoundsTiesToEven) {
  for (int c = 0; c < 256; ++c) {
    const double x = by_formula(static_cast<uint8_t>(c));
    if (std::isnan(x)) continue;
    EXPECT_EQ(encode_e4m3(static_cast<float>(x)), c) << x;
  }
  // Between adjacent positive codes: just below the midpoint rounds down, just above up, the midpoint
  // itself to the even code.
  for (int c = 0; c < 0x7e; ++c) {
    const double lo = by_formula(static_cast<uint8_t>(c)), hi = by_formula(static_cast<uint8_t>(c + 1));
    const double mid = (lo + hi) / 2;
    EXPECT_EQ(encode_e4m3(static_cast<float>(mid)), (c % 2 == 0) ? c : c + 1) << mid;
    EXPECT_EQ(encode_e4m3(std::nextafter(static_cast<float>(mid), 0.f)), c) << mid;
    EXPECT_EQ(encode_e4m3(std::nextafter(static_cast<float>(mid), 1e9f)), c + 1) << mid;
    EXPECT_EQ(encode_e4m3(static_cast<float>(-mid)), 0x80 | ((c % 2 == 0) ? c : c + 1)) << -mid;
  }
}

TEST(Fp8Codec, SaturatesAndKeepsNaN) {
  for (float x : {449.f, 464.f, 1e6f, std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(round_to_e4m3(x), kE4m3Max) << x;
    EXPECT_EQ(round_to_e4m3(-x), -kE4m3Max) << x;
  }
  EXPECT_TRUE(std::isnan(round_to_e4m3(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(round_to_e4m3(std::ldexp(1.f, -11)), 0.f);  // below half the smallest subnormal
}

}  // namespace
