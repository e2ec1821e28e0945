// evosdpa-bench's option parsing, named grids, FLOP counts and statistics.
#include <gtest/gtest.h>

#include <cmath>

#include "bench_options.hpp"

using namespace evosdpa::bench;

namespace {

std::optional<Options> parse(std::vector<std::string> args, std::string* err = nullptr) {
  std::string e;
  bool help = false;
  auto o = parse_options(args, e, help);
  if (err) *err = e;
  return o;
}

TEST(BenchOptions, DefaultIsTheSmallAcceptanceShape) {
  const auto o = parse({});
  ASSERT_TRUE(o);
  ASSERT_EQ(o->shapes.size(), 1u);
  const auto& s = o->shapes[0];
  EXPECT_EQ(s.batch, 1);
  EXPECT_EQ(s.heads, 8);
  EXPECT_EQ(s.seqlen_q, 512);
  EXPECT_EQ(s.seqlen_k, 512);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.dtype, EVOSDPA_DTYPE_FLOAT16);
  EXPECT_EQ(s.causal, EVOSDPA_CAUSAL_NONE);
  EXPECT_EQ(o->kernels, std::vector<std::string>{"auto"});
  EXPECT_TRUE(o->verify);
  EXPECT_EQ(o->pass, Pass::Fwd);
  EXPECT_EQ(o->bwd_mode, EVOSDPA_BACKWARD_DETERMINISTIC);
}

TEST(BenchOptions, ShapeFlags) {
  const auto o = parse({"--batch", "2", "--heads", "4", "--seqlen-q", "100", "--seqlen-k", "300", "--head-dim", "128",
                        "--dtype", "both", "--causal", "bottom-right", "--kernel", "mma_sm80,reference", "--graph",
                        "--cold-l2", "--iters", "7", "--warmup", "0", "--json", "x.json"});
  ASSERT_TRUE(o);
  ASSERT_EQ(o->shapes.size(), 2u);
  EXPECT_EQ(o->shapes[1].dtype, EVOSDPA_DTYPE_BFLOAT16);
  EXPECT_EQ(o->shapes[0].seqlen_q, 100);
  EXPECT_EQ(o->shapes[0].seqlen_k, 300);
  EXPECT_EQ(o->shapes[0].causal, EVOSDPA_CAUSAL_BOTTOM_RIGHT);
  EXPECT_EQ(o->kernels, (std::vector<std::string>{"mma_sm80", "reference"}));
  EXPECT_TRUE(o->graph && o->cold_l2);
  EXPECT_EQ(o->iters, 7);
  EXPECT_EQ(o->warmup, 0);
  EXPECT_EQ(o->json_path, "x.json");
  const auto n = parse({"--target-rse", "0.01", "--max-iters", "500", "--max-seconds", "1.5"});
  ASSERT_TRUE(n);
  EXPECT_DOUBLE_EQ(n->target_rse, 0.01);
  EXPECT_EQ(n->max_iters, 500);
  EXPECT_DOUBLE_EQ(n->max_seconds, 1.5);
}

TEST(BenchOptions, Errors) {
  std::string e;
  EXPECT_FALSE(parse({"--batch"}, &e));
  EXPECT_NE(e.find("needs a value"), std::string::npos);
  EXPECT_FALSE(parse({"--batch", "x"}, &e));
  EXPECT_NE(e.find("not an integer"), std::string::npos);
  EXPECT_FALSE(parse({"--iters", "0"}, &e));
  EXPECT_FALSE(parse({"--dtype", "fp32"}, &e));
  EXPECT_NE(e.find("is not fp16, bf16, both or fp8"), std::string::npos) << e;
  EXPECT_FALSE(parse({"--causal", "yes"}, &e));
  EXPECT_FALSE(parse({"--grid", "huge"}, &e));
  EXPECT_FALSE(parse({"--target-rse", "-1"}, &e));
  EXPECT_FALSE(parse({"--max-seconds", "x"}, &e));
  EXPECT_FALSE(parse({"--frobnicate"}, &e));
  EXPECT_NE(e.find("unknown option"), std::string::npos);
  bool help = false;
  EXPECT_FALSE(parse_options({"--help"}, e, help));
  EXPECT_TRUE(help);
  EXPECT_NE(e.find("usage"), std::string::npos);
}

