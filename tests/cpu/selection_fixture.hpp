// Selection over the registry's families with a made-up CUDA target list in place of this build's, so
// that a test of made-up devices does not depend on the CMAKE_CUDA_ARCHITECTURES it was built with (a
// build for 90 alone has no code for an sm_80 device, and the real registry refuses one).
#pragma once

#include <vector>

#include "evosdpa/evosdpa.h"
#include "kernels/registry.hpp"
#include "selection.hpp"

// The registry's families, each claiming `cuda_archs` (and `probe_image`, where given). Not copyable: the
// table points into it.
class Families {
 public:
  explicit Families(const char* cuda_archs, cudaError_t (*probe_image)() = nullptr) {
    for (const evosdpa::detail::KernelFamily* f : evosdpa::detail::registry()) {
      copies_.push_back(*f);
      copies_.back().cuda_archs = cuda_archs;
      if (probe_image != nullptr) copies_.back().probe_image = probe_image;
    }
    for (const evosdpa::detail::KernelFamily& f : copies_) pointers_.push_back(&f);
  }
  Families(const Families&) = delete;
  Families& operator=(const Families&) = delete;
  evosdpa::detail::FamilyTable table() const { return {pointers_.data(), pointers_.size()}; }

 private:
  std::vector<evosdpa::detail::KernelFamily> copies_;
  std::vector<const evosdpa::detail::KernelFamily*> pointers_;
};

// "80": SASS for 8.x and PTX for every later device, so every device these tests make up has code.
inline evosdpa::detail::Selection select_any_arch(const evosdpa_params_t& p, const evosdpa::detail::DeviceInfo& dev,
                                                  const char* requested,
                                                  evosdpa::detail::Pass pass = evosdpa::detail::Pass::kForward) {
  static const Families families("80");
  return evosdpa::detail::select_kernel(p, dev, requested, families.table(), pass);
}
