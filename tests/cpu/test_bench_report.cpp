// The benchmark report's JSON round trip and evosdpa-compare's verdicts.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "compare.hpp"

using namespace evosdpa::bench;

namespace {

ResultRow row(int64_t L, double median_us, double rse = 0.001, evosdpa_causal_t causal = EVOSDPA_CAUSAL_NONE) {
  ResultRow r;
  r.shape.batch = 2;
  r.shape.heads = 8;
  r.shape.seqlen_q = r.shape.seqlen_k = L;
  r.shape.head_dim = 64;
  r.shape.causal = causal;
  r.kernel = "auto";
  r.ran = "mma_sm80";
  r.verify = "PASS err 1e-04 tol 2e-03";
  r.us.median = median_us;
  r.us.count = 100;
  r.rse = rse;
  return r;
}

Report report(std::vector<ResultRow> rows, const std::string& commit = "abc") {
  Report r;
  r.gpu = "NVIDIA H100 80GB HBM3";
  r.git_commit = commit;
  r.results = std::move(rows);
  return r;
}

TEST(BenchReport, JsonRoundTrip) {
  Report r = report({row(512, 15.5), row(2048, 69.25, 0.002, EVOSDPA_CAUSAL_BOTTOM_RIGHT)});
  r.results[1].shape.dtype = EVOSDPA_DTYPE_BFLOAT16;
  r.results[0].shape.dtype = EVOSDPA_DTYPE_FLOAT8_E4M3;
  r.results[1].shape.seqlen_k = 1000;
  r.results[1].ok = false;
  r.results[1].error = "a \"quoted\" message";
  r.compute_capability = "9.0";
  r.sm_count = 132;
  r.l2_bytes = 52428800;
  r.graph = true;
  r.iters = 100;
  const Report back = report_from_json(to_json(r));
  EXPECT_EQ(back.gpu, r.gpu);
  EXPECT_EQ(back.compute_capability, "9.0");
  EXPECT_EQ(back.sm_count, 132);
  EXPECT_EQ(back.l2_bytes, 52428800);
  EXPECT_TRUE(back.graph);
  EXPECT_EQ(back.iters, 100);
  ASSERT_EQ(back.results.size(), 2u);
  EXPECT_EQ(back.results[0].key(), r.results[0].key());
  EXPECT_EQ(back.results[1].key(), r.results[1].key());
  EXPECT_EQ(back.results[1].shape.dtype, EVOSDPA_DTYPE_BFLOAT16);
  EXPECT_EQ(back.results[0].shape.dtype, EVOSDPA_DTYPE_FLOAT8_E4M3);
  EXPECT_EQ(back.results[1].shape.causal, EVOSDPA_CAUSAL_BOTTOM_RIGHT);
  EXPECT_EQ(back.results[1].shape.seqlen_k, 1000);
  EXPECT_FALSE(back.results[1].ok);
  EXPECT_EQ(back.results[1].error, "a \"quoted\" message");
  EXPECT_DOUBLE_EQ(back.results[1].us.median, 69.25);
  EXPECT_DOUBLE_EQ(back.results[1].rse, 0.002);
}

TEST(BenchReport, PassesRoundTripAndKeepForwardKeys) {
  ResultRow fwd = row(512, 10);
  ResultRow bwd = row(512, 25);
  bwd.pass = Pass::Bwd;
  bwd.bwd_mode = EVOSDPA_BACKWARD_FAST;
  ResultRow both = row(512, 35);
  both.pass = Pass::FwdBwd;
  both.ran = "wgmma_sm90+mma_sm80";
  // A forward's label and key are what they were before passes existed, so older reports still compare.
  EXPECT_EQ(fwd.case_label(), fwd.shape.label());
  EXPECT_EQ(fwd.key(), fwd.shape.label() + " | mma_sm80");
  EXPECT_EQ(bwd.case_label(), bwd.shape.label() + " bwd fast");
  EXPECT_EQ(both.key(), both.shape.label() + " fwdbwd deterministic | wgmma_sm90+mma_sm80");
  EXPECT_NE(fwd.key(), bwd.key());

  const std::string text = to_json(report({fwd, bwd, both}));
  EXPECT_NE(text.find("\"pass\": \"bwd\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"bwd_mode\": \"fast\""), std::string::npos) << text;
  const Report back = report_from_json(text);
  ASSERT_EQ(back.results.size(), 3u);
  EXPECT_EQ(back.results[0].pass, Pass::Fwd);
  EXPECT_EQ(back.results[1].pass, Pass::Bwd);
  EXPECT_EQ(back.results[1].bwd_mode, EVOSDPA_BACKWARD_FAST);
  EXPECT_EQ(back.results[2].pass, Pass::FwdBwd);
  EXPECT_EQ(back.results[2].bwd_mode, EVOSDPA_BACKWARD_DETERMINISTIC);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(back.results[i].key(), report({fwd, bwd, both}).results[i].key());

  // A forward and a backward of one shape are different cases to evosdpa-compare.
  const Comparison c = compare(report({fwd}), report({bwd}), 0.03);
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].verdict, Verdict::New);
  EXPECT_EQ(c.rows[1].verdict, Verdict::Missing);
}

