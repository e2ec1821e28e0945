// The selection function that both evosdpa_supports() and dispatch use, on made-up devices.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu/params_fixture.hpp"
#include "cpu/selection_fixture.hpp"
#include "kernels/mma/mma_config.hpp"
#include "kernels/mma_fp8/mma_fp8_config.hpp"
#include "kernels/wgmma/wgmma_config.hpp"

using namespace evosdpa::detail;

namespace {


// An H100's 132 SMs: (2,8,512,64) fills fewer than half of them, where "auto" would otherwise pass
// D = 64 over to mma_sm80.
DeviceInfo h100() {
  DeviceInfo d = device(9, 0);
  d.sm_count = 132;
  return d;
}

// A call with a score modifier (evosdpa.h) on an A100, an L4-class sm_89 and an H100: splitkv_sm80 refuses
// it naming `what`, mma_fp8_sm89 refuses it (or its 16-bit inputs), mma_sm80 runs it on a modifier row,
// "auto" takes wgmma_sm90 on Hopper and mma_sm80 elsewhere, and the reference kernel runs it by name.
void expect_modifier_kernels(const evosdpa_params_t& p, const std::string& what) {
  for (auto dev : {device(8, 0, 163 * 1024), device(8, 9, 99 * 1024), h100()}) {
    const Selection split = select_any_arch(p, dev, "splitkv_sm80");
    EXPECT_EQ(split.check.status, EVOSDPA_ERROR_NOT_SUPPORTED) << split.check.message;
    EXPECT_NE(split.check.message.find(what), std::string::npos) << split.check.message;
    EXPECT_EQ(select_any_arch(p, dev, "mma_fp8_sm89").check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
    const Selection mma = select_any_arch(p, dev, "mma_sm80");
    ASSERT_TRUE(mma.check.ok()) << mma.check.message;
    EXPECT_TRUE(evosdpa::detail::mma_sm80::score_mod_row(mma.variant)) << mma.variant;
    EXPECT_EQ(name_of(select_any_arch(p, dev, "auto")), dev.cc_major == 9 ? "wgmma_sm90" : "mma_sm80");
    EXPECT_EQ(select_any_arch(p, dev, "reference").check.status, EVOSDPA_SUCCESS);
  }
}

// A sliding window or softcap: mma_sm80 takes them on its 16-row-warp row, whatever the grid.
TEST(Selection, ScoreModsRunOnlyOnTheKernelsWithThem) {
  const auto with_mods = [](int64_t left, float softcap) {
    auto p = valid_params();
    p.sliding_window = left >= 0 ? 1 : 0;
    p.window_left = left >= 0 ? left : 0;
    p.softcap = softcap;
    return p;
  };
  expect_modifier_kernels(with_mods(63, 0.f), "sliding window");
  expect_modifier_kernels(with_mods(-1, 30.f), "softcap");
  expect_modifier_kernels(with_mods(63, 30.f), "sliding window");
  // Decoding shapes too: splitkv_sm80 has no modifiers, mma_sm80 takes them before the reference kernel.
  auto decode = with_mods(255, 0.f);
  decode.seqlen_q = 1;
  decode.seqlen_k = 4096;
  evosdpa_params_set_bhsd_strides(&decode);
  EXPECT_EQ(name_of(select_any_arch(decode, device(8, 0, 163 * 1024), "auto")), "mma_sm80");
}

// The fast kernels' softcaps (validation.hpp, check_fast_softcap): up to kMaxFastSoftcap, and not so small
// that 2 scale log2(e) / c overflows float; beyond either, "auto" runs the reference kernel, which takes
// any finite softcap (the fast kernels gave O = NaN at c = 3e38 and at c = 1e-40 with a zero score, and
// O off by 0.42 at c = 1e7, on an H200).
TEST(Selection, SoftcapsTheFastKernelsCannotComputeGoToTheReferenceKernel) {
  for (auto dev : {device(8, 0, 163 * 1024), h100()}) {
    auto p = valid_params();
    p.softcap = kMaxFastSoftcap;
    EXPECT_EQ(name_of(select_any_arch(p, dev, "auto")), dev.cc_major == 9 ? "wgmma_sm90" : "mma_sm80");
    for (float c : {2049.f, 1e7f, 3e38f, 1e-40f}) {
      p.softcap = c;
      ASSERT_TRUE(validate_params(p).ok()) << c;  // a valid softcap: only these kernels cannot run it
      for (const char* fast : {"wgmma_sm90", "mma_sm80"}) {
        if (dev.cc_major != 9 && std::string(fast) == "wgmma_sm90") continue;
        const Selection s = select_any_arch(p, dev, fast);
        EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED) << fast << " " << c;
        EXPECT_NE(s.check.message.find("softcap"), std::string::npos) << s.check.message;
        EXPECT_NE(s.check.message.find("reference runs it"), std::string::npos) << s.check.message;
      }
      EXPECT_EQ(name_of(select_any_arch(p, dev, "auto")), "reference") << c;
    }
    // 1e-40 with a scale that keeps the factor a float (2 * 1e-36 * log2(e) / 1e-40 ~ 2.9e4): fast.
    p.softcap = 1e-40f;
    p.softmax_scale = 1e-36f;
    EXPECT_EQ(name_of(select_any_arch(p, dev, "auto")), dev.cc_major == 9 ? "wgmma_sm90" : "mma_sm80");
  }
}

// A mask tensor (evosdpa.h): splitkv_sm80 refuses it; "auto" takes wgmma_sm90 on Hopper and mma_sm80
// elsewhere, also with a sliding window and a softcap, and on Hopper mma_sm80 for what wgmma_sm90 does
// not take but it does (a mask not 16-byte aligned but aligned to an element pair, a zero scale), the
// reference kernel for the rest (a mask not aligned to a pair).
TEST(Selection, MaskTensorsRunOnlyOnTheKernelsWithThem) {
  auto p = valid_params();
  p.mask = reinterpret_cast<const void*>(uintptr_t{0x50000000});
  p.mask_type = EVOSDPA_MASK_ADDITIVE;
  p.mask_seq_stride = 512;
  expect_modifier_kernels(p, "mask");
  const DeviceInfo h100 = ::h100();
  auto odd = p;
  odd.mask_seq_stride = 516;  // rows 1,032 bytes apart: element pairs aligned, 16-byte chunks not
  EXPECT_EQ(name_of(select_any_arch(odd, h100, "auto")), "mma_sm80");
  EXPECT_EQ(select_any_arch(odd, h100, "wgmma_sm90").check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  odd.mask_seq_stride = 515;  // not even pairs
  EXPECT_EQ(name_of(select_any_arch(odd, h100, "auto")), "reference");
  EXPECT_EQ(name_of(select_any_arch(odd, device(8, 0, 163 * 1024), "auto")), "reference");
  auto unscaled = p;  // wgmma_sm90 preloads the mask over the scale; mma_sm80 applies it after the scale
  unscaled.softmax_scale = 0.f;
  EXPECT_EQ(name_of(select_any_arch(unscaled, h100, "auto")), "mma_sm80");
  auto windowed = p;
  windowed.sliding_window = 1;
  windowed.window_left = 64;
  EXPECT_EQ(name_of(select_any_arch(windowed, h100, "auto")), "wgmma_sm90");
  EXPECT_EQ(name_of(select_any_arch(windowed, device(8, 0, 163 * 1024), "auto")), "mma_sm80");
  auto capped = windowed;  // Gemma 2's local layers on a padded batch
  capped.softcap = 50.f;
  EXPECT_EQ(name_of(select_any_arch(capped, h100, "auto")), "wgmma_sm90");
  EXPECT_EQ(name_of(select_any_arch(capped, device(8, 0, 163 * 1024), "auto")), "mma_sm80");
  auto global = p;  // Gemma 2's global layers
  global.softcap = 50.f;
  EXPECT_EQ(name_of(select_any_arch(global, h100, "auto")), "wgmma_sm90");
  auto bools = p;  // bytes: 16-byte chunks of rows 16 bytes apart on Hopper, byte pairs on mma_sm80
  bools.mask_type = EVOSDPA_MASK_BOOL;
  bools.mask = reinterpret_cast<const void*>(uintptr_t{0x50000010});
  bools.mask_seq_stride = 528;
  EXPECT_EQ(name_of(select_any_arch(bools, h100, "auto")), "wgmma_sm90");
  bools.mask = reinterpret_cast<const void*>(uintptr_t{0x50000008});
  EXPECT_EQ(name_of(select_any_arch(bools, h100, "auto")), "mma_sm80");
  bools.mask = reinterpret_cast<const void*>(uintptr_t{0x50000001});
  EXPECT_EQ(name_of(select_any_arch(bools, h100, "auto")), "reference");
}

// ALiBi (evosdpa.h): splitkv_sm80 refuses it, "auto" takes wgmma_sm90 on Hopper and mma_sm80 elsewhere;
// on Hopper, what wgmma_sm90 does not take goes to mma_sm80 (a zero scale) or the reference kernel (ALiBi
// with a window or softcap). With a mask tensor (BLOOM's padded batches) it stays on the fast kernels.
TEST(Selection, AlibiRunsOnlyOnTheKernelsWithIt) {
  auto p = valid_params();
  p.alibi_slopes = reinterpret_cast<const float*>(uintptr_t{0x50000004});  // floats: 4-byte alignment is enough
  expect_modifier_kernels(p, "ALiBi");
  const DeviceInfo h100 = ::h100();
  // Alone on mma_sm80 too: with a softcap, the reference kernel everywhere.
  auto both = p;
  both.softcap = 30.f;
  EXPECT_NE(select_any_arch(both, device(8, 0, 163 * 1024), "mma_sm80").check.message.find("ALiBi with"),
            std::string::npos);
  EXPECT_EQ(name_of(select_any_arch(both, device(8, 0, 163 * 1024), "auto")), "reference");
  auto unscaled = p;  // wgmma_sm90 preloads the bias over the scale; mma_sm80 adds it after the scale
  unscaled.softmax_scale = 0.f;
  EXPECT_EQ(name_of(select_any_arch(unscaled, h100, "auto")), "mma_sm80");
  auto capped = p;
  capped.softcap = 30.f;
  EXPECT_EQ(name_of(select_any_arch(capped, h100, "auto")), "reference");
  EXPECT_NE(select_any_arch(capped, h100, "wgmma_sm90").check.message.find("ALiBi with"), std::string::npos);
  auto masked = p;
  masked.mask = reinterpret_cast<const void*>(uintptr_t{0x60000000});
  masked.mask_type = EVOSDPA_MASK_BOOL;
  masked.mask_seq_stride = 512;
  EXPECT_EQ(name_of(select_any_arch(masked, h100, "auto")), "wgmma_sm90");
  EXPECT_EQ(name_of(select_any_arch(masked, device(8, 0, 163 * 1024), "auto")), "mma_sm80");
  masked.softmax_scale = 0.f;  // wgmma_sm90 preloads both biases over the scale
  EXPECT_EQ(name_of(select_any_arch(masked, h100, "auto")), "mma_sm80");
}

// wgmma_sm90 multiplies a bias by log2(e) / scale_log2: a (subnormal) scale below about 2e-39 makes that
// infinite and a zero bias NaN, so it refuses such scales as it refuses 0 (mma_sm80 adds the bias after the
// scale); a small normal scale stays.
TEST(Selection, WgmmaRefusesABiasOverAScaleWithAnInfiniteReciprocal) {
  const DeviceInfo h100 = ::h100();
  auto masked = valid_params();
  masked.mask = reinterpret_cast<const void*>(uintptr_t{0x60000000});
  masked.mask_type = EVOSDPA_MASK_ADDITIVE;
  masked.mask_seq_stride = 512;
  auto alibi = valid_params();
  alibi.alibi_slopes = reinterpret_cast<const float*>(uintptr_t{0x50000004});
  for (evosdpa_params_t p : {masked, alibi}) {
    p.softmax_scale = 1e-39f;
    const Selection s = select_any_arch(p, h100, "wgmma_sm90");
    EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
    EXPECT_NE(s.check.message.find("softmax_scale whose reciprocal is infinite"), std::string::npos) << s.check.message;
    EXPECT_EQ(name_of(select_any_arch(p, h100, "auto")), "mma_sm80");
    p.softmax_scale = -1e-39f;
    EXPECT_EQ(name_of(select_any_arch(p, h100, "auto")), "mma_sm80");
    p.softmax_scale = 1e-30f;
    EXPECT_EQ(name_of(select_any_arch(p, h100, "auto")), "wgmma_sm90");
  }
}

TEST(Selection, AutoPicksTensorCoresOnSm80AndNewer) {
  for (auto dev : {device(8, 0, 163 * 1024), device(8, 6, 99 * 1024), device(8, 9, 99 * 1024), device(9, 0)}) {
    for (int64_t d : {64, 128}) {
      const auto s = select_any_arch(valid_params(2, 8, 1000, 777, d), dev, "auto");
      ASSERT_TRUE(s.check.ok()) << s.check.message;
      EXPECT_EQ(name_of(s), dev.cc_major == 9 ? "wgmma_sm90" : "mma_sm80");
    }
  }
  EXPECT_EQ(name_of(select_any_arch(valid_params(), device(9, 0), nullptr)), "wgmma_sm90");
  EXPECT_EQ(name_of(select_any_arch(valid_params(), device(9, 0), "")), "wgmma_sm90");
}

// FP8 inputs on devices with FP8 tensor cores (sm_89 and newer): "auto" takes wgmma_sm90 on Hopper at
// D = 128 and mma_fp8_sm89 otherwise (the reference runs them by name); the other families say why they
// refuse; sm_80/86 refuse FP8 altogether.
TEST(Selection, Fp8InputsRunOnTheFp8KernelsFromSm89AndAreRefusedOnSm80) {
  auto p = valid_params();
  p.dtype = EVOSDPA_DTYPE_FLOAT8_E4M3;
  p.q_descale = p.k_descale = p.v_descale = reinterpret_cast<const float*>(uintptr_t{0x50000000});
  for (auto dev : {device(8, 9, 99 * 1024), device(9, 0)}) {
    dev.sm_count = 132;  // (2,8,512,64): 64 CTAs of the FP8 wgmma row, under half of an H100
    const auto s = select_any_arch(p, dev, "auto");
    ASSERT_TRUE(s.check.ok()) << s.check.message;
    EXPECT_EQ(name_of(s), "mma_fp8_sm89");
    EXPECT_TRUE(select_any_arch(p, dev, "reference").check.ok());
    const auto named = select_any_arch(p, dev, "mma_fp8_sm89");
    EXPECT_TRUE(named.check.ok()) << named.check.message;
    EXPECT_EQ(named.variant, evosdpa::detail::mma_fp8::config_index(64));
    const auto sm80 = select_any_arch(p, dev, "mma_sm80");
    EXPECT_EQ(sm80.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
    EXPECT_NE(sm80.check.message.find("FP8 (E4M3) inputs are not supported yet"), std::string::npos)
        << sm80.check.message;
    if (dev.cc_major != 9) continue;  // wgmma_sm90 is refused for the arch first
    // By name, D = 64 runs on the E4M3 D = 64 row; "auto" leaves this small grid (16 CTAs) to
    // mma_fp8_sm89, as it does for 16-bit D = 64.
    const auto wg64 = select_any_arch(p, dev, "wgmma_sm90");
    ASSERT_TRUE(wg64.check.ok()) << wg64.check.message;
    EXPECT_TRUE(evosdpa::detail::wgmma_sm90::kConfigs[wg64.variant / 4].fp8);
    EXPECT_EQ(evosdpa::detail::wgmma_sm90::kConfigs[wg64.variant / 4].head_dim, 64);
    auto big64 = valid_params(4, 32, 4096, 4096, 64);
    big64.dtype = EVOSDPA_DTYPE_FLOAT8_E4M3;
    big64.q_descale = big64.k_descale = big64.v_descale = p.q_descale;
    EXPECT_EQ(name_of(select_any_arch(big64, dev, "auto")), "wgmma_sm90");
    auto d128 = valid_params(2, 8, 512, 512, 128);
    d128.dtype = EVOSDPA_DTYPE_FLOAT8_E4M3;
    d128.q_descale = d128.k_descale = d128.v_descale = p.q_descale;
    const auto s128 = select_any_arch(d128, dev, "auto");
    ASSERT_TRUE(s128.check.ok()) << s128.check.message;
    EXPECT_EQ(name_of(s128), "wgmma_sm90");
    EXPECT_TRUE(evosdpa::detail::wgmma_sm90::kConfigs[s128.variant / 4].fp8);
  }
  for (auto dev : {device(8, 0, 163 * 1024), device(8, 6, 99 * 1024)}) {
    const auto s = select_any_arch(p, dev, "auto");
    EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
    EXPECT_NE(s.check.message.find("reference: FP8 (E4M3) inputs need compute capability 8.9"), std::string::npos)
        << s.check.message;
    EXPECT_NE(s.check.message.find("mma_fp8_sm89: needs compute capability 8.9"), std::string::npos)
        << s.check.message;
  }
  // 16-bit inputs by the FP8 family's name: refused, saying why.
  const auto s = select_any_arch(valid_params(), device(9, 0), "mma_fp8_sm89");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("FP8 (E4M3) inputs only"), std::string::npos) << s.check.message;
  // Its alignment rule: 16-byte rows (16 E4M3 elements for Q, K, V; 8 fp16 for O).
  auto odd = p;
  odd.k_seq_stride = 72;
  const auto r = select_any_arch(odd, device(9, 0), "mma_fp8_sm89");
  EXPECT_NE(r.check.message.find("k seq stride 72 is not a multiple of 16 elements"), std::string::npos)
      << r.check.message;
}

// FP8 on an H100 (132 SMs): the three-consumer E4M3 rows (192-row items; 96-key tiles at D = 128) where
// their items fill the waves, the two-consumer ones for small grids and short causal rows, as measured
// on an H200 (wgmma_config.hpp, docs/perf-log.md v13.23).
TEST(Selection, Fp8TakesTheThreeConsumerRowsWhereTheirItemsFillTheWaves) {
  const auto consumers = [](int d, long long bh, long long l, bool causal) {
    const auto c = wgmma_sm90::choose_config(d, bh, l, l, causal, 132, /*fp8=*/true);
    EXPECT_TRUE(wgmma_sm90::kConfigs[c.row].fp8);
    EXPECT_EQ(wgmma_sm90::kConfigs[c.row].head_dim, d);
    return wgmma_sm90::kConfigs[c.row].consumers;
  };
  EXPECT_EQ(consumers(128, 4 * 16, 4096, false), 3);   // 600 us against 697
  EXPECT_EQ(consumers(128, 16 * 16, 1024, false), 3);  // 188 against 194
  EXPECT_EQ(consumers(128, 32 * 16, 512, false), 2);   // 108.9 against 114.4
  EXPECT_EQ(consumers(128, 1 * 8, 512, false), 2);     // graph replay 11.5 against 14.2
  EXPECT_EQ(consumers(128, 4 * 16, 4096, true), 3);    // 357 against 377
  EXPECT_EQ(consumers(128, 16 * 16, 1024, true), 2);
  EXPECT_EQ(consumers(64, 4 * 32, 4096, false), 3);    // 960 against 1,135
  EXPECT_EQ(consumers(64, 32 * 32, 512, false), 3);    // 160 against 181
  EXPECT_EQ(consumers(64, 1 * 8, 512, false), 2);
  EXPECT_EQ(consumers(64, 8 * 32, 2048, true), 3);     // 299 against 336
  EXPECT_EQ(consumers(64, 32 * 32, 512, true), 2);
  EXPECT_EQ(consumers(64, 16 * 32, 1024, true), 2);
}

TEST(Selection, AutoLeavesFewClusteredD64ItemsToTheSmallGridVariant) {
  const DeviceInfo h100 = ::h100();
  // (1, 8, 512, 64): 64 items of 64 rows, each CTA's two consumers splitting its 4 K/V tiles.
  auto p = valid_params(1, 8, 512, 512, 64);
  Selection s = select_any_arch(p, h100, "auto");
  EXPECT_EQ(name_of(s), "wgmma_sm90");
  EXPECT_TRUE(wgmma_sm90::kConfigs[wgmma_sm90::Choice::of_variant(s.variant).row].split_keys);
  // (1, 1, 64, 65536): one item, its 512 tiles split over a cluster of 8: 8 CTAs, less than half a wave;
  // mma_sm80's small-grid variant runs it (v8.4).
  auto small = valid_params(1, 1, 64, 65536, 64);
  s = select_any_arch(small, h100, "wgmma_sm90");
  EXPECT_EQ(wgmma_sm90::Choice::of_variant(s.variant).splits, 8);
  EXPECT_EQ(name_of(select_any_arch(small, h100, "auto")), "mma_sm80");
  EXPECT_EQ(name_of(select_any_arch(small, h100, "wgmma_sm90")), "wgmma_sm90");  // by name it runs
  // 4 x 16 x 4096 rows: 2048 CTAs.
  EXPECT_EQ(name_of(select_any_arch(valid_params(4, 16, 4096, 4096, 128), h100, "auto")), "wgmma_sm90");
  // A family passed over is still the answer when no later one supports the call: here, none follows.
  KernelFamily wgmma = *find_family("wgmma_sm90");
  wgmma.cuda_archs = "90a";
  const KernelFamily* only[] = {&wgmma};
  const Selection alone = select_kernel(small, h100, "auto", FamilyTable{only, 1});
  ASSERT_TRUE(alone.check.ok()) << alone.check.message;
  EXPECT_EQ(name_of(alone), "wgmma_sm90");
}

TEST(Selection, WgmmaNeedsHopperAndTmaStrides) {
  auto p = valid_params(4, 16, 4096, 4096, 128);
  auto s = select_any_arch(p, device(8, 0, 163 * 1024), "wgmma_sm90");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("Hopper"), std::string::npos) << s.check.message;
  p.k_batch_stride = p.v_batch_stride = 0;  // broadcast K/V: TMA strides must be non-zero
  s = select_any_arch(p, device(9, 0), "wgmma_sm90");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("k batch stride 0"), std::string::npos) << s.check.message;
  EXPECT_EQ(name_of(select_any_arch(p, device(9, 0), "auto")), "mma_sm80");
}

