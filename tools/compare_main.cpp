// evosdpa-compare: two evosdpa-bench --json reports in, a Markdown table out (before, after, speedup,
// verdict). Exit status 1 when any case got slower beyond the noise threshold or stopped passing, so it
// can gate a change; 2 on bad arguments or unreadable input.
//   evosdpa-compare BEFORE.json AFTER.json [--threshold 0.03] [--out FILE]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "compare.hpp"

namespace {

evosdpa::bench::Report read_report(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return evosdpa::bench::report_from_json(ss.str());
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string files[2], out;
  int nfiles = 0;
  double threshold = 0.03;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threshold" && i + 1 < argc) {
      char* end = nullptr;
      threshold = std::strtod(argv[++i], &end);
      if (*end != '\0' || threshold < 0 || threshold > 1) {
        std::fprintf(stderr, "evosdpa-compare: --threshold takes a fraction in [0, 1], e.g. 0.03\n");
        return 2;
      }
    } else if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (!a.empty() && a[0] != '-' && nfiles < 2) {
      files[nfiles++] = a;
    } else {
      nfiles = -1;
      break;
    }
  }
  if (nfiles != 2) {
    std::fprintf(stderr, "usage: evosdpa-compare BEFORE.json AFTER.json [--threshold 0.03] [--out FILE]\n");
    return 2;
  }
  try {
    const auto before = read_report(files[0]);
    const auto after = read_report(files[1]);
    const auto c = evosdpa::bench::compare(before, after, threshold);
    const std::string md = evosdpa::bench::markdown(c, before, after);
    std::cout << md;
    if (!out.empty()) std::ofstream(out) << md;
    return c.regressions > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "evosdpa-compare: %s\n", e.what());
    return 2;
  }
}
