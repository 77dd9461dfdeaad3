// fusegen CUDA row plan: runs a program (fusegen_program.h) whose P::kPlan is Plan::Row with
// a group of threads per row: part of a warp for short rows (several rows per warp), up to 512
// threads for long ones (1024 for backwards with [D] sums), several rows per block; rows
// longer than a block holds are split over a thread block cluster (sm_90 and later), whose
// blocks combine their partial reductions through distributed shared memory. The row is read
// from global memory once and kept in registers (ITEMS vectors of 128 bits per thread) across
// the reduction stages; rows too long for registers are re-read per stage (ITEMS == 0) and then
// mostly hit in L2.
// [D] inputs are not kept in registers: they are re-read (128-bit, read-only path) for every
// row and hit in L1, which leaves the registers to the row and lets more rows be in flight per
// SM. Reductions combine in a fixed order (warp shuffles, then shared memory across the
// group's warps), so results are deterministic; sums are compensated (fusegen_program.h).
// ColSum outputs are accumulated per thread over the block's rows and written as one partial
// row per block; finalizeCol (fusegen_cuda.cuh) adds the partials in a fixed order. Total outputs
// (gradients of [] inputs: elem's values, plus rowOut's for those used per row) are
// accumulated the same way in one register per thread, combined across the block in a fixed
// order into one partial per block, and finalizeScalar adds those. [] inputs are read once per
// thread and passed to rowPre.
#pragma once

#include "fusegen_cuda.cuh"
#include "fusegen_program.h"
#include "fusegen_row_geometry.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace fg::cuda {

template <class P> constexpr int maxReductions() {
  int n = 1;
  for (int s = 0; s < P::kStages; ++s)
    n = P::reductions(s) > n ? P::reductions(s) : n;
  return n;
}

// a combined with the partial of the lane `offset` away (xor) in its warp.
template <typename T>
__device__ __forceinline__ RowAcc<T> shuffleMerge(Reduce r, RowAcc<T> a, int offset) {
  RowAcc<T> b;
  b.s = __shfl_xor_sync(0xffffffffu, a.s, offset);
  b.c = r == Reduce::Sum ? __shfl_xor_sync(0xffffffffu, a.c, offset) : T(0);
  return accMerge(r, a, b);
}

// The combination across the `group` threads of a row (threadIdx.x), in a fixed order, that
// groupReduce and groupReduceShifted share: a butterfly within each warp (`butterfly(offset)`
// merges with the lane `offset` away, xor), then with several warps each warp's lane 0 stores
// its W words (`store(words)`), one barrier, and every warp loads the warps' words, one warp
// per lane (`load(words)`; null: the identity), and runs the butterfly again, so every thread
// of the group ends with the result.
// `shared` holds 2 buffers of blockDim.y * warps * W words, used alternately (`parity`): a
// buffer is written again only after the next call's barrier, which every warp reaches only
// after reading it, so one barrier per call suffices. Whoever writes `shared` next for another
// purpose starts with a barrier (writeTotals, combineColSums).
// NARROW: the group may be narrower than a warp (variants with one item per thread or scalar
// access; rowShape gives wider rows 2 or 4 items). The others shuffle unconditionally.
template <bool NARROW, int W, typename T, class Butterfly, class Store, class Load>
__device__ __forceinline__ void groupCombine(T* shared, int& parity, Butterfly&& butterfly,
                                             Store&& store, Load&& load) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    if (!NARROW || offset < static_cast<int>(blockDim.x))
      butterfly(offset);
  const int warps = blockDim.x / 32;
  if (warps > 1) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    T* mine = shared + (parity * blockDim.y + threadIdx.y) * warps * W;
    parity ^= 1;
    if (lane == 0)
      store(mine + warp * W);
    __syncthreads();
    // At most 32 warps: one per lane, the other lanes hold the identity.
    load(lane < warps ? mine + lane * W : static_cast<const T*>(nullptr));
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      butterfly(offset);
  }
}

// Combines v[0..N) (pass S's reductions) across the threads of a row (groupCombine). Sums
// combine as compensated pairs (accMerge, fusegen_program.h), so the threads' and warps'
// partials keep their compensation.
template <class P, int S, bool NARROW, typename T, int N>
__device__ __forceinline__ void groupReduce(RowAcc<T> (&v)[N], T* shared, int& parity) {
  groupCombine<NARROW, 2 * N>(
      shared, parity,
      [&](int offset) {
#pragma unroll
        for (int j = 0; j < N; ++j)
          v[j] = shuffleMerge(P::reduceKind(S, j), v[j], offset);
      },
      [&](T* words) {
#pragma unroll
        for (int j = 0; j < N; ++j) {
          words[2 * j] = v[j].s;
          words[2 * j + 1] = v[j].c;
        }
      },
      [&](const T* words) {
#pragma unroll
        for (int j = 0; j < N; ++j)
          v[j] = words ? RowAcc<T>{words[2 * j], words[2 * j + 1]}
                       : accIdentity<T>(P::reduceKind(S, j));
      });
}

// groupReduce for pass St's reductions r[0..NR) (its maxima, and any others) and pass St + 1's
// sums sm[0..NS) shifted by those maxima (P::shiftOf; fusegen_program.h): every merge takes
// both sides' values, rescales the sums to the larger maximum (accMergeShifted), then merges
// pass St's reductions. One combination instead of one per pass; the same shared memory
// (rowSharedWords).
template <class P, int St, bool NARROW, typename T, int NR, int NS>
__device__ __forceinline__ void groupReduceShifted(RowAcc<T> (&r)[NR], RowAcc<T> (&sm)[NS],
                                                   T* shared, int& parity) {
  auto merge = [&](const RowAcc<T>(&orr)[NR], const RowAcc<T>(&os)[NS]) {
#pragma unroll
    for (int j = 0; j < NS; ++j) {
      const int i = P::shiftOf(St + 1, j);
      sm[j] = accMergeShifted(sm[j], r[i].s, os[j], orr[i].s);
    }
#pragma unroll
    for (int i = 0; i < NR; ++i)
      r[i] = accMerge(P::reduceKind(St, i), r[i], orr[i]);
  };
  groupCombine<NARROW, 2 * (NR + NS)>(
      shared, parity,
      [&](int offset) {
        RowAcc<T> orr[NR], os[NS];
#pragma unroll
        for (int i = 0; i < NR; ++i) {
          orr[i].s = __shfl_xor_sync(0xffffffffu, r[i].s, offset);
          orr[i].c = P::reduceKind(St, i) == Reduce::Sum
                         ? __shfl_xor_sync(0xffffffffu, r[i].c, offset)
                         : T(0);
        }
#pragma unroll
        for (int j = 0; j < NS; ++j) {
          os[j].s = __shfl_xor_sync(0xffffffffu, sm[j].s, offset);
          os[j].c = __shfl_xor_sync(0xffffffffu, sm[j].c, offset);
        }
        merge(orr, os);
      },
      [&](T* words) {
#pragma unroll
        for (int i = 0; i < NR; ++i) {
          words[2 * i] = r[i].s;
          words[2 * i + 1] = r[i].c;
        }
#pragma unroll
        for (int j = 0; j < NS; ++j) {
          words[2 * (NR + j)] = sm[j].s;
          words[2 * (NR + j) + 1] = sm[j].c;
        }
      },
      [&](const T* words) {
#pragma unroll
        for (int i = 0; i < NR; ++i)
          r[i] = words ? RowAcc<T>{words[2 * i], words[2 * i + 1]}
                       : accIdentity<T>(P::reduceKind(St, i));
#pragma unroll
        for (int j = 0; j < NS; ++j)
          sm[j] = words ? RowAcc<T>{words[2 * (NR + j)], words[2 * (NR + j) + 1]}
                        : accIdentity<T>(Reduce::Sum);
      });
}

// Thread block clusters, compiled in for sm_90 and later; elsewhere a block is its own cluster
// (the host launches clusters only where the kernel has them: rowClustersCompiled).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FG_ROW_CLUSTERS 1
#endif

struct ClusterPlace {
  int rank;   // this block's place among the blocks sharing its rows
  int blocks; // the blocks sharing them
};

// CLUSTER: the kernel variant is launched in clusters; the others are a cluster of one block
// and have no cluster instructions (with them, the forward kernels ran up to 1.8x slower on
// the H100 where no cluster was launched).
template <bool CLUSTER> __device__ __forceinline__ ClusterPlace clusterPlace() {
#ifdef FG_ROW_CLUSTERS
  if constexpr (CLUSTER) {
    const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    return {static_cast<int>(cluster.block_rank()), static_cast<int>(cluster.num_blocks())};
  }
#endif
  return {0, 1};
}

__device__ __forceinline__ void clusterSync() {
#ifdef FG_ROW_CLUSTERS
  cooperative_groups::this_cluster().sync();
#endif
}

