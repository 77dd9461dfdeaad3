// fusegen row plan geometry: how many threads share a row, how many 128-bit vectors each of
// them keeps in registers, and how many rows a block runs, from a program's traits and the
// row length. Host only and free of CUDA, so it is unit-tested on any machine
// (tests/unit/test_row_geometry.cpp); fusegen_row_cuda.cuh adds the grid and the overrides.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace fg::cuda {

// At most 512 threads per row, with 64 registers per thread or fewer (rowThreadsPerSm in
// fusegen_row_cuda.cuh). (Letting the compiler use 128 halved the occupancy and made the
// backward 2.5x slower on the H100.) ColSum programs with one item per thread may use 1024
// threads, one block per SM: rows of up to 1024 vectors (8192 bf16) then stay in registers,
// where 2 items x 512 threads spilled (nvcc -Xptxas -v: 80 bytes for rmsnorm's backward, 252
// for add_rmsnorm's).
constexpr int kMaxGroup = 512;
constexpr int kMaxColSumGroup = 1024;
// Rows of fewer vectors than a warp has lanes take a power-of-two share of a warp, several
// rows per warp, so that no lane idles (D = 64 bf16: 8 lanes a row, 4 rows a warp); at least
// 4 lanes a row (D = 32 bf16).
constexpr int kMinGroup = 4;

// Blocks per thread block cluster that every device with clusters runs (CUDA's portable
// cluster size).
constexpr int kMaxPortableCluster = 8;

// What of a program the geometry depends on.
struct RowTraits {
  int wordsPerItem;       // 32-bit registers the row cache takes per item and thread
  bool colSums;           // the program has ColSum outputs
  int extraWordsPerItem = 0; // ... and its random numbers and typed elements, if kept (0: none)
  // The most items per thread whose compiled variant keeps its registers (rowMaxItems: the
  // budgets below count the row cache, not what the program holds besides, such as
  // cross_entropy_mean's 21 row values and 2 whole-tensor sums, which spilled 762 bytes per
  // thread with 4 items and ran 12x slower than re-read rows).
  int maxItems = 4;
  // A re-read row is read once: the program's passes are one shifted pair (online
  // max-and-sum) and it writes no [..., D] outputs (cross_entropy's and logsumexp's forwards).
  bool readOnce = false;
};

// Threads per re-read row of a readOnce program (RowTraits). On the H100 (bf16, ms, 16384 x
// 32000 / 8192 x 128256 / 4096 x 65536), cross_entropy's forward took 0.545 / 0.760 / 0.227
// with 512 threads per row, 0.383 / 0.720 / 0.203 with 64 (32: 0.375 / 0.722 / 0.202; 128:
// 0.393 / 0.726 / 0.207), logsumexp's 0.440 / 0.709 / 0.203 against 0.368 / 0.711 / 0.198:
// four rows per block of 256 threads keep more rows' loads in flight than a row per block of
// 512 that combines its threads' results before the next row starts. Programs that read the
// row again (softmax: 0.806 ms with 512, 1.035 with 256) or reduce it without shifting
// (kl_div: 0.675 against 0.699) keep the default.
constexpr int kReadOnceGroup = 64;

struct RowShape {
  int group;        // threads per row in each block (blockDim.x)
  int rowsPerBlock; // blockDim.y
  int items;        // vectors per thread kept in registers; 0: re-read per pass
  int vec;          // elements per vector
  int cluster;      // blocks sharing each row (a thread block cluster); 1: a block per row
};

constexpr int maxGroupFor(bool colSums, int items) {
  return colSums && items == 1 ? kMaxColSumGroup : kMaxGroup;
}

// Blocks of 256 threads: several rows per block where a row takes fewer threads. ColSum
// programs with one item per thread add the accumulators of the block's rows in shared memory
// at the end (their threads hold the same columns); the others take one row per block: re-read
// rows (items == 0) accumulate ColSums in place in the partials, and 2 or 4 items per thread
// only ever cover rows of 256 threads or more. So do rows split over a cluster of blocks.
constexpr int rowsPerBlockFor(bool colSums, int group, int items, int cluster) {
  return cluster > 1 || (colSums && items != 1) || group >= 256 ? 1 : 256 / group;
}

// Items per thread for a block's share of a row, nv vectors, within the register budgets
// measured on the H100 (bench/tune_rows.py; 2^27 bf16 elements, D = 1024/4096/8192;
// bench/results/2026-11-21-h100-d/tune-rows.md); 0 when no choice fits them.
// - Programs without ColSum outputs: the most of 4, 2, 1 whose cached words stay within 24
//   registers, covering the share with at most 512 threads and giving every thread of a warp
//   a full item. softmax's forward at D = 4096: 0.192 ms with 4 x 128, 0.199 with 2 x 256,
//   0.251 with 1 x 512; add_rmsnorm's (8 words per item): 0.362 with 2 x 256, 0.767 with
//   4 x 128, which spills.
// - ColSum programs (backwards with [D] gradients; a row per block, resident blocks): 2
//   items per thread where they take at most 32 words and the share has at least 256
//   threads, else 1 (up to 1024 threads). rmsnorm's backward (16 words; forward+backward
//   minus forward): 0.327 ms with 2 x 256 against 0.338 with 1 x 512 at D = 4096, 0.332 with
//   2 x 512 against 0.364 with 1 x 1024 at 8192, but 0.409 with 2 x 64 against 0.339 with
//   1 x 128 at 1024 (more blocks, more partial rows). layernorm's (24 words): 0.384 with
//   1 x 512 against 0.614 with 2 x 256; 0.413 with 1 x 1024 against 0.609 with 2 x 512.
inline int itemsWithinBudget(const RowTraits& t, int64_t nv) {
  if (t.colSums) {
    if (t.maxItems >= 2 && 2 * t.wordsPerItem <= 32 && nv >= 2 * 256 && 2 * kMaxGroup >= nv)
      return 2;
    if (t.maxItems >= 1 && t.wordsPerItem <= 64 && maxGroupFor(true, 1) >= nv)
      return 1;
    return 0;
  }
  for (int items : {4, 2, 1})
    if (items <= t.maxItems && items * t.wordsPerItem <= 24 &&
        static_cast<int64_t>(items) * kMaxGroup >= nv &&
        (items == 1 || items * 32 <= nv))
      return items;
  return 0;
}

