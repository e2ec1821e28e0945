#include "kernels/cuda_archs.hpp"

#include <optional>
#include <vector>

namespace evosdpa::detail {
namespace {

struct Target {
  int major = 0, minor = 0;
  char suffix = '\0';  // 'a' (arch-specific), 'f' (family-specific) or none
  bool sass = true, ptx = true;
};

bool strip_suffix(std::string_view& s, std::string_view suffix) {
  if (s.size() < suffix.size() || s.substr(s.size() - suffix.size()) != suffix) return false;
  s.remove_suffix(suffix.size());
  return true;
}

std::optional<Target> parse_target(std::string_view s) {
  Target t;
  if (strip_suffix(s, "-real"))
    t.ptx = false;
  else if (strip_suffix(s, "-virtual"))
    t.sass = false;
  if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) {
    t.suffix = s.back();
    s.remove_suffix(1);
  }
  // Two or three digits: compute capability X.Y is written XY ("80", "100", "120").
  if (s.size() < 2 || s.size() > 3 || s[0] == '0') return std::nullopt;
  int n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  t.major = n / 10;
  t.minor = n % 10;
  return t;
}

// nullopt when the list names no targets, or any entry is not one ("native", "all", "all-major", "OFF").
std::optional<std::vector<Target>> parse_targets(std::string_view list) {
  std::vector<Target> out;
  while (!list.empty()) {
    const size_t end = list.find_first_of(",; ");
    const std::string_view entry = list.substr(0, end);
    list = end == std::string_view::npos ? std::string_view{} : list.substr(end + 1);
    if (entry.empty()) continue;
    const std::optional<Target> t = parse_target(entry);
    if (!t) return std::nullopt;
    out.push_back(*t);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

bool sass_runs(const Target& t, int major, int minor) {
  if (major != t.major) return false;
  return t.suffix == 'a' ? minor == t.minor : minor >= t.minor;
}

bool ptx_runs(const Target& t, int major, int minor) {
  switch (t.suffix) {
    case 'a': return major == t.major && minor == t.minor;
    case 'f': return major == t.major && minor >= t.minor;
    default: return major > t.major || (major == t.major && minor >= t.minor);
  }
}

}  // namespace

ArchMatch cuda_archs_run_on(std::string_view archs, int cc_major, int cc_minor) {
  const std::optional<std::vector<Target>> targets = parse_targets(archs);
  if (!targets) return ArchMatch::kUnknown;
  for (const Target& t : *targets)
    if ((t.sass && sass_runs(t, cc_major, cc_minor)) || (t.ptx && ptx_runs(t, cc_major, cc_minor)))
      return ArchMatch::kRuns;
  return ArchMatch::kNoCode;
}

int cuda_archs_code_level(std::string_view archs, int cc_major, int cc_minor) {
  const std::optional<std::vector<Target>> targets = parse_targets(archs);
  if (!targets) return -1;
  int sass = -1, ptx = -1;
  for (const Target& t : *targets) {
    const int level = 10 * t.major + t.minor;
    if (t.sass && sass_runs(t, cc_major, cc_minor) && level > sass) sass = level;
    if (t.ptx && ptx_runs(t, cc_major, cc_minor) && level > ptx) ptx = level;
  }
  return sass >= 0 ? sass : ptx;
}

std::string describe_cuda_archs(std::string_view archs) {
  const std::optional<std::vector<Target>> targets = parse_targets(archs);
  if (!targets) return "CMAKE_CUDA_ARCHITECTURES=" + std::string(archs);
  std::string out;
  for (const Target& t : *targets) {
    std::string xy = std::to_string(t.major * 10 + t.minor);
    if (t.suffix != '\0') xy += t.suffix;
    if (!out.empty()) out += ", ";
    out += t.sass && t.ptx ? "sm_" + xy : t.sass ? "sm_" + xy + " SASS" : "compute_" + xy + " PTX";
  }
  return out;
}

}  // namespace evosdpa::detail