TEST(Selection, OldDeviceIsRefused) {
  const auto s = select_kernel(valid_params(), device(7, 5), "auto");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_DEVICE);
  EXPECT_NE(s.check.message.find("7.5"), std::string::npos) << s.check.message;
}

TEST(Selection, NamedKernelRuns) {
  const auto s = select_any_arch(valid_params(), device(9, 0), "reference");
  ASSERT_TRUE(s.check.ok());
  EXPECT_EQ(name_of(s), "reference");
}

TEST(Selection, UnknownKernelNameListsKnownOnes) {
  const auto s = select_kernel(valid_params(), device(9, 0), "turbo");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_INVALID_ARGUMENT);
  for (const KernelFamily* f : registry())
    EXPECT_NE(s.check.message.find(f->name), std::string::npos) << s.check.message;
  EXPECT_NE(s.check.message.find("auto"), std::string::npos) << s.check.message;
}

TEST(Selection, MisalignedForTensorCoresFallsBackOrRefuses) {
  auto p = valid_params();
  p.q = reinterpret_cast<const char*>(p.q) + 2;  // element-aligned, not 16-byte aligned
  auto s = select_any_arch(p, device(9, 0), "auto");
  ASSERT_TRUE(s.check.ok()) << s.check.message;
  EXPECT_EQ(name_of(s), "reference");
  s = select_any_arch(p, device(9, 0), "mma_sm80");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("q is not 16-byte aligned"), std::string::npos) << s.check.message;

  p = valid_params();
  p.k_seq_stride = 68;  // 136 bytes: rows not a multiple of 16 bytes apart
  s = select_any_arch(p, device(9, 0), "mma_sm80");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("k seq stride 68 is not a multiple of 8 elements (16 bytes)"), std::string::npos)
      << s.check.message;
  EXPECT_EQ(name_of(select_any_arch(p, device(9, 0), "auto")), "reference");
}

