// Every argument check that needs no device: each bad input gets its status and a message naming it.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <string>

#include "cpu/params_fixture.hpp"

using evosdpa::detail::validate_params;

namespace {

void expect_error(const evosdpa_params_t& p, evosdpa_status_t status, const std::string& needle) {
  const auto c = validate_params(p);
  EXPECT_EQ(c.status, status) << c.message;
  EXPECT_NE(c.message.find(needle), std::string::npos) << "message: " << c.message;
}

TEST(Validation, AcceptsValidBhsdAndBshd) {
  auto p = valid_params();
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
  evosdpa_params_set_bshd_strides(&p);
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
  p.heads_kv = 2;  // grouped-query attention
  evosdpa_params_set_bshd_strides(&p);
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
}

TEST(Validation, NullPointers) {
  for (int which = 0; which < 4; ++which) {
    auto p = valid_params();
    const char* names[] = {"q", "k", "v", "o"};
    if (which == 0) p.q = nullptr;
    if (which == 1) p.k = nullptr;
    if (which == 2) p.v = nullptr;
    if (which == 3) p.o = nullptr;
    expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(names[which]) + " is a null pointer");
  }
}

TEST(Validation, NullPointersAllowedForEmptyTensors) {
  auto p = valid_params(2, 8, 0, 0);
  p.q = p.k = p.v = nullptr;
  p.o = nullptr;
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
  auto p2 = valid_params(2, 8, 16, 0);  // Lk = 0: K and V empty, O still written
  p2.k = p2.v = nullptr;
  EXPECT_TRUE(validate_params(p2).ok()) << validate_params(p2).message;
  p2.o = nullptr;
  expect_error(p2, EVOSDPA_ERROR_INVALID_ARGUMENT, "o is a null pointer");
}

// Sizes whose product passes 2^63 (here exactly 2^64, which int64 arithmetic would wrap to 0) are a
// tensor with elements: a null q is still refused.
TEST(Validation, NullPointerOfAHugeTensor) {
  auto p = valid_params(int64_t{1} << 30, int64_t{1} << 27, 1, 1, 128);
  p.q = nullptr;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "q is a null pointer");
}

TEST(Validation, NegativeSizes) {
  const char* names[] = {"batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim"};
  for (int i = 0; i < 6; ++i) {
    auto p = valid_params();
    int64_t* fields[] = {&p.batch, &p.heads_q, &p.heads_kv, &p.seqlen_q, &p.seqlen_k, &p.head_dim};
    *fields[i] = -1;
    expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(names[i]) + " is negative");
  }
}

TEST(Validation, SizesBeyondInt32) {
  auto p = valid_params();
  p.seqlen_k = int64_t{INT32_MAX} + 1;
  expect_error(p, EVOSDPA_ERROR_NOT_SUPPORTED, "seqlen_k");
}

TEST(Validation, UnsupportedHeadDim) {
  for (int64_t d : {0, 32, 80, 96, 256}) {
    auto p = valid_params(1, 1, 8, 8, d);
    expect_error(p, EVOSDPA_ERROR_NOT_SUPPORTED, "head_dim " + std::to_string(d) + " is not supported");
  }
}

TEST(Validation, BadEnums) {
  auto p = valid_params();
  p.dtype = static_cast<evosdpa_dtype_t>(7);
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "dtype 7");
  p = valid_params();
  p.causal = static_cast<evosdpa_causal_t>(-1);
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "causal -1");
}

TEST(Validation, HeadGrouping) {
  auto p = valid_params();
  p.heads_kv = 3;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "not a multiple of heads_kv");
  p.heads_kv = 0;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "heads_kv is 0");
}

TEST(Validation, Scale) {
  auto p = valid_params();
  p.softmax_scale = INFINITY;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "softmax_scale is infinite");
  p.softmax_scale = -INFINITY;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "softmax_scale is infinite");
  for (float ok : {NAN, 0.f, -0.f, -0.5f, 1e-30f}) {  // NaN: the default; 0: uniform weights (PyTorch's scale=0)
    p.softmax_scale = ok;
    EXPECT_TRUE(validate_params(p).ok()) << ok;
  }
}

