// The genome of evosdpa-tune: a kernel family's levers (each with its legal values) and the rule that
// says which combinations the family can build. A genome is one value per lever; the search
// (search.hpp) only ever proposes genomes the family's rule accepts.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace evosdpa::tune {

struct Lever {
  std::string name;
  std::vector<int> values;  // legal values, in order (a flag is {0, 1})
};

using Genome = std::vector<int>;  // genome[i]: the value of lever i (one of levers[i].values)

struct GenomeSpace {
  std::string family;  // the kernel family and fixed parameters it was made for, e.g. "mma_sm80/d64"
  std::vector<Lever> levers;
  // Empty when the family can build the genome; otherwise why not ("smem 110592 > 101376 bytes").
  std::function<std::string(const Genome&)> invalid_reason;

  // "" when every value is legal for its lever and the family's rule accepts the genome.
  std::string check(const Genome& g) const;
  // "warps=4 m_tiles=2 block_n=64".
  std::string describe(const Genome& g) const;
  // The index of lever `name`; -1 if there is none.
  int lever_index(const std::string& name) const;
};

}  // namespace evosdpa::tune