TEST(Selection, StridesOfSizeOneDimsDoNotMatter) {
  auto p = valid_params(1, 8, 512, 512, 64);
  p.q_batch_stride = 3;  // batch 1: never used
  for (const char* kernel : {"wgmma_sm90", "mma_sm80"})
    EXPECT_EQ(name_of(select_any_arch(p, device(9, 0), kernel)), kernel);
}

TEST(Selection, SharedMemoryLimit) {
  auto dev = device(8, 0);
  for (evosdpa_dtype_t dtype : {EVOSDPA_DTYPE_FLOAT16, EVOSDPA_DTYPE_BFLOAT16}) {
    auto p = valid_params(1, 1, 64, 64, 128);
    p.dtype = dtype;
    const auto ok = select_any_arch(p, dev, "mma_sm80");
    ASSERT_TRUE(ok.check.ok()) << ok.check.message;
    const long long need =
        mma_sm80::kConfigs[ok.variant].smem_bytes(static_cast<int>(evosdpa_dtype_size(dtype)));
    dev.max_smem_per_block_optin = need - 1;
    const auto s = select_any_arch(p, dev, "mma_sm80");
    EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
    EXPECT_NE(s.check.message.find("needs " + std::to_string(need) + " bytes of shared memory"), std::string::npos)
        << s.check.message;
    EXPECT_EQ(name_of(select_any_arch(p, dev, "auto")), "reference");
    dev.max_smem_per_block_optin = need;
    EXPECT_EQ(name_of(select_any_arch(p, dev, "auto")), "mma_sm80");
  }
}