// Combines v[0..N) across the blocks of a cluster that share a row, after groupReduce (every
// thread of a block holds its block's values): each block publishes its values in its shared
// memory; after the cluster barrier every warp reads all blocks' values, one block per lane,
// and combines them with a butterfly in the same order in every block, so all end with the
// same result. `slots` (2 x N pairs per block) alternate between consecutive calls: a block
// writes a slot again only after passing the next barrier, which every block reaches only
// after reading it; run() ends with a barrier so that no block exits while others read it.
template <class P, int S, typename T, int N>
__device__ __forceinline__ void clusterReduce(RowAcc<T> (&v)[N], T* slots, int blocks,
                                              int& parity) {
#ifdef FG_ROW_CLUSTERS
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  T* mine = slots + parity * N * 2;
  parity ^= 1;
  if (threadIdx.x == 0)
#pragma unroll
    for (int j = 0; j < N; ++j) {
      mine[j * 2] = v[j].s;
      mine[j * 2 + 1] = v[j].c;
    }
  cluster.sync();
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    RowAcc<T> r = accIdentity<T>(P::reduceKind(S, j));
    if (lane < blocks) {
      const T* theirs = cluster.map_shared_rank(mine, lane);
      r = RowAcc<T>{theirs[j * 2], theirs[j * 2 + 1]};
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      r = shuffleMerge(P::reduceKind(S, j), r, offset);
    v[j] = r;
  }
#else
  (void)v, (void)slots, (void)blocks, (void)parity;
#endif
}

// ... and the item's random numbers and integer and bool [..., D] elements, in the compute type,
// where the cache keeps them (drawn and read once per row, not once per pass): rowShape gives
// them room where the row still fits, and a kernel keeps them when its items have that room
// (the budgets of itemsWithinBudget), else draws and reads them per pass.
template <class P> FG_HD constexpr int rowExtras() {
  return randomStreams<P>() + inputsOf<P>(Bcast::TypedFull);
}
template <class P, typename S> constexpr int rowExtraWordsPerItem() {
  return rowExtras<P>() * vecWidth<S>() * static_cast<int>(sizeof(compute_t<S>)) / 4;
}

// Whether the row cache keeps the program's prefix (P::kPrefix values per element, in the
// compute type: fusegen's Program::prefix) instead of the inputs it is computed from, so that
// no pass computes it again: where it takes no more words than the full inputs and their
// extras, so the row's geometry stays. scaled_masked_softmax's x * scale + mask (bf16: 8 words
// against the inputs' 8) was instruction bound, every pass converting and combining the inputs
// again: 2.40 -> 2.08 ms forward at (8, 32, 2048, 2048) bf16 on the H100. Where it takes more
// it changes the geometry, which measured both ways: causal_softmax's where(j > pos(S), -inf,
// x * scale) (8 words against 4) 3% faster; cross_entropy's forward 31% slower at 32768 x 4096
// and 23% faster at 4096 x 16384 (docs/perf-notes.md).
template <class P, typename S> constexpr bool rowCachesPrefix() {
  constexpr int V = vecWidth<S>();
  return P::kPrefix > 0 &&
         P::kPrefix * V * static_cast<int>(sizeof(compute_t<S>)) / 4 <=
             inputsOf<P>(Bcast::Full) * V * static_cast<int>(sizeof(S)) / 4 +
                 rowExtraWordsPerItem<P, S>();
}

// 32-bit registers the row cache takes per item (128-bit vector) and thread: the full inputs'
// vectors (or the prefix, rowCachesPrefix) and the ColSum accumulators, in the compute type.
template <class P, typename S> constexpr int rowCacheWordsPerItem() {
  constexpr int V = vecWidth<S>();
  return ((rowCachesPrefix<P, S>() ? P::kPrefix * static_cast<int>(sizeof(compute_t<S>))
                                   : inputsOf<P>(Bcast::Full) * static_cast<int>(sizeof(S))) *
              V +
          colSumOutputs<P>() * V * static_cast<int>(sizeof(compute_t<S>))) /
         4;
}

// Input k's slot among them (a Random or TypedFull input).
template <class P> FG_HD constexpr int rowExtraSlot(int k) {
  return P::inBcast(k) == Bcast::Random ? inputSlot<P>(k, Bcast::Random)
                                        : randomStreams<P>() + inputSlot<P>(k, Bcast::TypedFull);
}
// (A cache of the prefix holds what the extras are needed for.)
template <class P, typename S, int ITEMS> constexpr bool rowCachesExtras() {
  return ITEMS > 0 && rowExtraWordsPerItem<P, S>() > 0 && !rowCachesPrefix<P, S>() &&
         ITEMS * (rowCacheWordsPerItem<P, S>() + rowExtraWordsPerItem<P, S>()) <=
             (colSumOutputs<P>() > 0 ? 32 : 24);
}
template <class P, typename S, int ITEMS> constexpr int rowCachedWords() {
  return ITEMS * (rowCacheWordsPerItem<P, S>() +
                  (rowCachesExtras<P, S, ITEMS>() ? rowExtraWordsPerItem<P, S>() : 0));
}

// The register budget of a variant, as threads resident per SM: 1536 (40 registers) for
// float-computed row caches of at most 8 words, or of a cached prefix of at most 16 words in 1
// or 2 items (values already in the compute type, no vector unpacked beside them;
// scaled_masked_softmax's forward takes 38 registers) of a program drawing no random numbers
// and keeping at most 8 row values, which fit without spilling (nvcc -Xptxas -v on every
// shipped row program: 16 words of 16-bit inputs, or in 4 items, spilled 8 to 288 bytes; a
// prefix with Philox draws 12 to 144, with cross_entropy_mean's 20 row values 20), else 1024
// (64 registers). (Total accumulators take one more register each.)
template <class P, typename S, int ITEMS> constexpr int rowThreadsPerSm() {
  constexpr int words = rowCachedWords<P, S, ITEMS>() + totalOutputs<P>();
  constexpr bool smallPrefix = rowCachesPrefix<P, S>() && ITEMS <= 2 && words <= 16 &&
                               randomStreams<P>() == 0 && P::kRowValues <= 8;
  return ITEMS > 0 && sizeof(compute_t<S>) == 4 && (words <= 8 || smallPrefix) ? 1536 : 1024;
}

// ... as registers per thread, for __maxnreg__: an SM's 65536 over its threads, in the multiples
// of 8 that registers are allocated in. (__launch_bounds__(512, 3) alone let ptxas take 42 for
// 1536 threads, which allocate as 48 and leave room for 1280.)
template <class P, typename S, int ITEMS> constexpr int rowRegisters() {
  return 65536 / rowThreadsPerSm<P, S, ITEMS>() / 8 * 8;
}

// Vectors a thread of a row re-read per pass loads before using the first (RowKernel's
// forEachVector, accumulateShifted): 4, fewer where the inputs' vectors (full, [D], random
// and integer ones) would take more than 16 registers (32 spilled in rmsnorm's, layernorm's,
// kl_div's and jsd's kernels).
template <class P, typename S> constexpr int rowLoadBatch() {
  constexpr int words = (inputsOf<P>(Bcast::Full) + inputsOf<P>(Bcast::Col)) * 4 +
                        rowExtraWordsPerItem<P, S>();
  return words * 4 <= 16 ? 4 : words * 2 <= 16 ? 2 : 1;
}

