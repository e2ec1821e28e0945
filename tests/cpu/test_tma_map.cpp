// The Hopper family's TMA map strides (kernels/wgmma/tma_map.hpp): a dimension of size 1 gets a stride
// TMA accepts whatever the caller set, so that supports(), which checks only the dimensions longer than 1,
// and the encoding agree.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "kernels/wgmma/tma_map.hpp"

namespace {

using evosdpa::detail::wgmma_sm90::TensorGeometry;
using evosdpa::detail::wgmma_sm90::tma_strides;
using Strides = std::array<cuuint64_t, 3>;  // seq, head, batch; bytes

TEST(TmaStrides, DimensionsLongerThanOneKeepTheirStrides) {
  // BSHD q [2, 4, 300, 128] fp16.
  const TensorGeometry q{nullptr, 2, 4, 300, 128, 300 * 4 * 128, 128, 4 * 128};
  EXPECT_EQ(tma_strides(q, 2), (Strides{4 * 128 * 2, 128 * 2, 300 * 4 * 128 * 2}));
}

TEST(TmaStrides, SizeOneDimensionsSpanTheDimensionsInsideThem) {
  // torch.randn(2, D, 1, 1).permute(0, 2, 3, 1): [2, 1, 1, 64] with strides (64, 1, 1, 1), which torch
  // calls contiguous; the head and seq strides of 1 element are not multiples of 16 bytes.
  const TensorGeometry q{nullptr, 2, 1, 1, 64, 64, 1, 1};
  EXPECT_EQ(tma_strides(q, 2), (Strides{128, 128, 128}));
  // A mask [1, 1, 1, 100] bf16 (seqlen_q 1) with mask_seq_stride 100: its row of 200 bytes rounded up.
  const TensorGeometry mask{nullptr, 1, 1, 1, 100, 0, 0, 100};
  EXPECT_EQ(tma_strides(mask, 2), (Strides{208, 208, 208}));
  // A key padding mask [3, 1, 1, 999] of bytes, seq and head broadcast (stride 0, size 1 in the map).
  const TensorGeometry keys{nullptr, 3, 1, 1, 999, 1008, 0, 0};
  EXPECT_EQ(tma_strides(keys, 1), (Strides{1008, 1008, 1008}));
  // One batch entry of one head: every stride its own span.
  const TensorGeometry one{nullptr, 1, 1, 300, 128, 12345, 777, 128};
  EXPECT_EQ(tma_strides(one, 2), (Strides{256, 256 * 300, 256 * 300}));
}

// Whatever the size-1 dimensions' strides, the result is what TMA takes: non-zero multiples of 16 bytes
// (the longer dimensions' strides being such, as supports() requires).
TEST(TmaStrides, AreValidForTmaWhateverASizeOneDimensionsStride) {
  for (int64_t b : {1, 3})
    for (int64_t h : {1, 4})
      for (int64_t l : {1, 77})
        for (int64_t d : {64, 100, 128})
          for (int64_t junk : {0, 1, 3, 1000003}) {
            const int64_t row = (d + 7) / 8 * 8;  // 16-byte rows of 2-byte elements
            const TensorGeometry t{nullptr, b, h, l, d, b > 1 ? h * l * row : junk, h > 1 ? l * row : junk,
                                   l > 1 ? row : junk};
            for (const cuuint64_t s : tma_strides(t, 2)) {
              EXPECT_NE(s, 0u) << b << " " << h << " " << l << " " << d << " " << junk;
              EXPECT_EQ(s % 16, 0u) << b << " " << h << " " << l << " " << d << " " << junk;
            }
          }
}

}  // namespace