TEST(Selection, SharedMemoryScalesWithElementSize) {
  for (const mma_sm80::TileConfig& c : mma_sm80::kConfigs) {
    EXPECT_EQ(c.smem_bytes(), c.smem_bytes(2));
    EXPECT_EQ(c.smem_bytes(4), 2 * c.smem_bytes(2));
  }
}

TEST(Selection, SmallGridsTakeTheSmallGridVariant) {
  for (int64_t d : {64, 128}) {
    auto dev = device(9, 0);
    dev.sm_count = 132;
    // This model's rows (its tuned table's where it has them: sm90_132.inc has a small-grid row at D=64).
    const int big = mma_sm80::bucket_row(mma_sm80::kTunedRows, static_cast<int>(d), false, 90, 132);
    const int small = mma_sm80::bucket_row(mma_sm80::kTunedRows, static_cast<int>(d), true, 90, 132);
    ASSERT_GE(small, 0);
    EXPECT_TRUE(mma_sm80::kConfigs[small].small_grid);
    EXPECT_LT(mma_sm80::kConfigs[small].block_m(), mma_sm80::kConfigs[big].block_m());
    // B=1 H=8 L=512: 32 blocks of 128 rows on 132 SMs.
    auto s = select_any_arch(valid_params(1, 8, 512, 512, d), dev, "mma_sm80");
    ASSERT_TRUE(s.check.ok()) << s.check.message;
    EXPECT_EQ(s.variant, small);
    // On Hopper, "auto" runs them on wgmma_sm90: 64 items of 64 rows, each CTA's consumers splitting
    // the item's keys.
    s = select_any_arch(valid_params(1, 8, 512, 512, d), dev, "auto");
    EXPECT_EQ(name_of(s), "wgmma_sm90");
    EXPECT_TRUE(wgmma_sm90::kConfigs[wgmma_sm90::Choice::of_variant(s.variant).row].split_keys);
    // With 1024 keys too: a split of the 128-row items over clusters of 2 pays its merge (kMergeTiles).
    s = select_any_arch(valid_params(1, 8, 1024, 1024, d), dev, "auto");
    EXPECT_EQ(name_of(s), "wgmma_sm90");
    EXPECT_TRUE(wgmma_sm90::kConfigs[wgmma_sm90::Choice::of_variant(s.variant).row].split_keys);
    EXPECT_EQ(wgmma_sm90::Choice::of_variant(s.variant).splits, 1);
    // One head of 256 rows over 4096 keys: 2 items of 128 rows split over clusters of 8.
    s = select_any_arch(valid_params(1, 1, 256, 4096, d), dev, "wgmma_sm90");
    EXPECT_EQ(wgmma_sm90::Choice::of_variant(s.variant).splits, 8);
    // 128 items of 128 rows, unsplit (two splits would not fit at once): most of a wave.
    s = select_any_arch(valid_params(2, 8, 1024, 1024, d), dev, "auto");
    EXPECT_EQ(name_of(s), "wgmma_sm90");
    // B=2 H=8 L=2048: 256 blocks fill the SMs.
    s = select_any_arch(valid_params(2, 8, 2048, 2048, d), dev, "mma_sm80");
    EXPECT_EQ(s.variant, big);
  }
}

