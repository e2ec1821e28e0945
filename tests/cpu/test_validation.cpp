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

TEST(Validation, NonFiniteScale) {
  auto p = valid_params();
  p.softmax_scale = NAN;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "softmax_scale");
  p.softmax_scale = INFINITY;
  expect_error(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "softmax_scale");
  p.softmax_scale = -0.5f;  // unusual but well defined
  EXPECT_TRUE(validate_params(p).ok());
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