TEST(BenchOptions, NamedGrids) {
  const auto acc = named_grid("acceptance", EVOSDPA_DTYPE_FLOAT16);
  ASSERT_TRUE(acc);
  EXPECT_EQ(acc->size(), 5u);
  const auto fa3 = named_grid("fa3", EVOSDPA_DTYPE_BFLOAT16);
  ASSERT_TRUE(fa3);
  EXPECT_EQ(fa3->size(), 2u * 2u * 6u);
  for (const auto& s : *fa3) {
    EXPECT_EQ(s.batch * s.seqlen_q, 16384);
    EXPECT_EQ(s.heads * s.head_dim, 2048);
    EXPECT_EQ(s.dtype, EVOSDPA_DTYPE_BFLOAT16);
  }
  const auto o = parse({"--grid", "acceptance", "--dtype", "both"});
  ASSERT_TRUE(o);
  ASSERT_EQ(o->shapes.size(), 10u);
  EXPECT_EQ(o->shapes[0].batch, 1);  // the grid's own shapes, not dangling copies
  EXPECT_EQ(o->shapes[0].heads, 8);
  EXPECT_EQ(o->shapes[9].head_dim, 128);
  EXPECT_EQ(o->shapes[9].dtype, EVOSDPA_DTYPE_BFLOAT16);
}

TEST(BenchOptions, FlopCounts) {
  BenchShape s;
  s.batch = 2, s.heads = 3, s.seqlen_q = s.seqlen_k = 4, s.head_dim = 8;
  EXPECT_DOUBLE_EQ(s.flops(), 4.0 * 2 * 3 * 16 * 8);
  s.causal = EVOSDPA_CAUSAL_TOP_LEFT;  // 1+2+3+4 visible pairs
  EXPECT_DOUBLE_EQ(s.flops(), 4.0 * 2 * 3 * 10 * 8);
  s.seqlen_q = 2;  // bottom-right: rows see 3 and 4 keys
  s.causal = EVOSDPA_CAUSAL_BOTTOM_RIGHT;
  EXPECT_DOUBLE_EQ(s.flops(), 4.0 * 2 * 3 * 7 * 8);
  EXPECT_DOUBLE_EQ(s.bytes(), 2.0 * 2 * 3 * 8 * (2 * 2 + 2 * 4));
  s.dtype = EVOSDPA_DTYPE_FLOAT8_E4M3;  // 1-byte Q, K, V; a 2-byte O
  EXPECT_DOUBLE_EQ(s.bytes(), 2.0 * 3 * 8 * (1.0 * (2 + 2 * 4) + 2.0 * 2));
  EXPECT_DOUBLE_EQ(s.flops(), 4.0 * 2 * 3 * 7 * 8);  // counted as for fp16
}

TEST(BenchOptions, Passes) {
  std::string e;
  const auto b = parse({"--pass", "bwd", "--dtype", "both"}, &e);
  ASSERT_TRUE(b) << e;
  EXPECT_EQ(b->pass, Pass::Bwd);
  EXPECT_EQ(b->bwd_mode, EVOSDPA_BACKWARD_DETERMINISTIC);  // the library's default
  EXPECT_EQ(b->shapes.size(), 2u);
  const auto f = parse({"--bwd-mode", "fast", "--pass", "fwdbwd"}, &e);  // in either order
  ASSERT_TRUE(f) << e;
  EXPECT_EQ(f->pass, Pass::FwdBwd);
  EXPECT_EQ(f->bwd_mode, EVOSDPA_BACKWARD_FAST);
  const auto d = parse({"--pass", "fwd"}, &e);
  ASSERT_TRUE(d) << e;
  EXPECT_EQ(d->pass, Pass::Fwd);
  for (Pass p : {Pass::Fwd, Pass::Bwd, Pass::FwdBwd}) EXPECT_EQ(pass_of_label(pass_label(p)), p);
  for (auto m : {EVOSDPA_BACKWARD_DETERMINISTIC, EVOSDPA_BACKWARD_FAST})
    EXPECT_EQ(bwd_mode_of_label(bwd_mode_label(m)), m);
}