TEST(Selection, VariantChoiceDoesNotOverflow) {
  // batch * heads_q near 2^62 and 2^23 query blocks: their product passes 2^63; the default variant is
  // the answer (the grid check then refuses it).
  EXPECT_EQ(mma_sm80::choose_config(64, (1LL << 62) - 1, EVOSDPA_MAX_SEQLEN, 132, 80), mma_sm80::config_index(64, false));
  EXPECT_EQ(mma_sm80::choose_config(64, 1, 128, 132, 80), mma_sm80::config_index(64, true));
}

// A tuned table's row replaces the hand-made one of its bucket on its GPU model only (compute
// capability and SM count).
TEST(Selection, TunedRowsApplyToTheirGpuModelOnly) {
  using mma_sm80::TunedRow;
  const int big = mma_sm80::config_index(64, false), small = mma_sm80::config_index(64, true);
  mma_sm80::TileConfig as_default = mma_sm80::kConfigs[small];
  as_default.small_grid = false;  // not a row of kConfigs: no index, so only rows the build has may be named
  const TunedRow tuned[] = {{0, 0, mma_sm80::kConfigs[big]},
                            {90, 132, mma_sm80::kConfigs[big]},
                            {89, 58, mma_sm80::kConfigs[small]}};
  EXPECT_EQ(mma_sm80::bucket_row(tuned, 64, false, 90, 132), big);
  EXPECT_EQ(mma_sm80::bucket_row(tuned, 64, true, 89, 58), small);
  EXPECT_EQ(mma_sm80::bucket_row(tuned, 64, false, 90, 114), big);   // another SM count: hand-made
  EXPECT_EQ(mma_sm80::bucket_row(tuned, 128, false, 90, 132), mma_sm80::config_index(128, false));
  const TunedRow unknown[] = {{90, 132, as_default}};
  EXPECT_EQ(mma_sm80::bucket_row(unknown, 64, false, 90, 132), -1);
  // Every row of the build's tuned tables is compiled (a row of kConfigs) and valid.
  for (const TunedRow& t : mma_sm80::kTunedRows) {
    if (t.cc == 0) continue;
    EXPECT_GE(mma_sm80::row_index(t.config), 0);
    EXPECT_TRUE(mma_sm80::valid(t.config));
    EXPECT_EQ(mma_sm80::bucket_row(mma_sm80::kTunedRows, t.config.head_dim, t.config.small_grid, t.cc, t.sm_count),
              mma_sm80::row_index(t.config));
  }
}