TEST(Validation, SequenceLengthCapKeepsTileArithmeticInInt32) {
  // Kernels add tile sizes to token indices in int; lengths are capped at 2^30 so that cannot overflow.
  static_assert(EVOSDPA_MAX_SEQLEN + 4096 < INT32_MAX, "room for any tile above the cap");
  for (int which = 0; which < 2; ++which) {
    auto p = valid_params(1, 1, 8, 8);
    int64_t& len = which == 0 ? p.seqlen_q : p.seqlen_k;
    len = EVOSDPA_MAX_SEQLEN;
    evosdpa_params_set_bhsd_strides(&p);
    p.q = reinterpret_cast<const void*>(uintptr_t{1} << 40);  // spans of 2^30 rows must not overlap
    p.k = reinterpret_cast<const void*>(uintptr_t{2} << 40);
    p.v = reinterpret_cast<const void*>(uintptr_t{3} << 40);
    p.o = reinterpret_cast<void*>(uintptr_t{4} << 40);
    EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
    len = EVOSDPA_MAX_SEQLEN + 1;
    evosdpa_params_set_bhsd_strides(&p);
    expect_error(p, EVOSDPA_ERROR_NOT_SUPPORTED, which == 0 ? "seqlen_q = 1073741825 exceeds EVOSDPA_MAX_SEQLEN"
                                                            : "seqlen_k = 1073741825 exceeds EVOSDPA_MAX_SEQLEN");
    len = INT32_MAX;  // within a tile of INT32_MAX: the case that used to overflow `seqlen + block_m - 1`
    evosdpa_params_set_bhsd_strides(&p);
    expect_error(p, EVOSDPA_ERROR_NOT_SUPPORTED, "exceeds EVOSDPA_MAX_SEQLEN");
  }
}

TEST(Validation, OutputsMustNotAliasInputs) {
  const int64_t q_bytes = 2 * 8 * 512 * 64 * 2;  // valid_params(): [2, 8, 512, 64] fp16
  struct Alias {
    const char* what;
    std::string needle;
    void (*apply)(evosdpa_params_t&);
  };
  const Alias cases[] = {
      {"o is q (in place)", "o (bytes", [](evosdpa_params_t& p) { p.o = const_cast<void*>(p.q); }},
      {"o ends in k's first element", "overlaps input k",
       [](evosdpa_params_t& p) { p.o = static_cast<char*>(const_cast<void*>(p.k)) - 2 * 8 * 512 * 64 * 2 + 2; }},
      {"o starts in v's last element", "overlaps input v",
       [](evosdpa_params_t& p) { p.o = static_cast<char*>(const_cast<void*>(p.v)) + 2 * 8 * 512 * 64 * 2 - 2; }},
      {"lse inside k", "lse (bytes",
       [](evosdpa_params_t& p) { p.lse = reinterpret_cast<float*>(static_cast<char*>(const_cast<void*>(p.k)) + 4096); }},
      {"lse inside o", "o and lse overlap",
       [](evosdpa_params_t& p) { p.lse = reinterpret_cast<float*>(static_cast<char*>(p.o) + 64); }},
      {"o interleaved with q (disjoint elements, shared span)", "overlaps input q",
       [](evosdpa_params_t& p) {
         p.q_seq_stride = p.o_seq_stride = 128, p.q_head_stride = p.o_head_stride = 512 * 128,
         p.q_batch_stride = p.o_batch_stride = 8 * 512 * 128;
         p.o = static_cast<char*>(const_cast<void*>(p.q)) + 128;
       }},
  };
  for (const Alias& a : cases) {
    auto p = valid_params();
    a.apply(p);
    SCOPED_TRACE(a.what);
    expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, a.needle);
  }
  // Touching but not sharing a byte is fine: o right after q, lse right after o.
  auto p = valid_params();
  p.o = static_cast<char*>(const_cast<void*>(p.q)) + q_bytes;
  p.lse = reinterpret_cast<float*>(static_cast<char*>(p.o) + q_bytes);
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
  // Inputs may share memory (K = V, one tensor passed twice).
  p = valid_params();
  p.v = p.k;
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
  // An empty output aliases nothing.
  p = valid_params(2, 8, 0, 16);
  p.o = const_cast<void*>(p.k);
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
}

TEST(Validation, NegativeStride) {
  auto p = valid_params();
  p.k_seq_stride = -64;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "k seq stride is negative");
}

TEST(Validation, OverlappingOutput) {
  auto p = valid_params();
  p.o_seq_stride = 32;  // rows of 64 elements overlap
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "o strides make distinct output elements overlap");
  p = valid_params();
  p.o_head_stride = 0;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "overlap");
}

TEST(Validation, BroadcastInputsAreAllowed) {
  auto p = valid_params();
  p.k_batch_stride = p.v_batch_stride = 0;  // one K/V shared by the batch
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
}

TEST(Validation, MisalignedElementPointer) {
  auto p = valid_params();
  p.v = reinterpret_cast<const char*>(p.v) + 1;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "v is not aligned to its 2-byte element size");
  p = valid_params();
  p.lse = reinterpret_cast<float*>(uintptr_t{0x50000002});
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "lse is not 4-byte aligned");
}

