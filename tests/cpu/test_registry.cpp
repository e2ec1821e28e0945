// The table of kernel families, and the CUDA target rules that tell whether a build runs on a device.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "evosdpa/evosdpa.h"
#include "kernels/cuda_archs.hpp"
#include "kernels/registry.hpp"

using namespace evosdpa::detail;

namespace {

TEST(Registry, NamesAreUniqueAndComeFromTheTable) {
  const FamilyTable table = registry();
  ASSERT_GT(table.count, 0u);
  ASSERT_EQ(kernel_count(), static_cast<int>(table.count));
  ASSERT_EQ(evosdpa_kernel_count(), kernel_count());
  std::set<std::string> names;
  for (int i = 0; i < kernel_count(); ++i) {
    const KernelFamily* f = table.families[i];
    EXPECT_TRUE(names.insert(f->name).second) << "duplicate kernel name " << f->name;
    EXPECT_STREQ(kernel_name(i), f->name);
    EXPECT_STREQ(evosdpa_kernel_name(i), f->name);
    EXPECT_EQ(find_family(f->name), f);
    EXPECT_NE(std::string(f->name), "auto");
  }
  EXPECT_EQ(kernel_name(-1), nullptr);
  EXPECT_EQ(kernel_name(kernel_count()), nullptr);
  EXPECT_EQ(find_family("auto"), nullptr);
  EXPECT_EQ(find_family("turbo"), nullptr);
}

TEST(Registry, SelectionOrder) {
  ASSERT_EQ(kernel_count(), 5);
  EXPECT_STREQ(kernel_name(0), "splitkv_sm80");
  EXPECT_STREQ(kernel_name(1), "wgmma_sm90");
  EXPECT_STREQ(kernel_name(2), "mma_sm80");
  EXPECT_STREQ(kernel_name(3), "mma_fp8_sm89");
  EXPECT_STREQ(kernel_name(4), "reference");
  EXPECT_STREQ(find_family("wgmma_sm90")->cuda_archs, "90a");
}

TEST(Registry, EveryFamilyIsComplete) {
  for (const KernelFamily* f : registry()) {
    EXPECT_NE(f->supports, nullptr) << f->name;
    EXPECT_NE(f->launch, nullptr) << f->name;
    EXPECT_NE(f->probe_image, nullptr) << f->name;
    ASSERT_NE(f->cuda_archs, nullptr) << f->name;
    EXPECT_STRNE(f->cuda_archs, "") << f->name << ": no CUDA targets from the build";
  }
}

// ---- cuda_archs_run_on ---------------------------------------------------------------------------------

constexpr ArchMatch kRuns = ArchMatch::kRuns;
constexpr ArchMatch kNoCode = ArchMatch::kNoCode;
constexpr ArchMatch kUnknown = ArchMatch::kUnknown;

struct Case {
  const char* archs;
  int major, minor;
  ArchMatch expected;
};

TEST(CudaArchs, RunsOnFollowsCudaCompatibilityRules) {
  const Case cases[] = {
      // SASS runs within its major version, upwards; PTX on anything newer.
      {"90", 8, 0, kNoCode},
      {"80", 8, 0, kRuns},
      {"80", 8, 6, kRuns},  // SASS sm_80 on 8.6
      {"80", 8, 9, kRuns},
      {"80", 9, 0, kRuns},  // PTX compute_80 JIT-compiled for 9.0
      {"80", 12, 0, kRuns},
      {"86", 8, 0, kNoCode},  // SASS does not run downwards
      {"89", 8, 6, kNoCode},
      {"80-real", 9, 0, kNoCode},
      {"80-real", 8, 9, kRuns},
      {"80-virtual", 8, 0, kRuns},
      {"80-virtual", 9, 0, kRuns},
      {"90-virtual", 8, 9, kNoCode},
      {"100", 12, 0, kRuns},  // no SASS for 12.0, but PTX compute_100 is
      {"100-real", 12, 0, kNoCode},
      {"100-real", 10, 3, kRuns},
      {"120-real", 10, 0, kNoCode},
      {"120", 10, 0, kNoCode},
      {"120", 12, 1, kRuns},
      // Arch-specific: exactly that compute capability, its PTX included.
      {"90a", 9, 0, kRuns},
      {"90a", 10, 0, kNoCode},
      {"90a", 8, 0, kNoCode},
      {"90a-real", 9, 0, kRuns},
      {"90a-virtual", 9, 0, kRuns},
      {"90a-virtual", 12, 0, kNoCode},
      {"100a", 10, 3, kNoCode},
      // Family-specific: the same major version from its minor on, PTX included.
      {"100f", 10, 0, kRuns},
      {"100f", 10, 3, kRuns},
      {"103f", 10, 0, kNoCode},
      {"100f", 12, 0, kNoCode},
      {"100f-virtual", 10, 3, kRuns},
      {"100f-virtual", 11, 0, kNoCode},
      // Lists: any entry will do; ',' (how sources.cmake passes them) or ';' (CMake's own separator).
      {"80,89,90", 8, 6, kRuns},
      {"89;90", 8, 0, kNoCode},
      {"89-real;90-real", 8, 9, kRuns},
      {"80-real,90-virtual", 8, 6, kRuns},
      {"80-real,90-virtual", 8, 9, kRuns},
      {"80-real,90-virtual", 10, 0, kRuns},
      {"86-real,90a", 10, 0, kNoCode},
      {" 80 ; 90 ", 9, 0, kRuns},
      // Lists that name no targets: only the runtime can tell.
      {"native", 9, 0, kUnknown},
      {"all", 8, 0, kUnknown},
      {"all-major", 9, 0, kUnknown},
      {"OFF", 9, 0, kUnknown},
      {"", 9, 0, kUnknown},
      {"80;native", 8, 0, kUnknown},
      {"sm_80", 8, 0, kUnknown},
      {"8", 8, 0, kUnknown},
      {"080", 8, 0, kUnknown},
      {"90b", 9, 0, kUnknown},
      {"90-fake", 9, 0, kUnknown},
  };
  for (const Case& c : cases)
    EXPECT_EQ(cuda_archs_run_on(c.archs, c.major, c.minor), c.expected)
        << "\"" << c.archs << "\" on " << c.major << "." << c.minor;
}

TEST(CudaArchs, CodeLevelIsTheArchitectureTheDeviceRuns) {
  struct LevelCase {
    const char* archs;
    int major, minor, expected;
  };
  const LevelCase cases[] = {
      {"80,89,90", 9, 0, 90},  {"80,89,90", 8, 9, 89}, {"80,89,90", 8, 6, 80},  {"80,89,90", 10, 0, 90},
      {"80", 9, 0, 80},        // compute_80 PTX on an H100: sm_90-only code is absent
      {"80,89", 9, 0, 89},     {"90a", 9, 0, 90},      {"80-real,90-virtual", 9, 0, 90},
      {"86-real,89-virtual", 8, 9, 86},  // compatible SASS before PTX
      {"90", 8, 0, -1},        {"native", 9, 0, -1},
  };
  for (const LevelCase& c : cases)
    EXPECT_EQ(cuda_archs_code_level(c.archs, c.major, c.minor), c.expected)
        << "\"" << c.archs << "\" on " << c.major << "." << c.minor;
}

TEST(CudaArchs, DescribesTheListForMessages) {
  EXPECT_EQ(describe_cuda_archs("90"), "sm_90");
  EXPECT_EQ(describe_cuda_archs("80,89,90"), "sm_80, sm_89, sm_90");
  EXPECT_EQ(describe_cuda_archs("80-real;90-virtual"), "sm_80 SASS, compute_90 PTX");
  EXPECT_EQ(describe_cuda_archs("90a"), "sm_90a");
  EXPECT_EQ(describe_cuda_archs("100f-real"), "sm_100f SASS");
  EXPECT_EQ(describe_cuda_archs("native"), "CMAKE_CUDA_ARCHITECTURES=native");
}

}  // namespace