TEST(Selection, GridLimit) {
  // 2^32 blocks of 128 rows, 2^37 of 4 rows: more than a 1-D grid holds.
  auto p = valid_params(65536, 65536, 128, 1, 64);
  // Tensors of 2^46 bytes: the fixture's addresses would make them overlap.
  p.q = reinterpret_cast<const void*>(uintptr_t{1} << 50);
  p.k = reinterpret_cast<const void*>(uintptr_t{2} << 50);
  p.v = reinterpret_cast<const void*>(uintptr_t{3} << 50);
  p.o = reinterpret_cast<void*>(uintptr_t{4} << 50);
  auto s = select_any_arch(p, device(9, 0), "auto");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("mma_sm80: batch * heads_q * ceil(seqlen_q / 128) exceeds"), std::string::npos)
      << s.check.message;
  EXPECT_NE(s.check.message.find("reference: batch * heads_q * seqlen_q exceeds"), std::string::npos)
      << s.check.message;
}

TEST(Selection, ValidationComesFirst) {
  auto p = valid_params();
  p.o = nullptr;
  const auto s = select_any_arch(p, device(9, 0), "mma_sm80");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_INVALID_ARGUMENT);
}

// ---- the build's CUDA targets against the device ---------------------------------------------------

TEST(SelectionArchs, FamilyBuiltForSm90RefusesSm80) {
  const Families built_for_90("90");
  auto s = select_kernel(valid_params(), device(8, 0), "mma_sm80", built_for_90.table());
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(s.check.message,
            "mma_sm80: built for sm_90 only; device 0 is sm_80 (rebuild with CMAKE_CUDA_ARCHITECTURES including 80)");
  // No family left for auto: NOT_SUPPORTED with every family's reason.
  s = select_kernel(valid_params(), device(8, 0), "auto", built_for_90.table());
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("mma_sm80: built for sm_90 only"), std::string::npos) << s.check.message;
  EXPECT_NE(s.check.message.find("reference: built for sm_90 only"), std::string::npos) << s.check.message;
  // The same build on the device it was made for.
  s = select_kernel(valid_params(), device(9, 0), "auto", built_for_90.table());
  ASSERT_TRUE(s.check.ok()) << s.check.message;
  EXPECT_EQ(name_of(s), "wgmma_sm90");
}

