// The resource gate: every kernel the build produced has no spills and no stack frame, its shared memory
// fits the per-block limit of its arch, and ptxas did not serialise its wgmma instructions. Reads the ptxas
// output captured during this build.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "host/ptxas_report.hpp"
#include "kernels/mma/bwd/bwd_config.hpp"
#include "kernels/mma/mma_config.hpp"
#include "kernels/mma_fp8/mma_fp8_config.hpp"
#include "kernels/splitkv/splitkv_config.hpp"
#include "kernels/wgmma/bwd/wgmma_bwd_config.hpp"
#include "kernels/wgmma/wgmma_config.hpp"

using namespace evosdpa::host;

namespace {

TEST(ResourceGate, EveryKernelOfTheBuildPasses) {
  const auto kernels = load_ptxas_logs(EVOSDPA_PTXAS_LOG_DIR);
  ASSERT_FALSE(kernels.empty()) << "no ptxas output in " << EVOSDPA_PTXAS_LOG_DIR;
  std::set<std::string> mma, mma_bwd, wgmma, wgmma_bwd, fp8, splitkv;
  for (const auto& k : kernels) {
    // wgmma_sm90's backward names mma_sm80's workspace type in its parameters (names are mangled).
    const bool hopper_bwd =
        k.function.find("wgmma_sm90") != std::string::npos && k.function.find("bwd_kernel") != std::string::npos;
    if (hopper_bwd) {
      if (k.arch == "sm_90a") wgmma_bwd.insert(k.function);
      continue;
    }
    const bool m80 = k.function.find("mma_sm80") != std::string::npos;
    if (m80 && k.function.find("bwd_") == std::string::npos) mma.insert(k.function);
    if (m80 && k.function.find("bwd_") != std::string::npos) mma_bwd.insert(k.function);
    if (k.function.find("mma_fp8") != std::string::npos) fp8.insert(k.function);
    if (k.function.find("splitkv") != std::string::npos) splitkv.insert(k.function);
    if (k.function.find("wgmma_sm90") != std::string::npos && k.arch == "sm_90a") wgmma.insert(k.function);
  }
  // fp16 and bf16 per row, and on the score-modifier rows each of their fourteen combinations (window,
  // softcap, both, ALiBi, and a boolean or an additive mask tensor alone, with a window, a softcap, both or
  // ALiBi).
  size_t expected_mma = 0;
  for (int i = 0; i < evosdpa::detail::mma_sm80::kConfigCount; ++i)
    expected_mma += evosdpa::detail::mma_sm80::score_mod_row(i) ? 2 * 15 : 2;
  EXPECT_EQ(mma.size(), expected_mma)
      << "expected fp16 and bf16 instantiations of every tile-table row, with the score modifiers' on theirs";
  // fp16 and bf16: per backward row, the kernel in each mode; per head dim, the pre-pass and the dQ
  // conversion.
  EXPECT_EQ(mma_bwd.size(), 2u * (2u * evosdpa::detail::mma_sm80::kBwdConfigCount + 2u * 2u))
      << "expected fp16 and bf16 instantiations of every backward kernel and row";
  EXPECT_EQ(fp8.size(), 2u * evosdpa::detail::mma_fp8::kConfigCount)
      << "expected fp16- and bf16-output instantiations of every FP8 tile-table row";
  EXPECT_EQ(splitkv.size(), 2u * 2u * evosdpa::detail::splitkv::kConfigCount)
      << "expected fp16 and bf16 instantiations of every split-KV row and of its merge";
  size_t expected = 0;
  // 16-bit rows: fp16 and bf16, persistent and split over clusters, and (unless split_keys) with the work
  // counter (DynamicSchedule); split_keys rows persistent for each sequence policy (CallSequences,
  // OwnSequences); and the rows with score modifiers persistent with each of their fourteen combinations
  // (window, softcap, both, ALiBi, and a boolean or an additive mask tensor alone, with a window, a softcap,
  // both or ALiBi); FP8 rows: E4M3, persistent only.
  for (int i = 0; i < evosdpa::detail::wgmma_sm90::kConfigCount; ++i) {
    const auto& c = evosdpa::detail::wgmma_sm90::kConfigs[i];
    expected += c.fp8 ? 1 : c.split_keys ? 2 * 3 : 6;
    if (evosdpa::detail::wgmma_sm90::score_mod_row(i)) expected += 2 * 14;
  }
  EXPECT_EQ(wgmma.size(), expected)
      << "expected the sm_90a instantiations of every Hopper tile-table row (fp16 and bf16, persistent, split "
         "and dynamic, score modifiers; E4M3 persistent)";
  // wgmma_sm90's backward: fp16 and bf16, per row, in each mode (its passes are mma_sm80's, above).
  EXPECT_EQ(wgmma_bwd.size(), 2u * 2u * evosdpa::detail::wgmma_sm90::kBwdTileCount)
      << "expected fp16 and bf16 instantiations of every Hopper backward row in both modes";
  for (const auto& v : gate_violations(kernels)) ADD_FAILURE() << v;
  std::cout << report_table(kernels);
}

TEST(ResourceGate, ParsesPtxasOutput) {
  std::istringstream log(
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_ZN7evosdpa6detail8mma_sm8016attention_kernelI6__halfLi0EEEvNS0_12KernelParamsE' for 'sm_90'\n"
      "ptxas info    : Function properties for _ZN7evosdpa6detail8mma_sm8016attention_kernelI6__halfLi0EEEvNS0_12KernelParamsE\n"
      "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 127 registers, used 1 barriers, 16 bytes smem, 472 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_80'\n"
      "ptxas info    : Function properties for _Z3fooPf\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 300 registers, used 0 barriers, 200000 bytes smem, 360 bytes cmem[0]\n"
      "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
      "insufficient register resources for the wgmma pipeline in the function '_Z3fooPf'\n");
  const auto ks = parse_ptxas_log(log);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].arch, "sm_90");
  EXPECT_EQ(ks[0].registers, 127);
  EXPECT_EQ(ks[0].stack_bytes, 8);
  EXPECT_EQ(ks[0].spill_store_bytes, 4);
  EXPECT_EQ(ks[0].spill_load_bytes, 12);
  EXPECT_EQ(ks[0].static_smem_bytes, 16);
  EXPECT_EQ(ks[0].threads_per_block, evosdpa::detail::mma_sm80::kConfigs[0].threads());
  EXPECT_GT(ks[0].dynamic_smem_bytes, 0);
  EXPECT_EQ(ks[1].static_smem_bytes, 200000);
  EXPECT_TRUE(ks[0].wgmma_serialized.empty());
  EXPECT_EQ(ks[1].wgmma_serialized, "due to insufficient register resources for the wgmma pipeline");
  const auto bad = gate_violations(ks);
  EXPECT_EQ(bad.size(), 4u);  // spills and stack of the first, shared memory and serialised wgmma of the second
}