TEST(BenchReport, ReportsWithoutPassesAreForwards) {
  const std::string shape =
      "\"batch\": 1, \"heads\": 8, \"seqlen_q\": 512, \"seqlen_k\": 512, \"head_dim\": 64, \"dtype\": \"fp16\", "
      "\"causal\": \"none\"";
  const Report r = report_from_json("{\"results\": [{" + shape + "}]}");
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].pass, Pass::Fwd);
  EXPECT_THROW(report_from_json("{\"results\": [{" + shape + ", \"pass\": \"sideways\"}]}"), std::runtime_error);
}

TEST(BenchReport, MalformedInputIsAnError) {
  EXPECT_THROW(report_from_json("not json"), std::runtime_error);
  EXPECT_THROW(report_from_json("{\"gpu\": \"x\"}"), std::runtime_error);
  EXPECT_THROW(report_from_json("{\"results\": [{\"batch\": 1}]}"), std::runtime_error);
}

TEST(Compare, VerdictsRespectTheNoiseThreshold) {
  const Report before = report({row(512, 100), row(1024, 100), row(2048, 100), row(4096, 100)});
  const Report after = report({row(512, 98), row(1024, 90), row(2048, 110), row(4096, 102)});
  const Comparison c = compare(before, after, 0.03);
  ASSERT_EQ(c.rows.size(), 4u);
  EXPECT_EQ(c.rows[0].verdict, Verdict::Same);  // a 2% wobble is not a win
  EXPECT_EQ(c.rows[1].verdict, Verdict::Faster);
  EXPECT_NEAR(c.rows[1].speedup, 100.0 / 90.0, 1e-12);
  EXPECT_EQ(c.rows[2].verdict, Verdict::Slower);
  EXPECT_EQ(c.rows[3].verdict, Verdict::Same);
  EXPECT_EQ(c.regressions, 1);
  EXPECT_NE(markdown(c, before, after).find("SLOWER"), std::string::npos);
}

TEST(Compare, NoisyMeasurementsWidenTheThreshold) {
  // 10% slower, but each run has a 5% relative standard error: 2 * sqrt(2) * 5% = 14% > 10%.
  const Comparison c = compare(report({row(512, 100, 0.05)}), report({row(512, 110, 0.05)}), 0.03);
  EXPECT_EQ(c.rows[0].verdict, Verdict::Same);
  EXPECT_NEAR(c.rows[0].threshold, 2 * std::sqrt(2 * 0.05 * 0.05), 1e-12);
  EXPECT_EQ(c.regressions, 0);
}

TEST(Compare, FailuresNewAndMissingCases) {
  ResultRow failed = row(1024, 50);
  failed.verify = "FAIL err 1e-01 tol 2e-03";
  const Report before = report({row(512, 100), row(1024, 100)});
  const Report after = report({failed, row(4096, 10)});
  const Comparison c = compare(before, after, 0.03);
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_EQ(c.rows[0].verdict, Verdict::Failed);   // faster but wrong: a regression
  EXPECT_EQ(c.rows[1].verdict, Verdict::New);
  EXPECT_EQ(c.rows[2].verdict, Verdict::Missing);  // L=512 ran before only
  EXPECT_EQ(c.regressions, 1);
}

}  // namespace
