// Before/after comparison of two benchmark reports, with a noise threshold so that a wobble is not
// called a win or a loss.
#pragma once

#include <string>
#include <vector>

#include "bench_report.hpp"

namespace evosdpa::bench {

enum class Verdict { Faster, Slower, Same, Failed, New, Missing };
const char* verdict_name(Verdict v);

struct CompareRow {
  std::string key;
  double before_us = 0, after_us = 0;
  double speedup = 0;    // before / after: above 1 is faster
  double threshold = 0;  // the relative change this row needed to count as a change
  Verdict verdict = Verdict::Same;
};

struct Comparison {
  std::vector<CompareRow> rows;
  int regressions = 0;  // rows Slower or Failed
};

// A row counts as faster or slower only when the change exceeds max(threshold, 2 * combined relative
// standard error of the two measurements). A row that ran before and fails now (error or failed
// verification) is a regression; rows only in one report are listed as New or Missing.
Comparison compare(const Report& before, const Report& after, double threshold);

std::string markdown(const Comparison& c, const Report& before, const Report& after);

}  // namespace evosdpa::bench
