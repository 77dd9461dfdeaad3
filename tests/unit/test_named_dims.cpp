// The runtime's row indexing for named leading dims (fusegen_runtime.h): the fast division by
// the dims' sizes against integer division, and an input's row and a position against the
// coordinates of the op's row, on the 32-bit and the 64-bit paths. The kernels and the CPU
// plan both index with these functions.
#include "fusegen_runtime.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

TEST(NamedDims, FastDivisionIsExactFor32BitNumerators) {
  std::mt19937_64 rng(17);
  std::vector<uint32_t> divisors = {1,        2,          3,     5,       6,
                                    7,        32,         100,   127,     128,
                                    4096,     65535,      65536, 1000003, (1u << 31) - 1,
                                    1u << 31, 0xFFFFFFFFu};
  for (int k = 0; k < 50; ++k)
    divisors.push_back(static_cast<uint32_t>(rng() % 0xFFFFFFFFu) + 1);
  for (uint32_t d : divisors) {
    const fg::FastDiv f = fg::FastDiv::of(d);
    std::vector<uint32_t> ns = {
        0, 1, d - 1, d, d + 1, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu, 0xFFFFFFFFu - d};
    for (int k = 0; k < 200; ++k)
      ns.push_back(static_cast<uint32_t>(rng()));
    for (uint32_t n : ns)
      ASSERT_EQ(f.quotient(n), n / d) << n << " / " << d;
  }
}

// The named dims of the op [B, S, H] with B = 7, S = 5, H = 3 (as the glue fills them).
fg::NamedDims dimsBSH(bool rows32) {
  fg::NamedDims dims{};
  dims.size[0] = 5;
  dims.size[1] = 3;
  dims.div[0] = fg::FastDiv::of(5);
  dims.div[1] = fg::FastDiv::of(3);
  dims.batch = 7;
  dims.batchDiv = fg::FastDiv::of(7);
  dims.rows32 = rows32;
  return dims;
}

// Each row's (b, s, h), against the rows of inputs that have some of those dims (bit 0: S,
// bit 1: H, bit 2: the batch) and the positions along S and H.
TEST(NamedDims, MappedRowsAndPositionsFollowTheCoordinates) {
  for (bool rows32 : {true, false}) {
    const fg::NamedDims dims = dimsBSH(rows32);
    for (int64_t row = 0; row < 7 * 15; ++row) {
      const int64_t b = row / 15, s = row / 3 % 5, h = row % 3;
      EXPECT_EQ(fg::mappedRow<2>(0b001u, row, dims), s);         // [S, D]
      EXPECT_EQ(fg::mappedRow<2>(0b010u, row, dims), h);         // [H, D]
      EXPECT_EQ(fg::mappedRow<2>(0b011u, row, dims), s * 3 + h); // [S, H, D]
      EXPECT_EQ(fg::mappedRow<2>(0b101u, row, dims), b * 5 + s); // (batch and S)
      EXPECT_EQ(fg::mappedRow<2>(0b000u, row, dims), 0);         // broadcast over all
      EXPECT_EQ(fg::positionOf<2>(0b001u, row, dims), s);
      EXPECT_EQ(fg::positionOf<2>(0b010u, row, dims), h);
    }
  }
}

// orderedRow (the row plan's order where inputs lack some dims): for every set of kept dims, a
// bijection of the rows in which the rows agreeing on the kept dims are consecutive, in the op's
// order among themselves.
TEST(NamedDims, OrderedRowsBringRowsSharingTheKeptDimsTogether) {
  for (bool rows32 : {true, false}) {
    const fg::NamedDims dims = dimsBSH(rows32);
    const int64_t rows = 7 * 15;
    for (unsigned keep = 0; keep < 8; ++keep) {
      int64_t group = 1; // rows per value of the kept dims
      for (int i = 0; i < 3; ++i)
        if (!((keep >> i) & 1u)) group *= i == 0 ? 5 : i == 1 ? 3 : 7;
      std::vector<bool> seen(rows, false);
      for (int64_t index = 0; index < rows; ++index) {
        const int64_t row = fg::orderedRow<2>(keep, index, dims);
        ASSERT_GE(row, 0);
        ASSERT_LT(row, rows);
        EXPECT_FALSE(seen[row]) << "keep " << keep << ": row " << row << " twice";
        seen[row] = true;
        const int64_t first = fg::orderedRow<2>(keep, index / group * group, dims);
        EXPECT_EQ(fg::mappedRow<2>(keep, row, dims), fg::mappedRow<2>(keep, first, dims))
            << "keep " << keep << ", index " << index;
        if (index % group > 0) {
          EXPECT_GT(row, fg::orderedRow<2>(keep, index - 1, dims));
        }
      }
    }
    for (int64_t index = 0; index < rows; ++index) // all kept: the op's order
      EXPECT_EQ(fg::orderedRow<2>(7u, index, dims), index);
  }
}

} // namespace