TEST(SelectionArchs, DeviceNamedInTheMessage) {
  const Families built("80-real,90-virtual");
  auto dev = device(8, 6);
  dev.ordinal = 3;
  EXPECT_TRUE(select_kernel(valid_params(), dev, "mma_sm80", built.table()).check.ok());  // sm_80 SASS on 8.6
  EXPECT_TRUE(select_kernel(valid_params(), device(10, 0), "mma_sm80", built.table()).check.ok());  // PTX 9.0
  const Families sm80_sass("80-real");
  const auto s = select_kernel(valid_params(), device(9, 0), "mma_sm80", sm80_sass.table());
  EXPECT_EQ(s.check.message,
            "mma_sm80: built for sm_80 SASS only; device 0 is sm_90 "
            "(rebuild with CMAKE_CUDA_ARCHITECTURES including 90)");
}

int g_probes = 0;
cudaError_t probe_no_image() { return ++g_probes, cudaErrorNoKernelImageForDevice; }
cudaError_t probe_has_image() { return ++g_probes, cudaSuccess; }
cudaError_t probe_broken() { return ++g_probes, cudaErrorInitializationError; }

TEST(SelectionArchs, UnreadableListOnAMadeUpDeviceNeverAsksCuda) {
  g_probes = 0;
  const Families native("native", probe_no_image);
  const auto s = select_kernel(valid_params(), device(8, 0), "auto", native.table());
  ASSERT_TRUE(s.check.ok()) << s.check.message;
  EXPECT_EQ(name_of(s), "mma_sm80");
  EXPECT_EQ(g_probes, 0);
}

