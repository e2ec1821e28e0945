#include "genome.hpp"

#include <algorithm>

namespace evosdpa::tune {

std::string GenomeSpace::check(const Genome& g) const {
  if (g.size() != levers.size())
    return "genome has " + std::to_string(g.size()) + " values for " + std::to_string(levers.size()) + " levers";
  for (size_t i = 0; i < levers.size(); ++i) {
    const auto& v = levers[i].values;
    if (std::find(v.begin(), v.end(), g[i]) == v.end())
      return levers[i].name + "=" + std::to_string(g[i]) + " is not a legal value";
  }
  return invalid_reason ? invalid_reason(g) : std::string();
}

std::string GenomeSpace::describe(const Genome& g) const {
  std::string out;
  for (size_t i = 0; i < levers.size() && i < g.size(); ++i)
    out += (i ? " " : "") + levers[i].name + "=" + std::to_string(g[i]);
  return out;
}

int GenomeSpace::lever_index(const std::string& name) const {
  for (size_t i = 0; i < levers.size(); ++i)
    if (levers[i].name == name) return static_cast<int>(i);
  return -1;
}

}  // namespace evosdpa::tune
