#include "bench_report.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace evosdpa::bench {

using nlohmann::json;

const char* causal_name(evosdpa_causal_t c) {
  return c == EVOSDPA_CAUSAL_NONE ? "none" : c == EVOSDPA_CAUSAL_TOP_LEFT ? "top-left" : "bottom-right";
}

std::string ResultRow::case_label() const {
  if (pass == Pass::Fwd) return shape.label();
  return shape.label() + " " + pass_label(pass) + " " + bwd_mode_label(bwd_mode);
}

std::string ResultRow::key() const { return case_label() + " | " + (ran.empty() || ran == "-" ? kernel : ran); }

std::string to_json(const Report& r) {
  json j;
  j["gpu"] = r.gpu;
  j["compute_capability"] = r.compute_capability;
  j["sm_count"] = r.sm_count;
  j["clock_mhz"] = r.clock_mhz;
  j["memory_clock_mhz"] = r.memory_clock_mhz;
  j["l2_bytes"] = r.l2_bytes;
  j["driver_version"] = r.driver_version;
  j["runtime_version"] = r.runtime_version;
  j["git_commit"] = r.git_commit;
  j["mode"] = {{"graph", r.graph}, {"cold_l2", r.cold_l2}, {"warmup", r.warmup}, {"iters", r.iters}};
  j["results"] = json::array();
  for (const auto& x : r.results) {
    const BenchShape& s = x.shape;
    json row = {{"batch", s.batch},
                {"heads", s.heads},
                {"seqlen_q", s.seqlen_q},
                {"seqlen_k", s.seqlen_k},
                {"head_dim", s.head_dim},
                {"dtype", dtype_label(s.dtype)},
                {"causal", causal_name(s.causal)},
                {"kernel", x.kernel},
                {"ran", x.ran},
                {"ok", x.ok},
                {"error", x.error},
                {"verify", x.verify},
                {"max_err", x.max_err},
                {"tol", x.tol},
                {"us_median", x.us.median},
                {"us_p90", x.us.p90},
                {"us_mean", x.us.mean},
                {"us_std", x.us.stddev},
                {"us_min", x.us.min},
                {"us_max", x.us.max},
                {"runs", x.us.count},
                {"rse", x.rse},
                {"tflops", x.tflops},
                {"gbps", x.gbps},
                {"pass", pass_label(x.pass)}};
    if (x.pass != Pass::Fwd) row["bwd_mode"] = bwd_mode_label(x.bwd_mode);
    j["results"].push_back(row);
  }
  return j.dump(1);
}

Report report_from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("results") || !j["results"].is_array())
    throw std::runtime_error("not an evosdpa-bench report: no \"results\" array");
  Report r;
  try {
    r.gpu = j.value("gpu", "");
    r.compute_capability = j.value("compute_capability", "");
    r.sm_count = j.value("sm_count", 0);
    r.clock_mhz = j.value("clock_mhz", 0);
    r.memory_clock_mhz = j.value("memory_clock_mhz", 0);
    r.l2_bytes = j.value("l2_bytes", 0LL);
    r.driver_version = j.value("driver_version", 0);
    r.runtime_version = j.value("runtime_version", 0);
    r.git_commit = j.value("git_commit", "");
    if (j.contains("mode")) {
      const json& m = j["mode"];
      r.graph = m.value("graph", false);
      r.cold_l2 = m.value("cold_l2", false);
      r.warmup = m.value("warmup", 0);
      r.iters = m.value("iters", 0);
    }
    for (const json& x : j["results"]) {
      ResultRow row;
      BenchShape& s = row.shape;
      s.batch = x.at("batch").get<int64_t>();
      s.heads = x.at("heads").get<int64_t>();
      s.seqlen_q = x.at("seqlen_q").get<int64_t>();
      s.seqlen_k = x.at("seqlen_k").get<int64_t>();
      s.head_dim = x.at("head_dim").get<int64_t>();
      s.dtype = dtype_of_label(x.at("dtype").get<std::string>()).value_or(EVOSDPA_DTYPE_FLOAT16);
      const std::string c = x.at("causal").get<std::string>();
      s.causal = c == "none" ? EVOSDPA_CAUSAL_NONE : c == "top-left" ? EVOSDPA_CAUSAL_TOP_LEFT : EVOSDPA_CAUSAL_BOTTOM_RIGHT;
      // Reports from before passes existed are forwards.
      const std::string pass = x.value("pass", "fwd");
      const auto p = pass_of_label(pass);
      if (!p) throw std::runtime_error("malformed result row: unknown pass '" + pass + "'");
      row.pass = *p;
      const std::string mode = x.value("bwd_mode", "deterministic");
      const auto m = bwd_mode_of_label(mode);
      if (!m) throw std::runtime_error("malformed result row: unknown bwd_mode '" + mode + "'");
      row.bwd_mode = *m;
      row.kernel = x.value("kernel", "");
      row.ran = x.value("ran", "");
      row.ok = x.value("ok", false);
      row.error = x.value("error", "");
      row.verify = x.value("verify", "");
      row.max_err = x.value("max_err", 0.0);
      row.tol = x.value("tol", 0.0);
      row.us.median = x.value("us_median", 0.0);
      row.us.p90 = x.value("us_p90", 0.0);
      row.us.mean = x.value("us_mean", 0.0);
      row.us.stddev = x.value("us_std", 0.0);
      row.us.min = x.value("us_min", 0.0);
      row.us.max = x.value("us_max", 0.0);
      row.us.count = x.value("runs", 0);
      row.rse = x.value("rse", 0.0);
      row.tflops = x.value("tflops", 0.0);
      row.gbps = x.value("gbps", 0.0);
      r.results.push_back(row);
    }
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("malformed result row: ") + e.what());
  }
  return r;
}

}  // namespace evosdpa::bench