TEST(BenchOptions, PassErrors) {
  std::string e;
  EXPECT_FALSE(parse({"--pass", "backward"}, &e));
  EXPECT_NE(e.find("is not fwd, bwd or fwdbwd"), std::string::npos) << e;
  EXPECT_FALSE(parse({"--pass", "bwd", "--bwd-mode", "atomic"}, &e));
  EXPECT_NE(e.find("is not deterministic or fast"), std::string::npos) << e;
  EXPECT_FALSE(parse({"--bwd-mode", "fast"}, &e));  // a forward has no backward mode to apply it to
  EXPECT_NE(e.find("needs --pass bwd or fwdbwd"), std::string::npos) << e;
  EXPECT_FALSE(parse({"--pass", "bwd", "--dtype", "fp8"}, &e));
  EXPECT_NE(e.find("FP8 inputs have no backward pass"), std::string::npos) << e;
  EXPECT_FALSE(parse({"--grid", "fa3", "--dtype", "fp8", "--pass", "fwdbwd"}, &e));
  EXPECT_TRUE(parse({"--grid", "fa3", "--dtype", "fp8", "--pass", "fwd"}, &e)) << e;
}

TEST(BenchOptions, PassFlopsAndBytes) {
  BenchShape s;
  s.batch = 2, s.heads = 3, s.seqlen_q = 4, s.seqlen_k = 6, s.head_dim = 8;
  EXPECT_DOUBLE_EQ(flop_factor(Pass::Fwd), 1.0);
  EXPECT_DOUBLE_EQ(flop_factor(Pass::Bwd), 2.5);  // FlashAttention's count: 5 matrix products against 2
  EXPECT_DOUBLE_EQ(flop_factor(Pass::FwdBwd), 3.5);
  for (auto c : {EVOSDPA_CAUSAL_NONE, EVOSDPA_CAUSAL_TOP_LEFT, EVOSDPA_CAUSAL_BOTTOM_RIGHT}) {
    s.causal = c;
    EXPECT_DOUBLE_EQ(s.flops(Pass::Fwd), s.flops());
    EXPECT_DOUBLE_EQ(s.flops(Pass::Bwd), 2.5 * s.flops());  // masked pairs left out as in the forward
    EXPECT_DOUBLE_EQ(s.flops(Pass::FwdBwd), 3.5 * s.flops());
  }
  s.causal = EVOSDPA_CAUSAL_TOP_LEFT;  // rows see 1, 2, 3, 4 keys
  EXPECT_DOUBLE_EQ(s.flops(Pass::Bwd), 2.5 * 4.0 * 2 * 3 * 10 * 8);
  // Backward: Q, O, dO, dQ (Lq rows) and K, V, dK, dV (Lk rows) in 16 bits, and the float32 lse.
  const double backward = 2.0 * 3 * (2.0 * 8 * 4 * (4 + 6) + 4.0 * 4);
  EXPECT_DOUBLE_EQ(s.bytes(Pass::Fwd), s.bytes());
  EXPECT_DOUBLE_EQ(s.bytes(Pass::Bwd), backward);
  EXPECT_DOUBLE_EQ(s.bytes(Pass::FwdBwd), s.bytes() + backward);
}

TEST(BenchOptions, Fp8Inputs) {
  std::string e;
  const auto o = parse({"--dtype", "fp8", "--head-dim", "128"}, &e);
  ASSERT_TRUE(o) << e;
  ASSERT_EQ(o->shapes.size(), 1u);
  EXPECT_EQ(o->shapes[0].dtype, EVOSDPA_DTYPE_FLOAT8_E4M3);
  EXPECT_NE(o->shapes[0].label().find(" fp8 "), std::string::npos) << o->shapes[0].label();
  const auto g = parse({"--grid", "fa3", "--dtype", "fp8"}, &e);
  ASSERT_TRUE(g) << e;
  for (const auto& s : g->shapes) EXPECT_EQ(s.dtype, EVOSDPA_DTYPE_FLOAT8_E4M3);
  EXPECT_EQ(dtype_of_label("fp8"), EVOSDPA_DTYPE_FLOAT8_E4M3);
  EXPECT_STREQ(dtype_label(EVOSDPA_DTYPE_FLOAT8_E4M3), "fp8");
}

TEST(BenchStats, Summaries) {
  const Stats s = summarize({5, 1, 3, 2, 4});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_NEAR(s.stddev, std::sqrt(2.5), 1e-12);
  EXPECT_DOUBLE_EQ(s.p90, 4.6);
  EXPECT_EQ(summarize({}).count, 0);
}

}  // namespace