TEST(ResourceGate, OccupancyArithmetic) {
  KernelResources k;
  k.threads_per_block = 256;
  k.registers = 128;
  k.dynamic_smem_bytes = 48 * 1024;
  EXPECT_EQ(occupancy_blocks(k, *arch_limits("sm_90")), 2);  // 64K registers / (256 * 128)
  k.registers = 64;
  EXPECT_EQ(occupancy_blocks(k, *arch_limits("sm_90")), 4);  // 228 KiB / 49 KiB
  EXPECT_EQ(occupancy_blocks(k, *arch_limits("sm_89")), 2);  // 100 KiB / 49 KiB
  EXPECT_EQ(arch_limits("sm_70"), nullptr);
}

// ptxas names arch-specific (a) and family (f) targets as such; they run on their base arch.
TEST(ResourceGate, ArchSpecificAndBlackwellTargets) {
  std::ostringstream text;
  for (const char* arch : {"sm_90a", "sm_100", "sm_100a", "sm_120", "sm_121f"})
    text << "ptxas info    : Compiling entry function '_Z3foov' for '" << arch << "'\n"
         << "ptxas info    : Function properties for _Z3foov\n"
         << "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
         << "ptxas info    : Used 64 registers, used 1 barriers, 150000 bytes smem, 360 bytes cmem[0]\n";
  std::istringstream log(text.str());
  const auto ks = parse_ptxas_log(log);
  ASSERT_EQ(ks.size(), 5u);
  EXPECT_EQ(ks[0].arch, "sm_90a");
  EXPECT_EQ(ks[1].arch, "sm_100");
  EXPECT_EQ(ks[3].arch, "sm_120");
  EXPECT_EQ(ks[4].arch, "sm_121f");
  EXPECT_EQ(ks[4].registers, 64);
  EXPECT_EQ(ks[4].static_smem_bytes, 150000);
  // 150000 bytes fit Hopper's and datacenter Blackwell's 227 KiB, not consumer Blackwell's 99 KiB.
  const auto bad = gate_violations(ks);
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_NE(bad[0].find("[sm_120]"), std::string::npos) << bad[0];
  EXPECT_NE(bad[1].find("[sm_121f]"), std::string::npos) << bad[1];
  EXPECT_TRUE(report_warnings(ks).empty());

  EXPECT_EQ(base_arch("sm_90a"), "sm_90");
  EXPECT_EQ(base_arch("sm_100f"), "sm_100");
  EXPECT_EQ(base_arch("sm_120"), "sm_120");
  EXPECT_EQ(arch_limits("sm_90a"), arch_limits("sm_90"));
  EXPECT_EQ(arch_limits("sm_100a"), arch_limits("sm_100"));
  for (const char* arch : {"sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_100f",
                           "sm_101", "sm_101a", "sm_103", "sm_103a", "sm_110", "sm_110f", "sm_120", "sm_120a",
                           "sm_121", "sm_121a"})
    EXPECT_NE(arch_limits(arch), nullptr) << arch;
  EXPECT_EQ(arch_limits("sm_100")->smem_per_block_optin, 227 * 1024);
  EXPECT_EQ(arch_limits("sm_120")->smem_per_block_optin, 99 * 1024);
  EXPECT_EQ(arch_limits("sm_87")->smem_per_block_optin, 163 * 1024);
}