// U: the uniform conditions' values known at compile time (fusegen_program.h Uniforms).
template <class P, typename S, int V, int ITEMS, bool CLUSTER, class U> struct RowKernel {
  using T = compute_t<S>;
  static constexpr int kItems = ITEMS > 0 ? ITEMS : 1;
  static constexpr int kNR = maxReductions<P>();

  const typename P::Args& a;
  T attr[atLeastOne<P::kAttrs>()];
  T Dval;
  int nvec; // vectors per row
  Vec<S, V> cache[atLeastOne<inputsOf<P>(Bcast::Full)>()][kItems]; // the row (ITEMS > 0)
  static constexpr bool kCacheExtras = rowCachesExtras<P, S, ITEMS>();
  // or, instead of the row's element inputs, its prefix (rowCachesPrefix)
  static constexpr bool kCachePrefix = ITEMS > 0 && rowCachesPrefix<P, S>();
  T prefixCache[atLeastOne<P::kPrefix>()][kCachePrefix ? kItems : 1][V];
  // its random numbers and integer and bool [..., D] elements (rowExtraSlot)
  T extras[atLeastOne<rowExtras<P>()>()][kCacheExtras ? kItems : 1][V];
  T colAcc[atLeastOne<colSumOutputs<P>()>()][kItems][V];
  T totalAcc[atLeastOne<totalOutputs<P>()>()]; // this thread's share of the Total outputs
  T scalar[P::kInputs];
  RngKey key{}; // Random inputs: the call's seed and offset
  int rolls[atLeastOne<P::kRolls>()]; // the call's shifts of the rolls (below D < 2^31)
  int clusterParity = 0, groupParity = 0;
  unsigned needed = 0; // the outputs this call writes (neededOutputs)

  __device__ RowKernel(const typename P::Args& args) : a(args) {
    if constexpr (randomStreams<P>() > 0) {
      key = rngKey(a.rng);
      if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0)
        saveRng(a.rng);
    }
#pragma unroll
    for (int k = 0; k < P::kAttrs; ++k)
      attr[k] = static_cast<T>(a.attr[k]);
    Dval = static_cast<T>(a.D);
    nvec = static_cast<int>((a.D + V - 1) / V);
#pragma unroll
    for (int i = 0; i < P::kRolls; ++i)
      rolls[i] = static_cast<int>(a.attr[P::kRollAttr + i]);
    needed = neededOutputs<P>(a);
#pragma unroll
    for (int k = 0; k < P::kInputs; ++k)
      scalar[k] = P::inBcast(k) != Bcast::Scalar ? T(0)
                  : P::inElem(k) == Elem::Dtype  ? toCompute(static_cast<const S*>(a.in[k])[0])
                                                 : loadTyped<T>(P::inElem(k), a.in[k], 0);
  }

  // Vector indices within a row are 32-bit (the glue caps a row plan's D at 2^31 - 1 on the
  // GPU): 64-bit ones took about 2 instructions per element of a re-read row (cross_entropy's
  // forward, ncu per-instruction counts, H100) for their additions, comparisons and products.
  __device__ bool valid(int vi) const { return vi < nvec; }
  // The offset of element l of vector vi of the row in a [..., D] tensor.
  __device__ __forceinline__ int64_t offset(int64_t row, int vi) const {
    return row * a.D + static_cast<int64_t>(vi) * V;
  }

  // Input k's row at the op's row `row`: its own where it omits some of the op's leading dims
  // (a [S, D] table against [..., S, H, D]: divisions by the dims' sizes, once per row and
  // input after unrolling); the op's row else.
  __device__ __forceinline__ int64_t inRow(int k, int64_t row) const {
    return P::inDims(k) == kAllDims ? row : mappedRow<P::kNamedDims>(P::inDims(k), row, a.dims);
  }
  // The shift a rolled input is read with in this call (0 for the others).
  __device__ __forceinline__ int64_t shiftOf(int k) const {
    return P::inRoll(k) < 0 ? 0 : rolls[P::inRoll(k) < 0 ? 0 : P::inRoll(k)];
  }
  // The column of the first element of the vector a moved input (P::inMove) reads at vector
  // index vi: the vector whose elements the move brings there, loaded whole and fixed up in
  // registers (moved()). SwapHalves moves whole vectors (the plan runs vectors only where
  // (D / 2) % V == 0, rowGeometry), and so does Roll (where the call's shift is a multiple of
  // V); SwapPairs keeps a vector's pairs in it (V even); with V == 1 each reads the moved column
  // itself.
  __device__ __forceinline__ int64_t inColumn(int k, int vi) const {
    const int64_t c = static_cast<int64_t>(vi) * V;
    return P::inMove(k) == Move::SwapPairs && V > 1 ? c
                                                    : movedColumn(P::inMove(k), c, a.D, shiftOf(k));
  }
  // The offset of input k's row (a chunk of a packed input: in rows of inChunks(k) * D, from
  // column inChunk(k) * D).
  __device__ __forceinline__ int64_t inBase(int k, int64_t row) const {
    return (inRow(k, row) * P::inChunks(k) + P::inChunk(k)) * a.D;
  }
  // The offset of vector vi of input k's row (Full and TypedFull inputs).
  __device__ __forceinline__ int64_t inOffset(int k, int64_t row, int vi) const {
    return inBase(k, row) + inColumn(k, vi);
  }
  // The offset of vector vi of output m's row (a chunk of a packed gradient: its columns).
  __device__ __forceinline__ int64_t outOffset(int m, int64_t row, int vi) const {
    return (row * P::outChunks(m) + P::outChunk(m)) * a.D + static_cast<int64_t>(vi) * V;
  }
  // Input k's elements of one vector as loaded, in the order the move reads them.
  template <int k, typename E> __device__ __forceinline__ void moved(E (&x)[V]) const {
    if constexpr (P::inMove(k) == Move::SwapPairs && V > 1)
#pragma unroll
      for (int l = 0; l < V; l += 2) {
        const E t = x[l];
        x[l] = x[l + 1];
        x[l + 1] = t;
      }
  }
  // Whether this call reads input k: some output it writes reads it (P::inReaders; a uniform
  // branch). Loads of the others are skipped, their values 0 for the outputs not written.
  __device__ __forceinline__ bool wanted(int k) const { return (P::inReaders(k) & needed) != 0; }

  // Whether input k is read at some column of vector vi of a row: always, but for an input
  // read only under conditions on the column and the row (P::inGuarded: causal_softmax's
  // scores past the query are not), which rv, the row's values from rowPre, decide.
  template <int k> __device__ __forceinline__ bool liveVector(const T* rv, int vi) const {
    if constexpr (!P::inGuarded(k)) {
      (void)rv, (void)vi;
      return true;
    } else {
      bool any = false;
#pragma unroll
      for (int l = 0; l < V; ++l)
        any = any || P::template live<k, T, isHalf<S>()>(rv, attr, Dval, column(vi, l));
      return any;
    }
  }

  template <int k>
  __device__ __forceinline__ Vec<S, V> loadFull(int64_t row, int vi, const T* rv) const {
    if (!wanted(k) || !liveVector<k>(rv, vi))
      return Vec<S, V>{};
    Vec<S, V> x = loadVec<S, V>(a.in[k], inOffset(k, row, vi));
    moved<k>(x.v);
    return x;
  }

  // The column index j of element l of vector vi, in the compute type (columnIndex).
  __device__ __forceinline__ T column(int vi, int l) const { return columnIndex<T>(vi * V, l); }

  // The vectors of the inputs the elements at vector index vi read: the full inputs' from
  // the row cache, or from global memory where the row is re-read per pass (ITEMS == 0); the
  // [D] inputs' from global memory (read-only path), once per vector and pass. Whole vectors
  // either way: reading re-read rows element by element issued V loads per vector. Random
  // inputs: from the numbers drawn with the row cache, or drawn per vector and pass where the
  // row is re-read (only where a pass reads them: the rest is dead code).
  struct Vectors {
    Vec<S, V> full[atLeastOne<inputsOf<P>(Bcast::Full)>()];
    Vec<S, V> col[atLeastOne<inputsOf<P>(Bcast::Col)>()];
    T extra[P::kInputs][V]; // Random, TypedFull and TypedCol inputs (only theirs are used)
  };

  // Input k's V elements at vector index vi of the row, for a Random input (drawn) or an integer
  // or bool one (one load of the V elements: rowGeometry checked their alignment; byte-wise
  // loads of a bool mask: masked_softmax 0.166 ms against 0.163 forward, 16384x4096 bf16).
  template <int k> __device__ __forceinline__ void drawOrLoad(int64_t row, int vi, T (&out)[V]) const {
    if constexpr (P::inBcast(k) == Bcast::Random && P::inMove(k) == Move::None) {
      uniforms<T, V>(key, randomStream<P>(k), offset(row, vi), out);
    } else if constexpr (P::inBcast(k) == Bcast::Random) { // (at the moved elements, one by one)
#pragma unroll
      for (int l = 0; l < V; ++l) {
        T u[1];
        uniforms<T, 1>(key, randomStream<P>(k),
                       row * a.D + movedColumn(P::inMove(k), int64_t(vi) * V + l, a.D, shiftOf(k)),
                       u);
        out[l] = u[0];
      }
    } else {
      loadTypedVec<T, V>(P::inElem(k), a.in[k],
                         P::inBcast(k) == Bcast::TypedFull ? inOffset(k, row, vi) : inColumn(k, vi),
                         out);
      moved<k>(out);
    }
  }

  // FILL: for the row cache's prefix (kCachePrefix), from memory; after it, the element inputs
  // are not read (the cached prefix is all the passes read of them).
  template <bool FILL = false, class I>
  __device__ __forceinline__ void loadVectors(int64_t row, int vi, I, const T* rv,
                                              Vectors& x) const {
    constexpr bool fromPrefix = kCachePrefix && !FILL;
    staticFor<P::kInputs>([&](auto kc) {
      constexpr int k = decltype(kc)::value;
      if constexpr (fromPrefix && (P::inBcast(k) == Bcast::Full || P::inBcast(k) == Bcast::Random ||
                                   P::inBcast(k) == Bcast::TypedFull)) {
      } else if constexpr (P::inBcast(k) == Bcast::Full) {
        if constexpr (ITEMS > 0 && !FILL)
          x.full[inputSlot<P>(k, Bcast::Full)] = cache[inputSlot<P>(k, Bcast::Full)][I::value];
        else
          x.full[inputSlot<P>(k, Bcast::Full)] = loadFull<k>(row, vi, rv);
      } else if constexpr (P::inBcast(k) == Bcast::Col) {
        Vec<S, V>& c = x.col[inputSlot<P>(k, Bcast::Col)];
        if constexpr (sizeof(Vec<S, V>) == 16)
          c = loadVecReadOnly<S, V>(a.in[k], inColumn(k, vi));
        else
          c = loadVec<S, V>(a.in[k], inColumn(k, vi));
        moved<k>(c.v);
      } else if constexpr ((P::inBcast(k) == Bcast::TypedFull || P::inBcast(k) == Bcast::Random) &&
                           kCacheExtras) {
#pragma unroll
        for (int l = 0; l < V; ++l)
          x.extra[k][l] = extras[rowExtraSlot<P>(k)][I::value][l];
      } else if constexpr (P::inBcast(k) == Bcast::TypedFull || P::inBcast(k) == Bcast::TypedCol ||
                           P::inBcast(k) == Bcast::Random) {
        drawOrLoad<k>(row, vi, x.extra[k]);
      }
    });
  }

  // Inputs of the element l of the vectors x.
  __device__ __forceinline__ void elementInputs(const Vectors& x, int l, T* in) const {
    staticFor<P::kInputs>([&](auto kc) {
      constexpr int k = decltype(kc)::value;
      if constexpr (P::inBcast(k) == Bcast::Full)
        in[k] = toCompute(x.full[inputSlot<P>(k, Bcast::Full)].v[l]);
      else if constexpr (P::inBcast(k) == Bcast::Col)
        in[k] = toCompute(x.col[inputSlot<P>(k, Bcast::Col)].v[l]);
      else if constexpr (P::inBcast(k) == Bcast::Random || P::inBcast(k) == Bcast::TypedFull ||
                         P::inBcast(k) == Bcast::TypedCol)
        in[k] = x.extra[k][l];
      else
        in[k] = scalar[k]; // Row inputs are read by rowPre only
    });
  }

  // The inputs of element l of vector vi (x: their vectors), then the values pass kPass reads
  // after them (the generated code's _in[kInputs ...]): from the row cache where it keeps them,
  // refreshed there in the passes that refresh them (P::kRefreshPasses: the masked softmaxes'
  // output pass reads e = exp(z - m) that the sum's pass computed), else computed
  // (fusegen_program.h elementValuesAt).
  template <int kPass, class I>
  __device__ __forceinline__ void elementValues(const Vectors& x, int vi, int l, I, const T* rv,
                                                T* in) {
    elementInputs(x, l, in);
    if constexpr (kCachePrefix) {
#pragma unroll
      for (int i = 0; i < P::kPrefix; ++i)
        in[P::kInputs + i] = prefixCache[i][I::value][l];
      if constexpr (((P::kRefreshPasses >> kPass) & 1u) != 0) {
        P::template refresh<kPass, T, isHalf<S>(), U>(in, rv, attr, Dval, column(vi, l));
#pragma unroll
        for (int i = 0; i < P::kPrefix; ++i)
          prefixCache[i][I::value][l] = in[P::kInputs + i];
      }
    } else {
      elementValuesAt<P, kPass, T, isHalf<S>(), U>(in, rv, attr, Dval, column(vi, l));
    }
  }

  // Adds pass St's terms of this thread's elements of the row into acc[0..reductions(St)).
  template <int St, int N>
  __device__ __forceinline__ void accumulatePass(int64_t row, const T* rv, RowAcc<T> (&acc)[N]) {
    bool need[N]; // the guards (Program::Stage::guard): uniform, so the branch never diverges
    P::template guards<St, T, isHalf<S>(), U>(attr, Dval, need);
    // (Batched loads only for a single reduction: polynorm's backward, 3 compensated sums,
    // spilled with 2 vectors per batch and ran 9% slower.)
    forEachVector<P::reductions(St) == 1 ? rowLoadBatch<P, S>() : 1>(
        row, rv, [&](int vi, auto item, const Vectors& x) {
#pragma unroll
      for (int l = 0; l < V; ++l) {
        T in[P::kInputs + P::kPrefix], t[N];
        elementValues<St>(x, vi, l, item, rv, in);
        P::template term<St, T, isHalf<S>(), U>(in, rv, attr, Dval, column(vi, l), t);
#pragma unroll
        for (int j = 0; j < P::reductions(St); ++j)
          if (!P::pick(St, j) && need[j])
            accAddTerm(P::reduceKind(St, j), P::plainSum(St, j), acc[j], t[j]);
      }
    });
  }

  // Pass St's picks (fusegen_program.h): the thread that owns the vector of the picked column
  // evaluates the term there (its inputs loaded at that column, read-only path: the row was
  // just read) and adds it; the row's combination then gives every thread the value.
  template <int St, int N>
  __device__ __forceinline__ void addPicks(int64_t row, const T* rv, RowAcc<T> (&acc)[N]) {
    if constexpr (hasPicks<P>(St)) {
      T c[N];
      P::template pickColumns<St, T, isHalf<S>()>(rv, attr, Dval, c);
      const ClusterPlace place = clusterPlace<CLUSTER>();
      const int rowThread = place.rank * blockDim.x + threadIdx.x;
      const int rowThreads = place.blocks * blockDim.x;
#pragma unroll
      for (int j = 0; j < P::reductions(St); ++j) {
        int64_t col;
        if (!P::pick(St, j) || !pickedColumn(c[j], a.D, col) || (col / V) % rowThreads != rowThread)
          continue;
        T in[P::kInputs + P::kPrefix], t[N];
        staticFor<P::kInputs>([&](auto kc) {
          constexpr int k = decltype(kc)::value;
          const int64_t mc = movedColumn(P::inMove(k), col, a.D, shiftOf(k)); // (k reads there)
          if constexpr (P::inBcast(k) == Bcast::Full)
            in[k] = toCompute(__ldg(static_cast<const S*>(a.in[k]) + inBase(k, row) + mc));
          else if constexpr (P::inBcast(k) == Bcast::Col)
            in[k] = toCompute(__ldg(static_cast<const S*>(a.in[k]) + mc));
          else if constexpr (P::inBcast(k) == Bcast::Random) {
            T u[1];
            uniforms<T, 1>(key, randomStream<P>(k), row * a.D + mc, u);
            in[k] = u[0];
          } else if constexpr (P::inBcast(k) == Bcast::TypedFull)
            in[k] = loadTyped<T>(P::inElem(k), a.in[k], inBase(k, row) + mc);
          else if constexpr (P::inBcast(k) == Bcast::TypedCol)
            in[k] = loadTyped<T>(P::inElem(k), a.in[k], mc);
          else
            in[k] = scalar[k];
        });
        elementValuesAt<P, St, T, isHalf<S>(), U>(in, rv, attr, Dval, c[j]);
        P::template term<St, T, isHalf<S>(), U>(in, rv, attr, Dval, c[j], t);
        acc[j].s += t[j];
      }
    }
  }

  // Passes St and St + 1 (sums shifted by pass St's maxima) over this thread's elements in one
  // read of the row (online max-and-sum), a batch of rowLoadBatch vectors at a time, all
  // loaded before the first is used: pass St's terms of the batch go into first[]; where a maximum
  // grew, the sums it shifts are rescaled by exp(old - new) and the row values after pass St
  // recomputed from this thread's results so far (rowAfter: the shifted terms read only the
  // maxima of it); then the batch's pass St + 1 terms go into sm[] against the current
  // maxima. Reading the row once instead of twice is what re-read rows (ITEMS == 0) are
  // bound by.
  //
  // Why per batch: a warp takes the rescaling branch where any of its 32 threads' maxima
  // grew, which on random logits checked per vector was 86% of the vectors (cross_entropy's
  // forward at 8192x128256, ncu per-instruction counts, H100); the check and the rescaling
  // cost about 2 instructions per element there. Why batches at all: with the rescaling
  // branch in the body nvcc did not unroll a loop of load-and-use, which then kept one
  // 16-byte load in flight per thread (44% of DRAM bandwidth).
  template <int St, int NM, int NS>
  __device__ __forceinline__ void accumulateShifted(int64_t row, T* rv, RowAcc<T> (&first)[NM],
                                                    RowAcc<T> (&sm)[NS]) {
    bool need[NM], needSum[NS]; // the guards (Program::Stage::guard)
    P::template guards<St, T, isHalf<S>(), U>(attr, Dval, need);
    P::template guards<St + 1, T, isHalf<S>(), U>(attr, Dval, needSum);
    T seen[NM]; // the maxima the row values rv were computed from: none yet
#pragma unroll
    for (int i = 0; i < NM; ++i)
      seen[i] = reduceIdentity<T>(P::reduceKind(St, i));
    {
      T base[NM];
#pragma unroll
      for (int i = 0; i < NM; ++i)
        base[i] = shiftBase(P::reduceKind(St, i), seen[i]);
      P::template rowAfter<St, T, isHalf<S>()>(base, attr, Dval, rv);
    }
    constexpr int kBatch = rowLoadBatch<P, S>();
    forEachBatch<kBatch>(row, rv, [&](int base, int rowThreads, const Vectors(&x)[kBatch]) {
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int vi = base + b * rowThreads;
        if (!valid(vi))
          continue;
#pragma unroll
        for (int l = 0; l < V; ++l) {
          T in[P::kInputs + P::kPrefix], t[NM];
          elementValues<St>(x[b], vi, l, std::integral_constant<int, 0>{}, rv, in);
          P::template term<St, T, isHalf<S>(), U>(in, rv, attr, Dval, column(vi, l), t);
#pragma unroll
          for (int i = 0; i < NM; ++i)
            if (!P::pick(St, i) && need[i])
              accAddTerm(P::reduceKind(St, i), P::plainSum(St, i), first[i], t[i]);
        }
      }
      bool grew = false;
#pragma unroll
      for (int i = 0; i < NM; ++i)
        grew = grew || (P::reduceKind(St, i) == Reduce::Max && !(first[i].s == seen[i]));
      if (grew) {
#pragma unroll
        for (int j = 0; j < NS; ++j) {
          const int i = P::shiftOf(St + 1, j);
          // (From no maximum, the sum is still empty: scale 1 keeps its zero.)
          const T scale =
              seen[i] == -T(INFINITY) ? T(1) : fg::exp<isHalf<S>()>(seen[i] - first[i].s);
          sm[j].s *= scale;
          sm[j].c *= scale;
        }
        T red[NM];
#pragma unroll
        for (int i = 0; i < NM; ++i) {
          red[i] = shiftBase(P::reduceKind(St, i), accResult(P::reduceKind(St, i), first[i]));
          seen[i] = first[i].s;
        }
        P::template rowAfter<St, T, isHalf<S>()>(red, attr, Dval, rv);
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int vi = base + b * rowThreads;
        if (!valid(vi))
          continue;
#pragma unroll
        for (int l = 0; l < V; ++l) {
          T in[P::kInputs + P::kPrefix], t[NS];
          elementValues<St + 1>(x[b], vi, l, std::integral_constant<int, 0>{}, rv, in);
          P::template term<St + 1, T, isHalf<S>(), U>(in, rv, attr, Dval, column(vi, l), t);
#pragma unroll
          for (int j = 0; j < NS; ++j)
            if (needSum[j])
              accAddTerm(Reduce::Sum, P::plainSum(St + 1, j), sm[j], t[j]);
        }
      }
    });
  }

  // Passes St (with maxima) and St + 1 (sums shifted by them) as one (fusegen_program.h): each
  // thread takes pass St's reductions of its elements, sums against its maxima, and groupReduceShifted
  // combines the threads' pairs once. Only rows re-read per pass (ITEMS == 0) run so, where
  // it saves a read of the row; rows held in registers, and variants in clusters, run the
  // passes apart: held in registers, softmax's forward ran 15% slower shifted (H100, bf16,
  // 32768x4096: 0.257 ms against 0.217; bench/results/2026-11-24-h100-ab-stores).
  template <int St> __device__ void shiftedStages(int64_t row, bool active, T* rv, T* shared) {
    constexpr int NM = P::reductions(St), NS = P::reductions(St + 1);
    RowAcc<T> first[NM], sm[NS];
#pragma unroll
    for (int i = 0; i < NM; ++i)
      first[i] = accIdentity<T>(P::reduceKind(St, i));
#pragma unroll
    for (int j = 0; j < NS; ++j)
      sm[j] = accIdentity<T>(Reduce::Sum);
    T red[NM > NS ? NM : NS];
    if (active) {
      accumulateShifted<St>(row, rv, first, sm);
      addPicks<St>(row, rv, first);
    }
    groupReduceShifted<P, St, ITEMS <= 1>(first, sm, shared, groupParity);
    if (active) {
#pragma unroll
      for (int i = 0; i < NM; ++i)
        red[i] = accResult(P::reduceKind(St, i), first[i]);
      P::template rowAfter<St, T, isHalf<S>()>(red, attr, Dval, rv);
#pragma unroll
      for (int j = 0; j < NS; ++j)
        red[j] = accResult(Reduce::Sum, sm[j]);
      P::template rowAfter<St + 1, T, isHalf<S>()>(red, attr, Dval, rv);
    }
  }

  template <int St>
  __device__ void stage(int64_t row, bool active, T* rv, T* shared, T* clusterSlots) {
    if constexpr (!CLUSTER && ITEMS == 0 && St + 1 < P::kStages && shiftedStage<P>(St + 1)) {
      shiftedStages<St>(row, active, rv, shared);
      stage<St + 2>(row, active, rv, shared, clusterSlots);
    } else if constexpr (St < P::kStages) {
      RowAcc<T> acc[kNR]; // compensated sums (fusegen_program.h)
#pragma unroll
      for (int j = 0; j < kNR; ++j)
        acc[j] = accIdentity<T>(j < P::reductions(St) ? P::reduceKind(St, j) : Reduce::Sum);
      if (active) {
        accumulatePass<St>(row, rv, acc);
        addPicks<St>(row, rv, acc);
      }
      groupReduce<P, St, ITEMS <= 1>(acc, shared, groupParity);
      if constexpr (CLUSTER)
        clusterReduce<P, St>(acc, clusterSlots, clusterPlace<CLUSTER>().blocks, clusterParity);
      if (active) {
        T red[kNR];
#pragma unroll
        for (int j = 0; j < kNR; ++j)
          red[j] = accResult(P::reduceKind(St, j), acc[j]);
        P::template rowAfter<St, T, isHalf<S>()>(red, attr, Dval, rv);
      }
      stage<St + 1>(row, active, rv, shared, clusterSlots);
    }
  }

  // Calls f(vi, item) for each vector vi of the row this thread owns; item is a
  // std::integral_constant (the register slot when ITEMS > 0).
  template <class F> __device__ __forceinline__ void forEachItem(F&& f) const {
    // This thread's place among the row's threads (of all blocks of the cluster).
    const ClusterPlace place = clusterPlace<CLUSTER>();
    const int rowThread = place.rank * blockDim.x + threadIdx.x;
    const int rowThreads = place.blocks * blockDim.x;
    if constexpr (ITEMS > 0) {
      staticFor<ITEMS>([&](auto item) {
        const int vi = rowThread + decltype(item)::value * rowThreads;
        if (valid(vi))
          f(vi, item);
      });
    } else {
      // (Unrolled so that a thread has several vectors' loads in flight.)
#pragma unroll 4
      for (int vi = rowThread; valid(vi); vi += rowThreads)
        f(vi, std::integral_constant<int, 0>{});
    }
  }

  // Calls f(vi, item, x) for each vector vi of the row this thread owns, x its inputs'
  // vectors (loadVectors). Rows re-read per pass (ITEMS == 0) are loaded kBatch vectors at a
  // time, all before the first is used, so that each thread has that many loads in flight:
  // with the loop of load-and-use unrolled, rows of a few vectors per thread ran a remainder
  // loop of single loads (rmsnorm's forward at 16384x32000, 8 vectors per thread: 0.772 ms
  // batched by 2 against 0.897). kBatch 1 is that unrolled loop (forEachItem).
  template <int kBatch, class F>
  __device__ __forceinline__ void forEachVector(int64_t row, const T* rv, F&& f) const {
    if constexpr (ITEMS > 0 || kBatch == 1) {
      forEachItem([&](int vi, auto item) {
        Vectors x;
        loadVectors(row, vi, item, rv, x);
        f(vi, item, x);
      });
    } else {
      forEachBatch<kBatch>(row, rv, [&](int base, int stride, const Vectors(&x)[kBatch]) {
#pragma unroll
        for (int b = 0; b < kBatch; ++b)
          if (valid(base + b * stride))
            f(base + b * stride, std::integral_constant<int, 0>{}, x[b]);
      });
    }
  }

  // Calls f(base, stride, x) for each batch of kBatch vectors this thread owns in a row
  // re-read per pass: vectors base, base + stride, ... (those in the row), all loaded into x
  // before f runs, so that the thread has kBatch loads in flight.
  template <int kBatch, class F>
  __device__ __forceinline__ void forEachBatch(int64_t row, const T* rv, F&& f) const {
    const ClusterPlace place = clusterPlace<CLUSTER>();
    const int rowThread = place.rank * blockDim.x + threadIdx.x;
    const int rowThreads = place.blocks * blockDim.x;
    for (int base = rowThread; valid(base); base += kBatch * rowThreads) {
      Vectors x[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        if (valid(base + b * rowThreads))
          loadVectors(row, base + b * rowThreads, std::integral_constant<int, 0>{}, rv, x[b]);
      f(base, rowThreads, x);
    }
  }

  // The blocks of a cluster share one partial row of each ColSum output, each writing its
  // own columns.
  __device__ T* partial(T* partials, int m, int64_t c) const {
    const ClusterPlace place = clusterPlace<CLUSTER>();
    const int64_t clusters = gridDim.x / place.blocks, cluster = blockIdx.x / place.blocks;
    return partials + (static_cast<int64_t>(colSumSlot<P>(m)) * clusters + cluster) * a.D + c;
  }

  // The block's partial of each Total output (after the ColSum partials): the threads' values
  // combined (sums, maxima, minima) in a fixed order, butterflies within each warp, then the
  // warps' values (at most 32, in shared memory) by warp 0. Every thread of the block calls it.
  // A block of fewer than 32 threads (a power of 2: a short row of a ColSum program, one row
  // per block) is one partial warp: its butterflies span its lanes only (counting its warps
  // as threads / 32 = 0 dropped every value: difffuzz fz578_21, a [] gradient 0 on CUDA).
  __device__ void writeTotals(T* shared, T* partials) {
    constexpr int N = totalOutputs<P>();
    __syncthreads(); // the last groupReduce's readers are done with `shared`
    const int threads = blockDim.x * blockDim.y;
    const int thread = threadIdx.y * blockDim.x + threadIdx.x;
    const int lane = thread % 32, warp = thread / 32, warps = (threads + 31) / 32;
    const int width = threads < 32 ? threads : 32;
    const unsigned lanes = width == 32 ? 0xffffffffu : (1u << width) - 1u;
#pragma unroll
    for (int j = 0; j < N; ++j)
      for (int offset = width / 2; offset > 0; offset /= 2)
        totalAcc[j] = reduceCombine(totalReduce<P>(j), totalAcc[j],
                                    __shfl_xor_sync(lanes, totalAcc[j], offset));
    if (lane == 0)
#pragma unroll
      for (int j = 0; j < N; ++j)
        shared[warp * N + j] = totalAcc[j];
    __syncthreads();
    if (warp == 0) {
      const int clusters = gridDim.x / clusterPlace<CLUSTER>().blocks;
      T* totals = partials + static_cast<int64_t>(colSumOutputs<P>()) * clusters * a.D;
#pragma unroll
      for (int j = 0; j < N; ++j) {
        T r = lane < warps ? shared[lane * N + j] : reduceIdentity<T>(totalReduce<P>(j));
        for (int offset = width / 2; offset > 0; offset /= 2)
          r = reduceCombine(totalReduce<P>(j), r, __shfl_xor_sync(lanes, r, offset));
        if (lane == 0)
          totals[static_cast<int64_t>(j) * gridDim.x + blockIdx.x] = r;
      }
    }
  }

  // Adds the ColSum accumulators of the block's rows (threadIdx.y), in row order, into those
  // of its first row, through shared memory: an output and item at a time, rowsPerBlock x
  // group x V words laid out so that a warp's lanes touch consecutive words.
  __device__ void combineColSums(T* shared) {
    const int rows = blockDim.y, group = blockDim.x;
    __syncthreads(); // the last groupReduce's readers are done with `shared`
#pragma unroll
    for (int m = 0; m < colSumOutputs<P>(); ++m)
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
#pragma unroll
        for (int l = 0; l < V; ++l)
          shared[(l * rows + threadIdx.y) * group + threadIdx.x] = colAcc[m][i][l];
        __syncthreads();
        if (threadIdx.y == 0)
#pragma unroll
          for (int l = 0; l < V; ++l) {
            T s = 0;
            for (int y = 0; y < rows; ++y)
              s += shared[(l * rows + y) * group + threadIdx.x];
            colAcc[m][i][l] = s;
          }
        __syncthreads();
      }
  }

  // The row at place `index` of the order the block's rows run in: where inputs read per
  // element lack some of the op's dims (a [S, D] mask against [..., S, D]) and a row takes at
  // least a warp, rows that read the same rows of them together (orderedRow), so that a block
  // and the blocks beside it find those in L1, not L2 (H100, scaled_masked_softmax at (8, 32,
  // 2048, 2048) bf16: forward+backward 6.03 -> 5.58 ms, the forward unchanged); else the op's
  // order, where a warp's rows are adjacent.
  __device__ __forceinline__ int64_t rowAt(int64_t index) const {
    constexpr unsigned keep = sharedRowDims<P>();
    if constexpr (keep == kAllDims || P::kNamedDims == 0)
      return index;
    else
      return blockDim.x >= 32 ? orderedRow<P::kNamedDims>(keep, index, a.dims) : index;
  }

  // The row's per-row inputs (its [...] inputs, statistics and positions; [] inputs) and the
  // values rowPre computes from them.
  __device__ __forceinline__ void startRow(int64_t row, T* rv) const {
    T rowIn[P::kInputs];
#pragma unroll
    for (int k = 0; k < P::kInputs; ++k)
      rowIn[k] = P::inBcast(k) == Bcast::Position
                     ? static_cast<T>(positionOf<P::kNamedDims>(P::inDims(k), row, a.dims))
                 : P::inBcast(k) != Bcast::Row && P::inBcast(k) != Bcast::Stat
                     ? scalar[k] // [] inputs; 0 for the others
                 : P::inBcast(k) == Bcast::Stat ? static_cast<const T*>(a.in[k])[row]
                 : P::inElem(k) == Elem::Dtype
                     ? toCompute(static_cast<const S*>(a.in[k])[inRow(k, row)])
                     : loadTyped<T>(P::inElem(k), a.in[k], inRow(k, row));
    P::template rowPre<T, isHalf<S>()>(rowIn, attr, Dval, rv);
  }

  // The element outputs of vector vi of the row from its inputs' vectors x: stored, or added
  // into the [D] and [] accumulators.
  template <class I>
  __device__ __forceinline__ void writeElements(int64_t row, int vi, I item, const Vectors& x,
                                                const T* rv, T* partials) {
    Vec<S, V> y[P::kOutputs];
    T typed[atLeastOne<typedOutputs<P>()>()][V]; // outputs of their own type
#pragma unroll
    for (int l = 0; l < V; ++l) {
      T in[P::kInputs + P::kPrefix], out[P::kOutputs];
      elementValues<P::kStages>(x, vi, l, item, rv, in);
      P::template elem<T, isHalf<S>(), U>(in, rv, attr, Dval, column(vi, l), out);
      staticFor<P::kOutputs>([&](auto mc) {
        constexpr int m = decltype(mc)::value;
        if constexpr (P::outKind(m) == OutKind::Full && P::outElem(m) == Elem::Dtype) {
          y[m].v[l] = fromCompute<S>(out[m]);
        } else if constexpr (P::outKind(m) == OutKind::Full) {
          typed[typedSlot<P>(m)][l] = out[m];
        } else if constexpr (P::outKind(m) == OutKind::ColSum) {
          if constexpr (ITEMS > 0)
            colAcc[colSumSlot<P>(m)][I::value][l] += out[m];
          else if (a.need[m])
            *partial(partials, m, vi * V + l) += out[m];
        } else if constexpr (P::outKind(m) == OutKind::Total && !P::totalPerRow(m)) {
          totalAcc[totalSlot<P>(m)] =
              reduceCombine(P::outReduce(m), totalAcc[totalSlot<P>(m)], out[m]);
        }
      });
    }
    staticFor<P::kOutputs>([&](auto mc) {
      constexpr int m = decltype(mc)::value;
      if constexpr (P::outKind(m) == OutKind::Full && P::outElem(m) == Elem::Dtype) {
        if (a.need[m])
          storeVec<S, V>(a.out[m], outOffset(m, row, vi), y[m]);
      } else if constexpr (P::outKind(m) == OutKind::Full) {
        if (a.need[m])
          storeTypedVec(P::outElem(m), a.out[m], outOffset(m, row, vi), typed[typedSlot<P>(m)]);
      }
    });
    (void)item;
  }

  __device__ void run(T* shared, T* clusterSlots, T* partials) {
    // ColSum accumulators belong to fixed columns: set up once per block.
#pragma unroll
    for (int m = 0; m < atLeastOne<colSumOutputs<P>()>(); ++m)
#pragma unroll
      for (int i = 0; i < kItems; ++i)
#pragma unroll
        for (int l = 0; l < V; ++l)
          colAcc[m][i][l] = T(0);
#pragma unroll
    for (int j = 0; j < atLeastOne<totalOutputs<P>()>(); ++j)
      totalAcc[j] = reduceIdentity<T>(totalReduce<P>(j));

    // The blocks of a cluster run the same rows (rowsPerBlock is 1 then).
    const int rowsPerBlock = blockDim.y;
    const ClusterPlace place = clusterPlace<CLUSTER>();
    const int64_t cluster = blockIdx.x / place.blocks, clusters = gridDim.x / place.blocks;
    for (int64_t base = cluster * rowsPerBlock; base < a.rows; base += clusters * rowsPerBlock) {
      const bool active = base + threadIdx.y < a.rows;
      const int64_t row = active ? rowAt(base + threadIdx.y) : base + threadIdx.y;
      T rv[atLeastOne<P::kRowValues>()];
      if (active) {
        startRow(row, rv);
        if constexpr (kCachePrefix)
          forEachItem([&](int vi, auto item) {
            Vectors x;
            loadVectors<true>(row, vi, item, rv, x);
#pragma unroll
            for (int l = 0; l < V; ++l) {
              T in[P::kInputs + P::kPrefix];
              elementInputs(x, l, in);
              P::template prefix<T, isHalf<S>(), U>(in, rv, attr, Dval, column(vi, l));
#pragma unroll
              for (int i = 0; i < P::kPrefix; ++i)
                prefixCache[i][item.value][l] = in[P::kInputs + i];
            }
          });
        else if constexpr (ITEMS > 0)
          forEachItem([&](int vi, auto item) {
            staticFor<P::kInputs>([&](auto kc) {
              constexpr int k = decltype(kc)::value;
              if constexpr (P::inBcast(k) == Bcast::Full)
                cache[inputSlot<P>(k, Bcast::Full)][item.value] = loadFull<k>(row, vi, rv);
              else if constexpr ((P::inBcast(k) == Bcast::Random ||
                                  P::inBcast(k) == Bcast::TypedFull) &&
                                 kCacheExtras)
                drawOrLoad<k>(row, vi, extras[rowExtraSlot<P>(k)][item.value]);
            });
          });
      }
      stage<0>(row, active, rv, shared, clusterSlots);
      if (!active)
        continue;
      forEachItem([&](int vi, auto item) {
        Vectors x;
        loadVectors(row, vi, item, rv, x);
        writeElements(row, vi, item, x, rv, partials);
      });
      if (threadIdx.x == 0 && clusterPlace<CLUSTER>().rank == 0) {
        T out[P::kOutputs];
        P::template rowOut<T, isHalf<S>()>(rv, attr, Dval, out);
#pragma unroll
        for (int m = 0; m < P::kOutputs; ++m) {
          if (P::outKind(m) == OutKind::Row && a.need[m])
            storeOutput<P, S>(m, a.out[m], row, out[m]);
          if (P::outKind(m) == OutKind::Stat && a.need[m])
            static_cast<T*>(a.out[m])[row] = out[m];
          if (P::outKind(m) == OutKind::Total && P::totalPerRow(m))
            totalAcc[totalSlot<P>(m)] =
                reduceCombine(P::outReduce(m), totalAcc[totalSlot<P>(m)], out[m]);
        }
      }
    }
    if constexpr (ITEMS > 0 && colSumOutputs<P>() > 0) {
      if constexpr (ITEMS == 1) // (rowsPerBlockFor: the only variant with several rows)
        if (blockDim.y > 1)
          combineColSums(shared);
      if (threadIdx.y == 0)
        forEachItem([&](int vi, auto item) {
          staticFor<P::kOutputs>([&](auto mc) {
            constexpr int m = decltype(mc)::value;
            if constexpr (P::outKind(m) == OutKind::ColSum) {
              if (a.need[m]) {
#pragma unroll
                for (int l = 0; l < V; ++l)
                  *partial(partials, m, vi * V + l) = colAcc[colSumSlot<P>(m)][item.value][l];
              }
            }
          });
        });
    }
    if constexpr (totalOutputs<P>() > 0)
      writeTotals(shared, partials);
    if constexpr (CLUSTER)
      clusterSync();
  }
};

