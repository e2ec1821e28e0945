#include "compare.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace evosdpa::bench {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Faster: return "faster";
    case Verdict::Slower: return "SLOWER";
    case Verdict::Same: return "same (within noise)";
    case Verdict::Failed: return "FAILED";
    case Verdict::New: return "new";
    case Verdict::Missing: return "missing";
  }
  return "?";
}

namespace {
bool passed(const ResultRow& r) { return r.ok && r.verify.rfind("FAIL", 0) != 0 && r.us.median > 0; }
}  // namespace

Comparison compare(const Report& before, const Report& after, double threshold) {
  std::map<std::string, const ResultRow*> old_rows;
  for (const auto& r : before.results) old_rows[r.key()] = &r;
  Comparison c;
  std::map<std::string, bool> seen;
  for (const auto& a : after.results) {
    CompareRow row;
    row.key = a.key();
    row.after_us = a.us.median;
    seen[row.key] = true;
    const auto it = old_rows.find(row.key);
    if (it == old_rows.end()) {
      row.verdict = passed(a) ? Verdict::New : Verdict::Failed;
    } else {
      const ResultRow& b = *it->second;
      row.before_us = b.us.median;
      if (!passed(a) && passed(b)) {
        row.verdict = Verdict::Failed;
      } else if (!passed(a) || !passed(b)) {
        row.verdict = passed(a) ? Verdict::New : Verdict::Failed;
      } else {
        row.speedup = b.us.median / a.us.median;
        row.threshold = std::max(threshold, 2.0 * std::sqrt(a.rse * a.rse + b.rse * b.rse));
        if (row.speedup > 1.0 + row.threshold) row.verdict = Verdict::Faster;
        else if (row.speedup < 1.0 / (1.0 + row.threshold)) row.verdict = Verdict::Slower;
        else row.verdict = Verdict::Same;
      }
    }
    if (row.verdict == Verdict::Slower || row.verdict == Verdict::Failed) ++c.regressions;
    c.rows.push_back(row);
  }
  for (const auto& b : before.results) {
    if (seen.count(b.key())) continue;
    CompareRow row;
    row.key = b.key();
    row.before_us = b.us.median;
    row.verdict = Verdict::Missing;
    c.rows.push_back(row);
  }
  return c;
}

std::string markdown(const Comparison& c, const Report& before, const Report& after) {
  std::ostringstream s;
  s << "before: " << before.git_commit << " on " << before.gpu << "; after: " << after.git_commit << " on "
    << after.gpu << "\n\n";
  if (before.gpu != after.gpu) s << "**warning: the two reports come from different GPUs**\n\n";
  // The key is "shape | kernel", so it fills the first two columns.
  s << "| shape | kernel | before µs | after µs | speedup | noise threshold | verdict |\n"
       "|---|---|---:|---:|---:|---:|---|\n";
  char buf[64];
  for (const auto& r : c.rows) {
    auto num = [&](double v, const char* fmt) {
      if (v <= 0) return std::string("-");
      std::snprintf(buf, sizeof buf, fmt, v);
      return std::string(buf);
    };
    s << "| " << r.key << " | " << num(r.before_us, "%.2f") << " | " << num(r.after_us, "%.2f") << " | "
      << num(r.speedup, "%.3fx") << " | " << num(r.threshold * 100, "%.1f%%") << " | " << verdict_name(r.verdict)
      << " |\n";
  }
  s << "\n" << c.regressions << " regression(s)\n";
  return s.str();
}

}  // namespace evosdpa::bench