// Over those budgets, for ColSum programs: the fewest items that cover the share within 64
// words; 0 if none does. Programs without ColSum outputs re-read such rows instead:
// add_rmsnorm's forward (8 words per item) held D = 16384 bf16 in 4 x 512 with 392 bytes of
// spill loads and ran at 46% of copy, where re-read rows ran at 62% (H100, 2^26 elements).
inline int itemsWithinRegisters(const RowTraits& t, int64_t nv) {
  if (!t.colSums)
    return 0;
  for (int items : {1, 2, 4})
    if (items <= t.maxItems && items * t.wordsPerItem <= 64 &&
        static_cast<int64_t>(items) * maxGroupFor(t.colSums, items) >= nv)
      return items;
  return 0;
}

// The shape of a row of D elements; `aligned`: every tensor read or written per element is
// 16-byte aligned and D a multiple of V (the elements of a 128-bit vector), else the row is
// read element by element and re-read per pass. `maxCluster`: the most blocks the device
// lets share a row (1 without thread block clusters).
//
// A ColSum program's row that one block cannot hold within the budgets is split over a
// cluster of 2, 4, ... blocks, each holding a share in its registers and combining its
// partial reductions with the others' through distributed shared memory: the smallest
// cluster that fits the budgets, else the smallest that fits the registers. On the H100
// (bf16, 2^26 elements, kernel time) that ran rmsnorm's backward 2.5x faster at D = 16384 to
// 65536 and layernorm's 2.5-3.2x; the forwards (no ColSum) ran 1-24% slower split than
// re-read by one block (softmax 229 us against 158 at 32768), so they are not split. Rows
// that are not held, or are unaligned, are re-read per pass (ITEMS == 0) by one block, which
// was 1.3-5x slower wherever the row fit.
inline RowShape rowShape(const RowTraits& t, int64_t D, int V, bool aligned, int maxCluster = 1) {
  // A row whose random numbers and integer or bool elements are kept with it where it fits so
  // (drawn and read once, not once per pass: dropout_add_rmsnorm's forward at 16384 x 4096 bf16
  // ran at 79% of copy against 74%), else held without them, redrawn and re-read per pass (at
  // 8192 x 8192, 73% against 63% re-read).
  if (t.extraWordsPerItem > 0) {
    const RowTraits with{t.wordsPerItem + t.extraWordsPerItem, t.colSums, 0, t.maxItems,
                         t.readOnce};
    const RowShape s = rowShape(with, D, V, aligned, maxCluster);
    if (s.items > 0 || !aligned)
      return s;
    return rowShape(RowTraits{t.wordsPerItem, t.colSums, 0, t.maxItems, t.readOnce}, D, V,
                    aligned, maxCluster);
  }
  if (!t.colSums)
    maxCluster = 1;
  RowShape g{};
  g.vec = aligned ? V : 1;
  g.cluster = 1;
  const int64_t nv = (D + g.vec - 1) / g.vec;
  auto share = [&](int cluster) { return (nv + cluster - 1) / cluster; };
  if (aligned)
    for (auto fits : {itemsWithinBudget, itemsWithinRegisters})
      for (int cluster = 1; cluster <= maxCluster && g.items == 0; cluster *= 2) {
        g.items = fits(t, share(cluster));
        g.cluster = cluster;
      }
  if (g.items == 0)
    g.cluster = 1;
  const int64_t perThread = g.items > 0 ? g.items : 8;
  const int64_t perBlock = share(g.cluster);
  const int maxGroup = maxGroupFor(t.colSums, g.items);
  int group = kMinGroup;
  while (group < 32 && static_cast<int64_t>(group) * perThread < perBlock)
    group *= 2;
  // From a warp on, rows held in registers take the fewest whole warps that cover them, not
  // the next power of 2, whose last item would leave threads idle: D = 5120 bf16 (640
  // vectors, 4 items) takes 160 threads, not 256 with 96 idle. Re-read rows loop over the
  // row, so they take 32 x 2^k threads.
  if (group == 32 && static_cast<int64_t>(group) * perThread < perBlock) {
    if (g.items > 0) {
      const int64_t threads = (perBlock + perThread - 1) / perThread;
      group = static_cast<int>(std::min<int64_t>(maxGroup, (threads + 31) / 32 * 32));
    } else {
      const int most = t.readOnce && !t.colSums ? kReadOnceGroup : maxGroup;
      while (group < most && static_cast<int64_t>(group) * perThread < perBlock)
        group *= 2;
    }
  }
  g.group = group;
  g.rowsPerBlock = rowsPerBlockFor(t.colSums, g.group, g.items, g.cluster);
  return g;
}

} // namespace fg::cuda