template <class P> constexpr int maxGroup(int items) {
  return maxGroupFor(colSumOutputs<P>() > 0, items);
}

// Words of shared memory for combining reductions (compensated pairs, two buffers) across the
// warps of each row's group, and the Total outputs across the block's warps; the cluster's
// slots follow.
template <class P> __host__ __device__ constexpr int rowSharedWords(int group, int rowsPerBlock) {
  const int warps = (group * rowsPerBlock + 31) / 32;
  // groupReduce's 2 buffers: a compensated pair per reduction, of two passes for shifted
  // passes (groupReduceShifted): at most 4 words per reduction.
  const int reductions = 2 * warps * 4 * maxReductions<P>();
  const int totals = warps * totalOutputs<P>();
  return reductions > totals ? reductions : totals;
}

// __grid_constant__: RowKernel keeps a reference to the arguments, which then stay in
// parameter memory instead of being copied to the thread's local memory.
template <class P, typename S, int V, int ITEMS, int MAX_THREADS = kMaxGroup, bool CLUSTER = false>
__global__ void __launch_bounds__(MAX_THREADS, (rowThreadsPerSm<P, S, ITEMS>() / MAX_THREADS))
    FG_MAXNREG((rowRegisters<P, S, ITEMS>()))
        rowProgram(const __grid_constant__ typename P::Args a, compute_t<S>* partials) {
  extern __shared__ unsigned char sharedRaw[];
  using T = compute_t<S>;
  T* shared = reinterpret_cast<T*>(sharedRaw);
  withUniforms<P, T>(a.attr, a.D, [&](auto u) {
    RowKernel<P, S, V, ITEMS, CLUSTER, decltype(u)> k(a);
    k.run(shared, shared + rowSharedWords<P>(blockDim.x, blockDim.y), partials);
  });
}

