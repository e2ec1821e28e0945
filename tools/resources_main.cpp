// evosdpa-resources: the resource report of every kernel in the build, from the captured ptxas output.
//   evosdpa-resources --logs DIR [--out TABLE_FILE] [--json JSON_FILE] [--report-only]
// Prints the table; exits 1 when the resource gate fails (spills, stack, shared memory over the limit),
// unless --report-only.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "host/ptxas_report.hpp"

int main(int argc, char** argv) {
  std::string logs, out, json;
  bool report_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 < argc && a == "--logs") logs = argv[++i];
    else if (i + 1 < argc && a == "--out") out = argv[++i];
    else if (i + 1 < argc && a == "--json") json = argv[++i];
    else if (a == "--report-only") report_only = true;
    else {
      std::fprintf(stderr, "usage: evosdpa-resources --logs DIR [--out TABLE_FILE] [--json JSON_FILE] [--report-only]\n");
      return 2;
    }
  }
  const auto kernels = evosdpa::host::load_ptxas_logs(logs);
  if (kernels.empty()) {
    std::fprintf(stderr, "evosdpa-resources: no ptxas output found in '%s'\n", logs.c_str());
    return 1;
  }
  const std::string table = evosdpa::host::report_table(kernels);
  std::cout << table;
  if (!out.empty()) std::ofstream(out) << table;
  if (!json.empty()) std::ofstream(json) << evosdpa::host::report_json(kernels);
  const auto bad = evosdpa::host::gate_violations(kernels);
  for (const auto& v : bad) std::cerr << "resource gate: " << v << "\n";
  return bad.empty() || report_only ? 0 : 1;
}
