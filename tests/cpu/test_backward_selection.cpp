// The backward pass's argument checks (validation_backward.cpp) and its selection on made-up devices:
// which family "auto" takes, who refuses and why, and the workspace each needs.
#include <gtest/gtest.h>

#include <string>

#include "cpu/params_fixture.hpp"
#include "cpu/selection_fixture.hpp"
#include "kernels/mma/bwd/bwd_config.hpp"
#include "kernels/wgmma/bwd/wgmma_bwd_config.hpp"
#include "kernels/registry.hpp"
#include "validation.hpp"

using namespace evosdpa::detail;

namespace {

// valid_params plus dout, dq, dk, dv and lse at their own fake, well-aligned addresses.
evosdpa_params_t valid_backward(int64_t b = 2, int64_t hq = 8, int64_t hkv = 8, int64_t lq = 512, int64_t lk = 512,
                                int64_t d = 64) {
  evosdpa_params_t p = valid_params(b, hq, lq, lk, d);
  p.heads_kv = hkv;
  p.lse = reinterpret_cast<float*>(uintptr_t{0x50000000});
  p.dout = reinterpret_cast<const void*>(uintptr_t{0x60000000});
  p.dq = reinterpret_cast<void*>(uintptr_t{0x70000000});
  p.dk = reinterpret_cast<void*>(uintptr_t{0x80000000});
  p.dv = reinterpret_cast<void*>(uintptr_t{0x90000000});
  evosdpa_params_set_bhsd_strides(&p);
  return p;
}

// Selection for the backward pass over families built for "80" (every made-up device has code).
Selection select_backward(const evosdpa_params_t& p, const DeviceInfo& dev, const char* requested) {
  return select_any_arch(p, dev, requested, Pass::kBackward);
}

void expect_refused(const evosdpa_params_t& p, evosdpa_status_t status, const std::string& words) {
  const Check c = validate_backward_params(p);
  EXPECT_EQ(c.status, status) << c.message;
  EXPECT_NE(c.message.find(words), std::string::npos) << c.message;
}

TEST(BackwardValidation, AcceptsAValidCallAndRefusesBadOnes) {
  EXPECT_TRUE(validate_backward_params(valid_backward()).ok()) << validate_backward_params(valid_backward()).message;
  EXPECT_TRUE(validate_backward_params(valid_backward(1, 8, 2, 100, 333)).ok());

  auto p = valid_backward();
  p.lse = nullptr;
  expect_refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "lse is a null pointer");
  p = valid_backward();
  p.dout = nullptr;
  expect_refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "dout is a null pointer");
  p = valid_backward();
  p.dk = nullptr;
  expect_refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "dk is a null pointer");
  p = valid_backward();
  p.backward_mode = static_cast<evosdpa_backward_mode_t>(7);
  expect_refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "backward_mode 7");
  p = valid_backward();
  p.dtype = EVOSDPA_DTYPE_FLOAT8_E4M3;
  p.q_descale = p.k_descale = p.v_descale = reinterpret_cast<const float*>(uintptr_t{0xa0000000});
  expect_refused(p, EVOSDPA_ERROR_NOT_SUPPORTED, "FP8");
  p = valid_backward();
  p.dq_seq_stride = -64;
  expect_refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "dq seq stride is negative");
  p = valid_backward();
  p.dv_seq_stride = 0;  // every key row of dV on one address
  expect_refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "dv strides make distinct output elements overlap");
  p = valid_backward();
  p.dq = const_cast<void*>(p.q);
  expect_refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "dq (bytes");
  p = valid_backward();
  p.dk = reinterpret_cast<char*>(p.dv) + 64;
  expect_refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "dk and dv overlap");
  p = valid_backward();
  p.dv = const_cast<void*>(p.dout);
  expect_refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "overlaps input dout");
  p = valid_backward();
  p.dq = reinterpret_cast<void*>(p.lse);
  expect_refused(p, EVOSDPA_ERROR_INVALID_ARGUMENT, "overlaps input lse");
  // O is an input of the backward pass: it may overlap the other inputs, as they may each other.
  p = valid_backward();
  p.o = const_cast<void*>(p.q);
  EXPECT_TRUE(validate_backward_params(p).ok()) << validate_backward_params(p).message;
}

TEST(BackwardValidation, EmptyTensorsNeedNoPointer) {
  auto p = valid_backward(2, 8, 8, 0, 512);  // no queries: dK and dV are still written (zeros)
  p.q = p.dout = nullptr;
  p.o = p.dq = nullptr;
  p.lse = nullptr;
  EXPECT_TRUE(validate_backward_params(p).ok()) << validate_backward_params(p).message;
  EXPECT_FALSE(backward_has_no_work(p));
  p = valid_backward(2, 8, 8, 512, 0);  // no keys: dQ is written (zeros)
  p.k = p.v = p.dk = p.dv = nullptr;
  EXPECT_TRUE(validate_backward_params(p).ok()) << validate_backward_params(p).message;
  EXPECT_FALSE(backward_has_no_work(p));
  p = valid_backward(2, 0, 2, 512, 512);  // no query heads: dK and dV are written (zeros), as with no queries
  p.q = p.dout = nullptr;
  p.o = p.dq = nullptr;
  p.lse = nullptr;
  EXPECT_TRUE(validate_backward_params(p).ok()) << validate_backward_params(p).message;
  EXPECT_FALSE(backward_has_no_work(p));
  EXPECT_TRUE(backward_has_no_work(valid_backward(0)));
  EXPECT_TRUE(backward_has_no_work(valid_backward(2, 0, 0)));
  EXPECT_TRUE(backward_has_no_work(valid_backward(2, 8, 8, 0, 0)));
}