struct RowGeometry : RowShape {
  int blocks; // a multiple of `cluster`
  // Partial rows of each ColSum output: one per cluster.
  int partialRows() const { return blocks / cluster; }
};

// FUSEGEN_ROW_CONFIG="ITEMS,GROUP[,CLUSTER]" replaces the chosen items per thread (0, 1, 2 or
// 4), threads per row and block (4..512, a power of 2 below 32, else a multiple of 32;
// 32..1024 with 1 item for ColSum programs) and blocks per row (a power of 2 up to the device's
// cluster limit, with ITEMS above 0: clusters hold rows in registers; default 1) of aligned rows:
// the knob bench/tune_rows.py sweeps to measure the heuristic below. Read once per process.
template <class P> void applyRowConfigOverride(RowGeometry& g, int64_t nv, int maxCluster) {
  static const char* env = std::getenv("FUSEGEN_ROW_CONFIG");
  if (!env || !*env)
    return;
  int items = -1, group = -1, cluster = 1;
  const int fields = std::sscanf(env, "%d,%d,%d", &items, &group, &cluster);
  const int minGroup = cluster > 1 ? 32 : kMinGroup;
  const bool valid = fields >= 2 && (items == 0 || items == 1 || items == 2 || items == 4) &&
                     group >= minGroup && group <= maxGroup<P>(items) &&
                     (group < 32 ? (group & (group - 1)) == 0 : group % 32 == 0) && cluster >= 1 &&
                     cluster <= maxCluster && (cluster & (cluster - 1)) == 0 &&
                     (cluster == 1 || items > 0);
  if (!valid)
    throw std::runtime_error(std::string("fusegen: FUSEGEN_ROW_CONFIG='") + env +
                             "' is not ITEMS,GROUP[,CLUSTER] with ITEMS in {0,1,2,4}, GROUP a "
                             "power of 2 below 32 or a multiple of 32, in [" +
                             std::to_string(minGroup) + ", " + std::to_string(maxGroup<P>(items)) +
                             "] and CLUSTER a power of 2 in [1, " + std::to_string(maxCluster) +
                             "] (above 1 only with ITEMS above 0)");
  if (items > 0 && static_cast<int64_t>(items) * group * cluster < nv)
    throw std::runtime_error(std::string("fusegen: FUSEGEN_ROW_CONFIG='") + env + "' holds " +
                             std::to_string(items * group * cluster) +
                             " vectors per row in registers; the row has " + std::to_string(nv));
  g.items = items;
  g.group = group;
  g.cluster = cluster;
}

