// The selection function that both evosdpa_supports() and dispatch use, on made-up devices.
#include <gtest/gtest.h>

#include <string>

#include "cpu/params_fixture.hpp"
#include "kernels/mma/mma_config.hpp"

using namespace evosdpa::detail;

namespace {

TEST(Selection, AutoPicksTensorCoresOnSm80AndNewer) {
  for (auto dev : {device(8, 0, 163 * 1024), device(8, 9, 99 * 1024), device(9, 0)}) {
    for (int64_t d : {64, 128}) {
      const auto s = select_kernel(valid_params(2, 8, 1000, 777, d), dev, "auto");
      ASSERT_TRUE(s.check.ok()) << s.check.message;
      EXPECT_EQ(s.kernel, KernelId::MmaSm80);
    }
  }
  EXPECT_EQ(select_kernel(valid_params(), device(9, 0), nullptr).kernel, KernelId::MmaSm80);
  EXPECT_EQ(select_kernel(valid_params(), device(9, 0), "").kernel, KernelId::MmaSm80);
}

TEST(Selection, OldDeviceIsRefused) {
  const auto s = select_kernel(valid_params(), device(7, 5), "auto");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_DEVICE);
  EXPECT_NE(s.check.message.find("7.5"), std::string::npos) << s.check.message;
}

TEST(Selection, NamedKernelRuns) {
  const auto s = select_kernel(valid_params(), device(9, 0), "reference");
  ASSERT_TRUE(s.check.ok());
  EXPECT_EQ(s.kernel, KernelId::Reference);
}

TEST(Selection, UnknownKernelNameListsKnownOnes) {
  const auto s = select_kernel(valid_params(), device(9, 0), "turbo");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(s.check.message.find("mma_sm80"), std::string::npos) << s.check.message;
  EXPECT_NE(s.check.message.find("reference"), std::string::npos) << s.check.message;
}

TEST(Selection, MisalignedForTensorCoresFallsBackOrRefuses) {
  auto p = valid_params();
  p.q = reinterpret_cast<const char*>(p.q) + 2;  // element-aligned, not 16-byte aligned
  auto s = select_kernel(p, device(9, 0), "auto");
  ASSERT_TRUE(s.check.ok()) << s.check.message;
  EXPECT_EQ(s.kernel, KernelId::Reference);
  s = select_kernel(p, device(9, 0), "mma_sm80");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("q is not 16-byte aligned"), std::string::npos) << s.check.message;

  p = valid_params();
  p.k_seq_stride = 68;  // rows not a multiple of 16 bytes apart
  s = select_kernel(p, device(9, 0), "mma_sm80");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("k seq stride 68"), std::string::npos) << s.check.message;
}

TEST(Selection, StridesOfSizeOneDimsDoNotMatter) {
  auto p = valid_params(1, 8, 512, 512, 64);
  p.q_batch_stride = 3;  // batch 1: never used
  EXPECT_EQ(select_kernel(p, device(9, 0), "auto").kernel, KernelId::MmaSm80);
}

TEST(Selection, SharedMemoryLimit) {
  auto dev = device(8, 0);
  const auto p = valid_params(1, 1, 64, 64, 128);
  const long long need = mma_sm80::kConfigs[mma_sm80_variant(p, dev)].smem_bytes();
  dev.max_smem_per_block_optin = need - 1;
  const auto s = select_kernel(p, dev, "mma_sm80");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("shared memory"), std::string::npos) << s.check.message;
  EXPECT_EQ(select_kernel(p, dev, "auto").kernel, KernelId::Reference);
}

TEST(Selection, SmallGridsTakeTheSmallGridVariant) {
  for (int64_t d : {64, 128}) {
    auto dev = device(9, 0);
    dev.sm_count = 132;
    const int big = mma_sm80::config_index(static_cast<int>(d), false);
    const int small = mma_sm80::config_index(static_cast<int>(d), true);
    ASSERT_GE(small, 0);
    EXPECT_LT(mma_sm80::kConfigs[small].block_m(), mma_sm80::kConfigs[big].block_m());
    // B=1 H=8 L=512: 32 blocks of 128 rows on 132 SMs.
    auto s = select_kernel(valid_params(1, 8, 512, 512, d), dev, "auto");
    ASSERT_TRUE(s.check.ok()) << s.check.message;
    EXPECT_EQ(s.variant, small);
    // B=2 H=8 L=2048: 256 blocks fill the SMs.
    s = select_kernel(valid_params(2, 8, 2048, 2048, d), dev, "mma_sm80");
    EXPECT_EQ(s.variant, big);
  }
}

TEST(Selection, GridLimit) {
  // 2^31 blocks of rows: more than a 1-D grid holds.
  auto p = valid_params(65536, 65536, 128, 1, 64);
  auto s = select_kernel(p, device(9, 0), "auto");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("exceeds"), std::string::npos) << s.check.message;
}

TEST(Selection, ValidationComesFirst) {
  auto p = valid_params();
  p.o = nullptr;
  const auto s = select_kernel(p, device(9, 0), "mma_sm80");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_INVALID_ARGUMENT);
}

TEST(Selection, EveryKernelHasAUniqueName) {
  for (int i = 0; i < kKernelCount; ++i) {
    const auto id = static_cast<KernelId>(i);
    ASSERT_TRUE(kernel_from_name(kernel_name(id)).has_value());
    EXPECT_EQ(*kernel_from_name(kernel_name(id)), id);
  }
  EXPECT_FALSE(kernel_from_name("auto").has_value());
}

}  // namespace