TEST(BackwardValidation, Workspace) {
  auto p = valid_backward();
  p.workspace = reinterpret_cast<void*>(uintptr_t{0xb0000000});
  p.workspace_size = 4096;
  EXPECT_TRUE(check_workspace(p, 4096).ok());
  EXPECT_TRUE(check_workspace(p, 0).ok());
  const Check small = check_workspace(p, 4097);
  EXPECT_EQ(small.status, EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(small.message.find("workspace_size 4096 is below the 4097 bytes"), std::string::npos) << small.message;
  p.workspace = reinterpret_cast<void*>(uintptr_t{0xb0000008});
  EXPECT_NE(check_workspace(p, 64).message.find("16-byte aligned"), std::string::npos);
  p.workspace = nullptr;
  EXPECT_NE(check_workspace(p, 64).message.find("null pointer"), std::string::npos);
  EXPECT_TRUE(check_workspace(p, 0).ok());  // a call that needs none may pass none
  p.workspace = p.dq;
  EXPECT_NE(check_workspace(p, 64).message.find("workspace and dq overlap"), std::string::npos);
  p.workspace = const_cast<void*>(p.k);
  EXPECT_NE(check_workspace(p, 64).message.find("overlaps input k"), std::string::npos);
}

TEST(BackwardSelection, AutoTakesWgmmaOnHopperMmaSm80ElsewhereAndTheReferenceWhereNeitherCan) {
  for (auto dev : {device(8, 0, 163 * 1024), device(8, 6, 99 * 1024), device(8, 9, 99 * 1024), device(9, 0)}) {
    for (int64_t d : {64, 128}) {
      const auto s = select_backward(valid_backward(2, 8, 2, 1000, 777, d), dev, "auto");
      ASSERT_TRUE(s.check.ok()) << s.check.message;
      EXPECT_EQ(name_of(s), dev.cc_major == 9 ? "wgmma_sm90" : "mma_sm80") << dev.cc_major << "." << dev.cc_minor << " D=" << d;
    }
  }
  // A device that gives a block less shared memory than the kernels need, and a gradient off the
  // 16-byte grid: mma_sm80 refuses, the reference takes the call.
  const auto small = select_backward(valid_backward(), device(8, 0, 48 * 1024), "auto");
  ASSERT_TRUE(small.check.ok()) << small.check.message;
  EXPECT_EQ(name_of(small), "reference");
  auto p = valid_backward();
  p.dq = reinterpret_cast<char*>(p.dq) + 2;
  const auto s = select_backward(p, device(9, 0), "auto");
  ASSERT_TRUE(s.check.ok()) << s.check.message;
  EXPECT_EQ(name_of(s), "reference");
  const auto named = select_backward(p, device(9, 0), "mma_sm80");
  EXPECT_EQ(named.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(named.check.message.find("dq is not 16-byte aligned"), std::string::npos) << named.check.message;
}

// mma_sm80's backward rows by device: sm_90 takes the rows of 161 KiB (D = 64 with 128-query tiles,
// D = 128 with 128 keys), earlier devices and smaller memories the rows within sm_86/sm_89's 99 KiB.
TEST(BackwardSelection, MmaSm80RowByDevice) {
  namespace m80 = evosdpa::detail::mma_sm80;
  const auto row = [](evosdpa::detail::DeviceInfo dev, int64_t d) {
    const auto s = select_backward(valid_backward(2, 8, 2, 1000, 777, d), dev, "mma_sm80");
    EXPECT_TRUE(s.check.ok()) << s.check.message;
    return s.check.ok() ? m80::kBwdConfigs[s.variant] : m80::BwdConfig{};
  };
  for (auto dev : {device(9, 0), device(10, 0)}) {
    EXPECT_EQ(row(dev, 64).tile_m, 128);
    EXPECT_EQ(row(dev, 128).block_n, 128);
  }
  for (auto dev : {device(8, 0, 163 * 1024), device(8, 6, 99 * 1024), device(8, 9, 99 * 1024), device(9, 0, 99 * 1024)}) {
    EXPECT_EQ(row(dev, 64).tile_m, 64) << dev.cc_major << "." << dev.cc_minor;
    EXPECT_EQ(row(dev, 128).block_n, 64) << dev.cc_major << "." << dev.cc_minor;
  }
  for (int i = 0; i < m80::kBwdConfigCount; ++i)  // every row is some device's choice
    EXPECT_EQ(m80::bwd_config_index(m80::kBwdConfigs[i].head_dim, m80::kBwdConfigs[i].min_arch,
                                    m80::kBwdConfigs[i].smem_bytes(2)),
              i);
}

// wgmma_sm90's backward runs on Hopper only, with its tile row per head dim; a head dim without a row
// is refused.
TEST(BackwardSelection, WgmmaRunsOnHopperOnly) {
  namespace w = evosdpa::detail::wgmma_sm90;
  for (int d : {64, 128}) {
    const auto p = valid_backward(2, 8, 2, 1000, 777, d);
    const auto named = select_backward(p, device(9, 0), "wgmma_sm90");
    ASSERT_TRUE(named.check.ok()) << named.check.message;
    EXPECT_STREQ(named.family->name, "wgmma_sm90");
    EXPECT_EQ(w::kBwdTiles[named.variant].head_dim, d);
    const auto ampere = select_backward(p, device(8, 0), "wgmma_sm90");
    EXPECT_EQ(ampere.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
    EXPECT_NE(ampere.check.message.find("needs a Hopper GPU"), std::string::npos) << ampere.check.message;
  }
  const auto p = valid_backward(2, 8, 2, 1000, 777, 96);
  EXPECT_EQ(select_backward(p, device(9, 0), "wgmma_sm90").check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
}

TEST(BackwardSelection, FamiliesWithoutABackwardRefuseByName) {
  for (const char* name : {"splitkv_sm80", "mma_fp8_sm89"}) {
    const auto s = select_backward(valid_backward(), device(9, 0), name);
    EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(s.check.message, std::string(name) + ": has no backward pass");
  }
  EXPECT_EQ(select_backward(valid_backward(), device(9, 0), "nope").check.status, EVOSDPA_ERROR_INVALID_ARGUMENT);
}

TEST(BackwardSelection, WorkspaceSizes) {
  auto p = valid_backward(2, 8, 2, 1001, 777, 128);
  const int64_t rows = 2 * 8 * 1001;
  const auto mma = select_backward(p, device(9, 0), "mma_sm80");
  ASSERT_TRUE(mma.check.ok()) << mma.check.message;
  // D and the float32 dQ sums; DETERMINISTIC mode, plus a turn counter per 64-query tile (sm_90's row).
  const int64_t delta_bytes = (rows + 3) / 4 * 4 * 4, sums_bytes = rows * 128 * 4, turns = 2 * 8 * 16;
  EXPECT_EQ(evosdpa::detail::mma_sm80::kBwdConfigs[mma.variant].tile_m, 64);
  EXPECT_EQ(mma.family->backward->workspace_bytes(p, mma.variant),
            static_cast<size_t>(delta_bytes + sums_bytes + turns * 4));
  p.backward_mode = EVOSDPA_BACKWARD_FAST;
  EXPECT_EQ(mma.family->backward->workspace_bytes(p, mma.variant), static_cast<size_t>(delta_bytes + sums_bytes));
  const auto ref = select_backward(p, device(9, 0), "reference");
  ASSERT_TRUE(ref.check.ok()) << ref.check.message;
  EXPECT_EQ(ref.family->backward->workspace_bytes(p, ref.variant), static_cast<size_t>((rows * 4 + 15) / 16 * 16));
}

TEST(BackwardApi, ChecksArgumentsBeforeTheDevice) {
  size_t bytes = 1;
  EXPECT_EQ(evosdpa_backward_workspace_size(nullptr, nullptr, &bytes), EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, 0u);
  auto p = valid_backward();
  EXPECT_EQ(evosdpa_backward_workspace_size(&p, nullptr, nullptr), EVOSDPA_ERROR_INVALID_ARGUMENT);
  p.lse = nullptr;
  EXPECT_EQ(evosdpa_attention_backward(&p, nullptr, nullptr), EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(evosdpa_last_error_message()).find("lse is a null pointer"), std::string::npos);
  // Nothing to compute: success without a device, and no workspace.
  auto empty = valid_backward(0);
  EXPECT_EQ(evosdpa_backward_workspace_size(&empty, nullptr, &bytes), EVOSDPA_SUCCESS);
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(evosdpa_attention_backward(&empty, "mma_sm80", nullptr), EVOSDPA_SUCCESS);
}

TEST(BackwardApi, StrideHelpersCoverTheGradients) {
  evosdpa_params_t p = valid_backward(2, 8, 2, 100, 300, 64);
  evosdpa_params_set_bshd_strides(&p);
  EXPECT_EQ(p.dout_seq_stride, 8 * 64);
  EXPECT_EQ(p.dq_batch_stride, 100 * 8 * 64);
  EXPECT_EQ(p.dk_seq_stride, 2 * 64);
  EXPECT_EQ(p.dv_head_stride, 64);
  evosdpa_params_set_bhsd_strides(&p);
  EXPECT_EQ(p.dout_head_stride, 100 * 64);
  EXPECT_EQ(p.dk_batch_stride, 2 * 300 * 64);
}

}  // namespace