// FUSEGEN_ROW_GRID=resident|rows overrides the grid rowGeometry picks for programs without
// ColSum outputs (the knob that measured the rule there). Read once per process.
inline std::optional<bool> rowGridPerRowOverride() {
  static const std::optional<bool> perRow = []() -> std::optional<bool> {
    const char* env = std::getenv("FUSEGEN_ROW_GRID");
    if (!env || !*env)
      return std::nullopt;
    const std::string value = env;
    if (value != "resident" && value != "rows")
      throw std::runtime_error("fusegen: FUSEGEN_ROW_GRID='" + value +
                               "' is not 'resident' or 'rows'");
    return value == "rows";
  }();
  return perRow;
}

// The reductions' words, or where more, combineColSums's (several rows per block; at the end
// of the kernel), then the cluster's slots (one row per block).
template <class P, typename S> size_t rowShared(const RowGeometry& g) {
  const int combine =
      colSumOutputs<P>() > 0 && g.rowsPerBlock > 1 ? g.rowsPerBlock * g.group * g.vec : 0;
  const int clusterSlots = g.cluster > 1 ? 2 * 2 * maxReductions<P>() : 0;
  return sizeof(compute_t<S>) *
         (std::max(rowSharedWords<P>(g.group, g.rowsPerBlock), combine) + clusterSlots);
}