// An arch not in the table does not fail the build: it is checked against the most conservative known
// limits, and the report says so.
TEST(ResourceGate, UnknownArchUsesTheConservativeLimitsAndSaysSo) {
  const ArchLimits& c = conservative_arch_limits();
  EXPECT_EQ(c.smem_per_block_optin, 99 * 1024);
  EXPECT_EQ(c.smem_per_sm, 100 * 1024);
  EXPECT_EQ(c.max_threads_per_sm, 1536);
  EXPECT_EQ(c.max_blocks_per_sm, 16);
  EXPECT_EQ(c.regs_per_sm, 65536);
  EXPECT_EQ(arch_limits("sm_130"), nullptr);
  EXPECT_EQ(&arch_limits_or_conservative("sm_130"), &c);

  KernelResources small;
  small.function = "_Z5smallv";
  small.arch = "sm_130";
  small.threads_per_block = 128;
  small.registers = 32;
  small.static_smem_bytes = 60 * 1024;
  KernelResources big = small;
  big.function = "_Z3bigv";
  big.static_smem_bytes = 120 * 1024;  // fits sm_90's limit, not the conservative one
  EXPECT_TRUE(gate_violations({small}).empty());
  const auto bad = gate_violations({small, big});
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad[0].find("big()"), std::string::npos) << bad[0];
  EXPECT_NE(bad[0].find("conservative"), std::string::npos) << bad[0];

  const auto warnings = report_warnings({small, big});
  ASSERT_EQ(warnings.size(), 1u);  // one per arch, not per kernel
  EXPECT_NE(warnings[0].find("no limits known for sm_130"), std::string::npos) << warnings[0];
  const std::string table = report_table({small, big});
  EXPECT_NE(table.find(warnings[0]), std::string::npos) << table;
  EXPECT_NE(table.find("sm_130*"), std::string::npos) << table;
  EXPECT_NE(report_json({small}).find("\"arch_limits_known\": false"), std::string::npos);
}