TEST(Validation, OffsetOverflow) {
  auto p = valid_params(3);
  p.q_batch_stride = INT64_MAX / 2;  // 2 * stride + the rest of the offset passes INT64_MAX
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "q strides overflow");
}

}  // namespace

// FP8 inputs: the descales and o_dtype (evosdpa.h), refused field by field with the field named.
namespace fp8 {

evosdpa_params_t valid_fp8(int64_t b = 2, int64_t h = 8, int64_t lq = 512, int64_t lk = 512) {
  auto p = valid_params(b, h, lq, lk);
  p.dtype = EVOSDPA_DTYPE_FLOAT8_E4M3;
  p.q_descale = reinterpret_cast<const float*>(uintptr_t{0x50000000});
  p.k_descale = reinterpret_cast<const float*>(uintptr_t{0x50000100});
  p.v_descale = reinterpret_cast<const float*>(uintptr_t{0x50000200});
  return p;
}

TEST(ValidationFp8, AcceptsPerTensorAndPerHeadDescalesAndBothOutputTypes) {
  auto p = valid_fp8();
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
  p.o_dtype = EVOSDPA_DTYPE_BFLOAT16;
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
  p.heads_kv = 2;
  evosdpa_params_set_bshd_strides(&p);
  p.descale_batch_stride = 2;  // [batch, heads_kv]
  p.descale_head_stride = 1;
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
}

TEST(ValidationFp8, EveryDescaleIsRequired) {
  const char* names[] = {"q_descale", "k_descale", "v_descale"};
  for (int which = 0; which < 3; ++which) {
    auto p = valid_fp8();
    const float** fields[] = {&p.q_descale, &p.k_descale, &p.v_descale};
    *fields[which] = nullptr;
    expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(names[which]) + " is a null pointer");
    *fields[which] = reinterpret_cast<const float*>(uintptr_t{0x50000402});
    expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(names[which]) + " is not 4-byte aligned");
  }
}

TEST(ValidationFp8, OutputTypeAndStrides) {
  auto p = valid_fp8();
  p.o_dtype = EVOSDPA_DTYPE_FLOAT8_E4M3;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "o_dtype 2 is not fp16 (0) or bf16 (1)");
  p.o_dtype = static_cast<evosdpa_dtype_t>(5);
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "o_dtype 5");
  p = valid_fp8();
  p.descale_head_stride = -1;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "descale strides are negative");
  p = valid_fp8();
  p.descale_batch_stride = INT64_MAX / 2;
  p.descale_head_stride = INT64_MAX / 2;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "descale strides overflow");
}

TEST(ValidationFp8, SixteenBitInputsRefuseFp8Fields) {
  auto p = valid_params();
  p.k_descale = reinterpret_cast<const float*>(uintptr_t{0x50000000});
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "k_descale is set but the inputs are fp16");
  p = valid_params();
  p.descale_head_stride = 1;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "descale strides are set but the inputs are fp16");
  p = valid_params();
  p.o_dtype = EVOSDPA_DTYPE_BFLOAT16;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "o_dtype 1 is for FP8 inputs");
  p.dtype = EVOSDPA_DTYPE_BFLOAT16;  // the inputs' own dtype is accepted
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
}

TEST(ValidationFp8, ElementSizesAndAliasing) {
  // Inputs are 1-byte aligned; O is 2-byte (its o_dtype).
  auto p = valid_fp8();
  p.q = reinterpret_cast<const void*>(uintptr_t{0x10000001});
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
  p = valid_fp8();
  p.o = reinterpret_cast<void*>(uintptr_t{0x40000001});
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "o is not aligned to its 2-byte element size");
  // O spans 2 bytes per element: its end reaches a descale placed right after 1-byte-sized O.
  p = valid_fp8(1, 1, 16, 16);
  const int64_t o_elems = 16 * 64;
  p.q_descale = reinterpret_cast<const float*>(uintptr_t{0x40000000} + o_elems);  // inside O's 2-byte span
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "overlaps input q_descale");
  p.q_descale = reinterpret_cast<const float*>(uintptr_t{0x40000000} + 2 * o_elems);  // just past it
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
  // A per-head descale's whole [batch, heads_kv] span counts.
  p = valid_fp8(2, 8, 16, 16);
  p.descale_batch_stride = 8;
  p.descale_head_stride = 1;
  p.lse = reinterpret_cast<float*>(uintptr_t{0x50000200} + 4 * 15);  // v_descale's last float
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "lse (bytes");
  p.lse = reinterpret_cast<float*>(uintptr_t{0x50000200} + 4 * 16);
  EXPECT_TRUE(validate_params(p).ok()) << validate_params(p).message;
}

}  // namespace fp8