// Calls f with the rowProgram variant g selects: 128-bit vectors with `items` of them kept in
// registers, or scalar accesses re-read per pass (unaligned or odd D). The occupancy query
// and the launch share it, so they always name the same kernel.
template <class P, typename S, class F> void withRowProgram(const RowGeometry& g, F&& f) {
  constexpr int V = vecWidth<S>();
  if (g.vec == 1)
    return f(rowProgram<P, S, 1, 0>);
  if constexpr (colSumOutputs<P>() > 0) // (rowShape splits only their rows, held in registers)
    if (g.cluster > 1)
      switch (g.items) {
      case 1:
        if constexpr (maxGroup<P>(1) > kMaxGroup)
          if (g.group > kMaxGroup)
            return f(rowProgram<P, S, V, 1, maxGroup<P>(1), true>);
        return f(rowProgram<P, S, V, 1, kMaxGroup, true>);
      case 2:
        return f(rowProgram<P, S, V, 2, kMaxGroup, true>);
      default:
        return f(rowProgram<P, S, V, 4, kMaxGroup, true>);
      }
  switch (g.items) {
  case 1:
    if constexpr (maxGroup<P>(1) > kMaxGroup)
      if (g.group > kMaxGroup)
        return f(rowProgram<P, S, V, 1, maxGroup<P>(1)>);
    return f(rowProgram<P, S, V, 1>);
  case 2:
    return f(rowProgram<P, S, V, 2>);
  case 4:
    return f(rowProgram<P, S, V, 4>);
  default:
    return f(rowProgram<P, S, V, 0>);
  }
}

// RowTraits::readOnce: one shifted pair of passes and no [..., D] outputs.
template <class P> constexpr bool rowReadOnce() {
  bool fullOutputs = false;
  for (int m = 0; m < P::kOutputs; ++m)
    fullOutputs = fullOutputs || P::outKind(m) == OutKind::Full;
  return P::kStages == 2 && shiftedStage<P>(1) && !fullOutputs;
}

// f(), an int, for the current device: computed once per device and call site (devices from
// 64 on: every time). Each caller's lambda is a type of its own, with its own cache.
template <class F> int oncePerDevice(F&& f) {
  static int known[64] = {}; // 0: not asked yet, else f() + 1
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  if (device >= 64)
    return f();
  if (known[device] == 0)
    known[device] = f() + 1;
  return known[device] - 1;
}

// Spilled registers a row variant may have and still be chosen: a few words, stored and
// reloaded outside the element loops, cost nothing measurable (cross_entropy's forward, 8
// bytes with 4 items); hundreds did (cross_entropy_mean's, 762 bytes: 12x slower than the row
// re-read by a variant that spills 64).
constexpr size_t kRowSpillTolerance = 64;

// The most vectors per thread (4, 2, 1; 0: none) whose variant holding aligned rows in
// registers spills at most kRowSpillTolerance bytes (RowTraits::maxItems), as compiled for
// the current device; asked once per device.
template <class P, typename S> int rowMaxItems() {
  return oncePerDevice([] {
    for (int items : {4, 2, 1}) {
      RowGeometry v{};
      v.vec = vecWidth<S>();
      v.items = items;
      v.cluster = 1;
      v.group = kMaxGroup;
      cudaFuncAttributes attributes{};
      withRowProgram<P, S>(v, [&](auto kernel) {
        check(cudaFuncGetAttributes(&attributes, kernel), "row kernel attributes");
      });
      if (attributes.localSizeBytes <= kRowSpillTolerance)
        return items;
    }
    return 0;
  });
}