// cmake/ptxas-capture.sh as the build runs it (from the build folder, -o relative to it), with a stand-in
// compiler that prints ptxas's lines for one kernel and writes the object; then the loader over its logs.
class CaptureScript : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "evosdpa-capture-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    build_ = root_ / "build";
    logs_ = build_ / "ptxas";
    std::filesystem::create_directories(build_);
    compiler_ = root_ / "fake-nvcc.sh";
    std::ofstream(compiler_) << "# fake-nvcc.sh FUNCTION -o OBJECT\n"
                                "printf \"ptxas info    : Compiling entry function '%s' for 'sm_90'\\n\" \"$1\" >&2\n"
                                "printf \"ptxas info    : Function properties for %s\\n\" \"$1\" >&2\n"
                                "printf \"    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\\n\" >&2\n"
                                "printf \"ptxas info    : Used 32 registers, used 0 barriers, 0 bytes smem\\n\" >&2\n"
                                "mkdir -p \"$(dirname \"$3\")\" && : > \"$3\"\n";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  // Compiles `object` (relative to the build folder) with the kernel `function`; true on success.
  bool compile(const std::string& object, const std::string& function) {
    const std::string cmd = "cd '" + build_.string() + "' && bash '" EVOSDPA_PTXAS_CAPTURE "' '" + logs_.string() +
                            "' '" + build_.string() + "' sh '" + compiler_.string() + "' " + function + " -o " + object;
    return std::system(cmd.c_str()) == 0;
  }
  std::set<std::string> functions(const std::vector<KernelResources>& ks) {
    std::set<std::string> s;
    for (const auto& k : ks) s.insert(k.function);
    return s;
  }
  std::filesystem::path root_, build_, logs_, compiler_;
};

TEST_F(CaptureScript, SameNamedObjectsInDifferentFoldersKeepOneLogEach) {
  ASSERT_TRUE(compile("CMakeFiles/lib.dir/src/a/inst/x.cu.o", "_Z1av"));
  ASSERT_TRUE(compile("CMakeFiles/lib.dir/src/b/inst/x.cu.o", "_Z1bv"));
  EXPECT_TRUE(std::filesystem::exists(logs_ / "CMakeFiles__lib.dir__src__a__inst__x.cu.o.ptxas.log"));
  EXPECT_TRUE(std::filesystem::exists(logs_ / "CMakeFiles__lib.dir__src__b__inst__x.cu.o.ptxas.log"));
  const auto ks = load_ptxas_logs(logs_.string());
  EXPECT_EQ(functions(ks), (std::set<std::string>{"_Z1av", "_Z1bv"}));
  EXPECT_EQ(ks.size(), 2u);
}

TEST_F(CaptureScript, StaleLogsAreIgnoredAndDeleted) {
  const std::string a = "CMakeFiles/lib.dir/src/a.cu.o", b = "CMakeFiles/lib.dir/src/b.cu.o";
  ASSERT_TRUE(compile(a, "_Z1av"));
  ASSERT_TRUE(compile(b, "_Z1bv"));
  const auto log_b = logs_ / "CMakeFiles__lib.dir__src__b.cu.o.ptxas.log";
  // A log in the format from before logs named their object (no first line): may duplicate another.
  std::ofstream(logs_ / "x.cu.o.ptxas.log") << "ptxas info    : Compiling entry function '_Z1xv' for 'sm_90'\n"
                                              "ptxas info    : Used 32 registers, used 0 barriers, 0 bytes smem\n";
  EXPECT_EQ(functions(load_ptxas_logs(logs_.string())), (std::set<std::string>{"_Z1av", "_Z1bv"}));
  EXPECT_FALSE(std::filesystem::exists(logs_ / "x.cu.o.ptxas.log"));

  // b's source was removed: its object is gone (Ninja deletes dead outputs), so is its log.
  std::filesystem::remove(build_ / b);
  EXPECT_EQ(functions(load_ptxas_logs(logs_.string())), (std::set<std::string>{"_Z1av"}));
  EXPECT_FALSE(std::filesystem::exists(log_b));

  // b's object is still there (Make keeps it) but no longer one of the library's objects.
  ASSERT_TRUE(compile(b, "_Z1bv"));
  const std::vector<std::string> objects = {(build_ / a).string()};
  EXPECT_EQ(functions(load_ptxas_logs(logs_.string(), &objects)), (std::set<std::string>{"_Z1av"}));
  EXPECT_FALSE(std::filesystem::exists(log_b));
  EXPECT_EQ(functions(load_ptxas_logs(logs_.string())), (std::set<std::string>{"_Z1av"}));
}

}  // namespace
