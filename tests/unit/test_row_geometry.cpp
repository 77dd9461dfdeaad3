// The row plan's geometry (templates/runtime/fusegen_row_geometry.h), checked on the host over
// the whole range of row lengths, with and without thread block clusters: every shape it picks
// is one the row kernel can run (a power of two of threads per row below a warp, whole warps
// from one on, within the plan's limits; blocks of at most 1024 threads, a row that fits the
// registers it claims, the smallest group and cluster that cover the row).
#include "fusegen_row_geometry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fusegen::test {
namespace {

using fg::cuda::RowShape;
using fg::cuda::RowTraits;

std::vector<int64_t> rowLengths() {
  std::vector<int64_t> ds;
  for (int64_t d = 1; d <= (int64_t(1) << 18); d *= 2)
    for (int64_t delta : {-1, 0, 1})
      if (d + delta >= 1) ds.push_back(d + delta);
  for (int64_t d : {2880, 5120, 13824, 151936, 129280})
    ds.push_back(d);
  return ds;
}

std::string where(const RowTraits& t, int64_t D, int V, bool aligned, int maxCluster) {
  return "words " + std::to_string(t.wordsPerItem) + (t.colSums ? ", ColSum" : "") + ", D " +
         std::to_string(D) + ", V " + std::to_string(V) + (aligned ? ", aligned" : "") +
         ", clusters up to " + std::to_string(maxCluster);
}

TEST(RowGeometry, EveryShapeIsOneTheKernelRuns) {
  for (bool colSums : {false, true})
    for (int words : {2, 4, 8, 16, 24, 40})
      for (int V : {8, 4, 2})
        for (int64_t D : rowLengths())
          for (bool aligned : {true, false})
            for (int maxCluster : {1, fg::cuda::kMaxPortableCluster}) {
              if (aligned && D % V != 0) continue;
              const RowTraits t{words, colSums};
              const RowShape g = fg::cuda::rowShape(t, D, V, aligned, maxCluster);
              const std::string at = where(t, D, V, aligned, maxCluster);
              EXPECT_EQ(g.vec, aligned ? V : 1) << at;
              EXPECT_TRUE(g.items == 0 || g.items == 1 || g.items == 2 || g.items == 4) << at;
              EXPECT_LE(g.items * words, 64) << at;
              // A power of 2 below a warp; whole warps from 32, a power of 2 of them for
              // re-read rows.
              if (g.group < 32 || g.items == 0) {
                EXPECT_EQ(g.group & (g.group - 1), 0) << at;
              } else {
                EXPECT_EQ(g.group % 32, 0) << at;
              }
              EXPECT_GE(g.group, fg::cuda::kMinGroup) << at;
              EXPECT_LE(g.group, fg::cuda::maxGroupFor(colSums, g.items)) << at;
              EXPECT_LE(g.group * g.rowsPerBlock, 1024) << at;
              EXPECT_EQ(g.cluster & (g.cluster - 1), 0) << at;
              EXPECT_GE(g.cluster, 1) << at;
              EXPECT_LE(g.cluster, maxCluster) << at;
              if (g.cluster > 1) { // clusters hold a long row in registers, a row per block
                EXPECT_GT(g.items, 0) << at;
                EXPECT_EQ(g.rowsPerBlock, 1) << at;
                EXPECT_GE(g.group, 32) << at;
              } else {
                EXPECT_EQ(g.rowsPerBlock, fg::cuda::rowsPerBlockFor(colSums, g.group, g.items, 1))
                    << at;
              }
              if (colSums && g.items != 1) { // only 1 item runs several ColSum rows a block
                EXPECT_EQ(g.rowsPerBlock, 1) << at;
              }
              const int64_t nv = (D + g.vec - 1) / g.vec;
              auto share = [&](int cluster) { return (nv + cluster - 1) / cluster; };
              const int64_t perBlock = share(g.cluster);
              if (g.items > 0) { // the row is held in registers: they cover it
                EXPECT_GE(int64_t(g.items) * g.group, perBlock) << at;
              }
              // The smallest cluster that fits the register budgets, else the smallest that
              // fits the registers: half of it would not.
              if (g.cluster > 1) {
                EXPECT_EQ(fg::cuda::itemsWithinBudget(t, share(g.cluster / 2)), 0) << at;
                if (fg::cuda::itemsWithinBudget(t, perBlock) == 0) {
                  EXPECT_EQ(fg::cuda::itemsWithinBudget(t, share(maxCluster)), 0) << at;
                  EXPECT_EQ(fg::cuda::itemsWithinRegisters(t, share(g.cluster / 2)), 0) << at;
                }
              }
              // The smallest group that covers the block's share: half of it would not, or
              // for rows held in registers one warp fewer (or it is the smallest the plan
              // allows, or the largest).
              const int64_t perThread = g.items > 0 ? g.items : 8;
              if (g.group > fg::cuda::kMinGroup &&
                  g.group < fg::cuda::maxGroupFor(colSums, g.items)) {
                const int smaller = g.group > 32 && g.items > 0 ? g.group - 32 : g.group / 2;
                EXPECT_LT(int64_t(smaller) * perThread, perBlock) << at;
              }
            }
}

// Rows held in registers that a power of 2 of threads would cover with idle threads take
// whole warps: D = 5120 bf16 is 640 vectors, 4 items each over 160 threads (not 256); 2880 is
// 360 vectors over 96 threads, two rows a block.
TEST(RowGeometry, RowsInRegistersTakeWholeWarps) {
  RowShape g = fg::cuda::rowShape({4, false}, 5120, 8, true); // softmax's forward, bf16
  EXPECT_EQ(g.items, 4);
  EXPECT_EQ(g.group, 160);
  EXPECT_EQ(g.rowsPerBlock, 1);
  g = fg::cuda::rowShape({4, false}, 2880, 8, true);
  EXPECT_EQ(g.items, 4);
  EXPECT_EQ(g.group, 96);
  EXPECT_EQ(g.rowsPerBlock, 2);
  g = fg::cuda::rowShape({4, false}, 13824, 8, true);
  EXPECT_EQ(g.items, 4);
  EXPECT_EQ(g.group, 448);
}

// A row's random numbers are kept with it where it still fits (dropout_add_rmsnorm's forward,
// bf16: 8 words of inputs and 8 of numbers per item), else it is held without them.
TEST(RowGeometry, RandomNumbersAreKeptWhereTheRowStillFits) {
  RowShape g = fg::cuda::rowShape({8, false, 8}, 4096, 8, true);
  EXPECT_EQ(g.items, 1); // 16 words: 1 item x 512 threads
  EXPECT_EQ(g.group, 512);
  g = fg::cuda::rowShape({8, false, 8}, 8192, 8, true);
  EXPECT_EQ(g.items, 2); // 1 item of 16 words covers 512 vectors of 1024: held without them
  EXPECT_EQ(g.group, 512);
  g = fg::cuda::rowShape({8, false, 8}, 4100, 8, false);
  EXPECT_EQ(g.items, 0); // unaligned rows are re-read either way
}

// The shapes the H100 sweeps tuned (see the header) come out as tuned.
TEST(RowGeometry, TunedShapesStay) {
  RowShape g = fg::cuda::rowShape({4, false}, 4096, 8, true); // softmax's forward, bf16
  EXPECT_EQ(g.items, 4);
  EXPECT_EQ(g.group, 128);
  EXPECT_EQ(g.rowsPerBlock, 2);
  g = fg::cuda::rowShape({8, false}, 4096, 8, true); // add_rmsnorm's forward: 8 words
  EXPECT_EQ(g.items, 2);
  EXPECT_EQ(g.group, 256);
  g = fg::cuda::rowShape({16, true}, 4096, 8, true); // rmsnorm's backward: [D] sums
  EXPECT_EQ(g.items, 2);
  EXPECT_EQ(g.group, 256);
  EXPECT_EQ(g.rowsPerBlock, 1);
  g = fg::cuda::rowShape({24, true}, 8192, 8, true); // layernorm's backward at 8192
  EXPECT_EQ(g.items, 1);
  EXPECT_EQ(g.group, 1024);
  g = fg::cuda::rowShape({4, false}, 4100, 8, false); // unaligned: re-read per pass
  EXPECT_EQ(g.items, 0);
  EXPECT_EQ(g.vec, 1);
}

// Short rows share a warp: D = 64 and 128 bf16 (8 and 16 vectors) take 8 and 16 lanes, 4 and
// 2 rows a warp, instead of a warp each with 24 or 16 lanes idle.
TEST(RowGeometry, ShortRowsShareAWarp) {
  RowShape g = fg::cuda::rowShape({4, false}, 64, 8, true);
  EXPECT_EQ(g.group, 8);
  EXPECT_EQ(g.items, 1);
  EXPECT_EQ(g.rowsPerBlock, 32);
  g = fg::cuda::rowShape({4, false}, 128, 8, true);
  EXPECT_EQ(g.group, 16);
  EXPECT_EQ(g.rowsPerBlock, 16);
  // So do backwards with [D] sums: their blocks add the rows' column sums at the end.
  g = fg::cuda::rowShape({16, true}, 64, 8, true);
  EXPECT_EQ(g.group, 8);
  EXPECT_EQ(g.rowsPerBlock, 32);
  g = fg::cuda::rowShape({16, true}, 1024, 8, true);
  EXPECT_EQ(g.items, 1);
  EXPECT_EQ(g.group, 128);
  EXPECT_EQ(g.rowsPerBlock, 2);
}

// ColSum rows longer than a block holds within its register budget are split over a cluster
// of blocks, the fewest that hold it: rmsnorm's backward at D = 16384 bf16 (16 words per
// item) takes 2 blocks of 2 x 512 instead of one of 4 x 512 at 64 words (spilling), at 65536
// 8 blocks of 2 x 512. Without clusters
// (maxCluster 1), beyond 8 blocks, or for programs without ColSum outputs (measured faster
// re-read, also where a block could hold the row over the register budget), the row is
// re-read per pass by one block.
TEST(RowGeometry, LongRowsSplitOverClusters) {
  const int maxCluster = fg::cuda::kMaxPortableCluster;
  RowShape g = fg::cuda::rowShape({16, true}, 16384, 8, true, maxCluster);
  EXPECT_EQ(g.cluster, 2);
  EXPECT_EQ(g.items, 2);
  EXPECT_EQ(g.group, 512);
  g = fg::cuda::rowShape({16, true}, 16384, 8, true, 1);
  EXPECT_EQ(g.cluster, 1);
  EXPECT_EQ(g.items, 4);
  g = fg::cuda::rowShape({16, true}, 65536, 8, true, maxCluster);
  EXPECT_EQ(g.cluster, 8);
  EXPECT_EQ(g.items, 2);
  g = fg::cuda::rowShape({16, true}, 262144, 8, true, maxCluster);
  EXPECT_EQ(g.cluster, 1);
  EXPECT_EQ(g.items, 0);
  g = fg::cuda::rowShape({8, false}, 16384, 8, true, maxCluster); // over a forward's budget
  EXPECT_EQ(g.cluster, 1);
  EXPECT_EQ(g.items, 0);
  g = fg::cuda::rowShape({4, false}, 32768, 8, true, maxCluster); // a forward: re-read
  EXPECT_EQ(g.cluster, 1);
  EXPECT_EQ(g.items, 0);
  g = fg::cuda::rowShape({16, true}, 32768, 8, false, maxCluster); // unaligned
  EXPECT_EQ(g.cluster, 1);
  EXPECT_EQ(g.items, 0);
}

// RowTraits::maxItems (rowMaxItems: the variants that spill): no shape holds more items per
// thread than it allows, covering the row with more threads, more blocks of a cluster or, with
// none allowed, re-reading it.
TEST(RowGeometry, VariantsThatSpillAreNotChosen) {
  const int maxCluster = fg::cuda::kMaxPortableCluster;
  RowShape g = fg::cuda::rowShape({4, false, 0, 4}, 4096, 8, true, maxCluster);
  EXPECT_EQ(g.items, 4);
  EXPECT_EQ(g.group, 128);
  g = fg::cuda::rowShape({4, false, 0, 2}, 4096, 8, true, maxCluster);
  EXPECT_EQ(g.items, 2);
  EXPECT_EQ(g.group, 256);
  g = fg::cuda::rowShape({4, false, 0, 0}, 4096, 8, true, maxCluster);
  EXPECT_EQ(g.items, 0);
  g = fg::cuda::rowShape({16, true, 0, 1}, 16384, 8, true, maxCluster);
  EXPECT_EQ(g.items, 1);
  EXPECT_EQ(g.cluster, 2);
  for (int most : {0, 1, 2, 4})
    for (bool colSums : {false, true})
      for (int64_t D : rowLengths()) {
        const RowShape s = fg::cuda::rowShape({8, colSums, 0, most}, D, 8, D % 8 == 0, maxCluster);
        EXPECT_LE(s.items, most) << "D " << D << ", at most " << most << " items";
      }
}

// A row re-read once (RowTraits::readOnce: an online max-and-sum, no [..., D] outputs) takes
// kReadOnceGroup threads, several rows per block; the others grow the group to cover it.
TEST(RowGeometry, RowsReadOnceTakeFewThreads) {
  RowShape g = fg::cuda::rowShape({4, false, 0, 4, true}, 32000, 8, true, 1);
  EXPECT_EQ(g.items, 0);
  EXPECT_EQ(g.group, fg::cuda::kReadOnceGroup);
  EXPECT_EQ(g.rowsPerBlock, 256 / fg::cuda::kReadOnceGroup);
  g = fg::cuda::rowShape({4, false, 0, 4, false}, 32000, 8, true, 1);
  EXPECT_EQ(g.items, 0);
  EXPECT_EQ(g.group, 512);
  g = fg::cuda::rowShape({4, false, 0, 4, true}, 4096, 8, true, 1); // held: unchanged
  EXPECT_EQ(g.items, 4);
  EXPECT_EQ(g.group, 128);
}

} // namespace
} // namespace fusegen::test
