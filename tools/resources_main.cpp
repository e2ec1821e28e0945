// evosdpa-resources: the resource report of every kernel in the build, from the captured ptxas output.
//   evosdpa-resources --logs DIR [--out TABLE_FILE] [--json JSON_FILE] [--report-only] [--objects OBJ...]
// Prints the table; exits 1 when the resource gate fails (spills, stack, shared memory over the limit),
// unless --report-only. --objects (last, the library's object files): logs of any other object are
// deleted and left out (see load_ptxas_logs). An arch with no known limits is checked against the most
// conservative known ones, with a warning in the report and on stderr.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "host/ptxas_report.hpp"

int main(int argc, char** argv) {
  std::string logs, out, json;
  bool report_only = false;
  bool have_objects = false;
  std::vector<std::string> objects;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--objects") {
      have_objects = true;
      while (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0) objects.emplace_back(argv[++i]);
    } else if (i + 1 < argc && a == "--logs") logs = argv[++i];
    else if (i + 1 < argc && a == "--out") out = argv[++i];
    else if (i + 1 < argc && a == "--json") json = argv[++i];
    else if (a == "--report-only") report_only = true;
    else {
      std::fprintf(stderr, "usage: evosdpa-resources --logs DIR [--out TABLE_FILE] [--json JSON_FILE] [--report-only] "
                           "[--objects OBJ...]\n");
      return 2;
    }
  }
  const auto kernels = evosdpa::host::load_ptxas_logs(logs, have_objects ? &objects : nullptr);
  if (kernels.empty()) {
    std::fprintf(stderr,
                 "evosdpa-resources: no ptxas output found in '%s' for the library's objects (logs are written "
                 "when a CUDA source is compiled: rebuild the library's objects, e.g. from a clean build dir)\n",
                 logs.c_str());
    return 1;
  }
  const std::string table = evosdpa::host::report_table(kernels);
  std::cout << table;
  if (!out.empty()) std::ofstream(out) << table;
  if (!json.empty()) std::ofstream(json) << evosdpa::host::report_json(kernels);
  for (const auto& w : evosdpa::host::report_warnings(kernels)) std::cerr << "resource report: " << w << "\n";
  const auto bad = evosdpa::host::gate_violations(kernels);
  for (const auto& v : bad) std::cerr << "resource gate: " << v << "\n";
  return bad.empty() || report_only ? 0 : 1;
}