TEST(SelectionArchs, UnreadableListOnARealDeviceAsksTheFamily) {
  auto dev = device(8, 0);
  dev.is_real = true;  // as api.cpp describes the current device; the probes here are fakes
  {
    g_probes = 0;
    const Families native("native", probe_has_image);
    const auto s = select_kernel(valid_params(), dev, "auto", native.table());
    ASSERT_TRUE(s.check.ok()) << s.check.message;
    EXPECT_EQ(name_of(s), "mma_sm80");
    EXPECT_EQ(g_probes, 2);  // splitkv_sm80 (supported, left to mma_sm80 by auto_prefers) and mma_sm80
  }
  {
    g_probes = 0;
    const Families all("all-major", probe_no_image);
    const auto s = select_kernel(valid_params(), dev, "mma_sm80", all.table());
    EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(s.check.message.find("mma_sm80: built for CMAKE_CUDA_ARCHITECTURES=all-major, which holds no code"), 0u)
        << s.check.message;
    EXPECT_NE(s.check.message.find("device 0 is sm_80"), std::string::npos) << s.check.message;
    EXPECT_NE(s.check.message.find("cudaErrorNoKernelImageForDevice"), std::string::npos) << s.check.message;
    EXPECT_NE(s.check.message.find("including 80"), std::string::npos) << s.check.message;
  }
  {
    // A family the arguments rule out is not probed.
    g_probes = 0;
    const Families native("native", probe_has_image);
    auto p = valid_params();
    p.q = reinterpret_cast<const char*>(p.q) + 2;
    EXPECT_EQ(name_of(select_kernel(p, dev, "auto", native.table())), "reference");
    EXPECT_EQ(g_probes, 1);
  }
  {
    // A probe that fails for another reason is a CUDA error, not a reason to fall back.
    g_probes = 0;
    const Families native("native", probe_broken);
    const auto s = select_kernel(valid_params(), dev, "auto", native.table());
    EXPECT_EQ(s.check.status, EVOSDPA_ERROR_CUDA);
    EXPECT_EQ(g_probes, 1);
  }
}

}  // namespace