// Whether this package's row kernels were compiled with clusters for the current device (a
// build for an older architecture running there has none); asked once per device.
template <class P, typename S> bool rowClustersCompiled() {
  return oncePerDevice([] {
    cudaFuncAttributes attributes{};
    check(cudaFuncGetAttributes(&attributes, rowProgram<P, S, vecWidth<S>(), 4, kMaxGroup, true>),
          "row kernel attributes");
    return attributes.binaryVersion >= 90 ? 1 : 0;
  }) == 1;
}

// The launch of g's variant over `blocks` blocks: a cluster of g.cluster blocks per row where
// it is above 1 (`attribute` holds the cluster's shape and must outlive the launch).
template <class P, typename S>
cudaLaunchConfig_t rowLaunchConfig(const RowGeometry& g, int blocks, cudaStream_t stream,
                                   cudaLaunchAttribute& attribute) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(g.group, g.rowsPerBlock);
  config.dynamicSmemBytes = rowShared<P, S>(g);
  config.stream = stream;
  attribute = cudaLaunchAttribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = g.cluster;
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  if (g.cluster > 1) {
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  return config;
}

template <class P, typename S, class Kernel>
void launchRowProgram(Kernel kernel, const RowGeometry& g, const typename P::Args& a,
                      compute_t<S>* partials, cudaStream_t stream) {
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = rowLaunchConfig<P, S>(g, g.blocks, stream, attribute);
  check(cudaLaunchKernelEx(&config, kernel, a, partials), "row program launch");
}

// How many blocks (or clusters, where g.cluster > 1) of the variant g selects the device runs
// at once: the occupancy calculator's answer (registers, shared memory, threads; for clusters
// also how they fit the GPCs), asked once per variant, size and device.
template <class P, typename S> int rowResidentUnits(const RowGeometry& g, int sms) {
  // [device][vector?][items 0, 1, 2, 4][warps 1..32][log2 cluster]; devices from 8 on ask
  // every time.
  static int cached[8][2][4][33][4] = {};
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  int clusterLog = 0;
  while ((1 << clusterLog) < g.cluster && clusterLog < 3)
    ++clusterLog;
  const int warps = std::min((g.group * g.rowsPerBlock + 31) / 32, 32);
  const int itemsIndex = g.items == 4 ? 3 : g.items;
  int unknown = 0;
  int& n = device < 8 ? cached[device][g.vec > 1][itemsIndex][warps][clusterLog] : unknown;
  if (n == 0) {
    withRowProgram<P, S>(g, [&](auto kernel) {
      if (g.cluster == 1) {
        int perSm = 0;
        check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                  &perSm, kernel, g.group * g.rowsPerBlock, rowShared<P, S>(g)),
              "occupancy");
        n = perSm * sms;
        return;
      }
      cudaLaunchAttribute attribute;
      const cudaLaunchConfig_t config = rowLaunchConfig<P, S>(g, g.cluster, nullptr, attribute);
      check(cudaOccupancyMaxActiveClusters(&n, kernel, &config), "cluster occupancy");
    });
    n = n < 1 ? 1 : n;
  }
  return n;
}

// The device's limit on blocks per cluster for the row kernels: the portable cluster size
// where the device and this build have clusters, else 1.
template <class P, typename S> int rowMaxCluster() {
  if constexpr (colSumOutputs<P>() > 0)
    return deviceInfo().clusters && rowClustersCompiled<P, S>() ? kMaxPortableCluster : 1;
  return 1;
}

template <class P, typename S> RowGeometry rowGeometry(const typename P::Args& a, int sms) {
  constexpr int V = vecWidth<S>();
  bool aligned = a.D % V == 0;
  for (int k = 0; k < P::kInputs; ++k) // (SwapHalves moves whole vectors: inColumn)
    aligned = aligned && (P::inMove(k) != Move::SwapHalves || (a.D / 2) % V == 0);
  aligned = aligned && rollsAlign<P>(a, V); // (so does Roll, by the call's shift)
  for (int k = 0; k < P::kInputs; ++k)
    if (P::inBcast(k) == Bcast::Full || P::inBcast(k) == Bcast::Col)
      aligned = aligned && aligned16(a.in[k]);
    else if (P::inBcast(k) == Bcast::TypedFull || P::inBcast(k) == Bcast::TypedCol)
      aligned = aligned && reinterpret_cast<uintptr_t>(a.in[k]) %
                                   (V * elemBytes<compute_t<S>>(P::inElem(k))) == 0;
  for (int m = 0; m < P::kOutputs; ++m)
    if (P::outKind(m) == OutKind::Full && a.need[m])
      aligned = aligned && outputAligned<P, S>(m, a.out[m], V);
  const int maxCluster = aligned ? rowMaxCluster<P, S>() : 1;
  RowGeometry g{};
  static_cast<RowShape&>(g) =
      rowShape({rowCacheWordsPerItem<P, S>(), colSumOutputs<P>() > 0,
                rowCachesPrefix<P, S>() ? 0 : rowExtraWordsPerItem<P, S>(),
                aligned ? rowMaxItems<P, S>() : 4, rowReadOnce<P>()},
               a.D, V, aligned, maxCluster);
  if (aligned) {
    applyRowConfigOverride<P>(g, (a.D + V - 1) / V, maxCluster);
    g.rowsPerBlock = rowsPerBlockFor(colSumOutputs<P>() > 0, g.group, g.items, g.cluster);
  }
  // The grid. With ColSum or Total outputs: as many blocks (clusters) as fit on the device at
  // once (the occupancy calculator: registers, shared memory, threads), each looping over
  // rows; more would only add partials. The others get a block (cluster) per row group,
  // scheduled as SMs free up. On the H100 (bf16, 32768x4096; FUSEGEN_ROW_GRID sweeps it) that
  // ran softmax's forward in 0.218 ms instead of 0.252 and l2norm's in 0.184 instead of 0.198;
  // since [D] inputs are re-read per row rather than kept in registers, it also wins for them:
  // rmsnorm 0.184 against 0.194, layernorm 0.186 against 0.201, add_rmsnorm 0.361 against
  // 0.378.
  int64_t units = (a.rows + g.rowsPerBlock - 1) / g.rowsPerBlock;
  // Clusters are resident too: the H100 schedules clusters more slowly than blocks.
  const bool perRow = colSumOutputs<P>() == 0 && totalOutputs<P>() == 0 && g.cluster == 1 &&
                      rowGridPerRowOverride().value_or(true);
  if (!perRow)
    units = std::min<int64_t>(units, rowResidentUnits<P, S>(g, sms));
  units = std::min<int64_t>(std::max<int64_t>(units, 1), INT_MAX / g.cluster); // grid-stride beyond
  g.blocks = static_cast<int>(units) * g.cluster;
  return g;
}

// Partials: [ColSum outputs][clusters][D], then [Total outputs][blocks]. Total outputs need
// theirs even when D == 0 (a sum over no columns, still written).
template <class P, typename S> size_t rowWorkspaceTyped(const typename P::Args& a) {
  if (a.rows == 0 || (totalOutputs<P>() == 0 && (colSumOutputs<P>() == 0 || a.D == 0)))
    return 0;
  RowGeometry g = rowGeometry<P, S>(a, deviceInfo().sms);
  return sizeof(compute_t<S>) *
         (colSumOutputs<P>() * static_cast<size_t>(g.partialRows()) * static_cast<size_t>(a.D) +
          totalOutputs<P>() * static_cast<size_t>(g.blocks));
}

template <class P, typename S> void rowRunTyped(const typename P::Args& a, cudaStream_t stream) {
  static_assert(colM2Outputs<P>() == 0, "the planner gives ColM2 outputs the colwise plan");
  if (a.rows == 0) { // with D == 0 rows still get their (empty) reductions
    if constexpr (scalarOutputs<P>() > 0) { // the [] outputs of no rows
      finishTotals<P, S><<<1, kThreads, 0, stream>>>(a, nullptr, 0);
      check(cudaGetLastError(), "finish launch");
    }
    return;
  }
  RowGeometry g = rowGeometry<P, S>(a, deviceInfo().sms);
  auto* partials = static_cast<compute_t<S>*>(a.workspace);
  if (colSumOutputs<P>() > 0 && g.items == 0) // accumulated in place: start from zero
    check(cudaMemsetAsync(partials, 0, rowWorkspaceTyped<P, S>(a), stream), "memset");
  withRowProgram<P, S>(
      g, [&](auto kernel) { launchRowProgram<P, S>(kernel, g, a, partials, stream); });
  for (int m = 0; m < P::kOutputs; ++m) {
    if (P::outKind(m) != OutKind::ColSum || !a.need[m] || a.D == 0)
      continue;
    const compute_t<S>* p =
        partials + static_cast<int64_t>(colSumSlot<P>(m)) * g.partialRows() * a.D;
    launchFinalizeCol<S>(p, g.partialRows(), a.D, a.out[m], P::outElem(m), stream);
    check(cudaGetLastError(), "ColSum finalize launch");
  }
  const compute_t<S>* totals =
      partials + static_cast<int64_t>(colSumOutputs<P>()) * g.partialRows() * a.D;
  if constexpr (totalOutputs<P>() > 0) {
    finishTotals<P, S><<<1, kThreads, 0, stream>>>(a, totals, g.blocks);
    check(cudaGetLastError(), "Total finalize launch");
  }
}

} // namespace fg::cuda
