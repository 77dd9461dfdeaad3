// fusegen CUDA row plan: runs a row program (fusegen_row.h) with a group of threads per row:
// a warp for short rows, up to 512 threads for long ones, several rows per block. The row
// is read from global memory once and kept in registers (ITEMS vectors of 128 bits per
// thread) across the reduction stages; rows too long for registers are re-read per stage
// (ITEMS == 0) and then mostly hit in L2. Reductions combine in a fixed order (warp
// shuffles, then shared memory across the group's warps), so results are deterministic.
// ColSum outputs are accumulated per thread over the block's rows and written as one
// partial row per block; finalizeCol (fusegen_cuda.cuh) adds the partials in order.
#pragma once

#include "fusegen_cuda.cuh"
#include "fusegen_row.h"

namespace fg::cuda {

constexpr int kMaxStages = 4;

template <class P> constexpr int maxReductions() {
  int n = 1;
  for (int s = 0; s < P::kStages; ++s)
    n = P::reductions(s) > n ? P::reductions(s) : n;
  return n;
}

template <class P> constexpr int colSumOutputs() {
  int n = 0;
  for (int m = 0; m < P::kOutputs; ++m)
    n += P::outKind(m) == OutKind::ColSum;
  return n;
}

// Registers hold only what each input needs: full inputs and [D] inputs in compact slots.
template <class P> FG_HD constexpr int inputSlot(int k, Bcast b) {
  int n = 0;
  for (int j = 0; j < k; ++j)
    n += P::inBcast(j) == b;
  return n;
}

template <class P> constexpr int inputsOf(Bcast b) { return inputSlot<P>(P::kInputs, b); }

template <class P> FG_HD constexpr int colSumSlot(int m) {
  int n = 0;
  for (int j = 0; j < m; ++j)
    n += P::outKind(j) == OutKind::ColSum;
  return n;
}

// Combines v[0..N) across the `group` threads of a row (threadIdx.x), in a fixed order;
// every thread of the group ends with the result. `shared` holds blockDim.y * warps * N.
template <class P, int S, typename T, int N>
__device__ __forceinline__ void groupReduce(T (&v)[N], T* shared) {
#pragma unroll
  for (int j = 0; j < N; ++j)
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      v[j] = reduceCombine(P::reduceKind(S, j), v[j], __shfl_xor_sync(0xffffffffu, v[j], offset));
  const int warps = blockDim.x / 32;
  if (warps > 1) {
    const int warp = threadIdx.x / 32;
    T* mine = shared + threadIdx.y * warps * N;
    if (threadIdx.x % 32 == 0)
#pragma unroll
      for (int j = 0; j < N; ++j)
        mine[warp * N + j] = v[j];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < N; ++j) {
      T r = mine[j];
      for (int w = 1; w < warps; ++w)
        r = reduceCombine(P::reduceKind(S, j), r, mine[w * N + j]);
      v[j] = r;
    }
    __syncthreads();
  }
}

template <class P, typename S, int V, int ITEMS> struct RowKernel {
  using T = compute_t<S>;
  static constexpr int kItems = ITEMS > 0 ? ITEMS : 1;
  static constexpr int kNR = maxReductions<P>();

  const typename P::Args& a;
  T attr[atLeastOne<P::kAttrs>()];
  T Dval;
  Vec<S, V> cache[atLeastOne<inputsOf<P>(Bcast::Full)>()][kItems]; // the row (ITEMS > 0)
  Vec<S, V> colCache[atLeastOne<inputsOf<P>(Bcast::Col)>()][kItems];
  T colAcc[atLeastOne<colSumOutputs<P>()>()][kItems][V];
  T scalar[P::kInputs];

  __device__ RowKernel(const typename P::Args& args) : a(args) {
#pragma unroll
    for (int k = 0; k < P::kAttrs; ++k)
      attr[k] = static_cast<T>(a.attr[k]);
    Dval = static_cast<T>(a.D);
#pragma unroll
    for (int k = 0; k < P::kInputs; ++k)
      scalar[k] = P::inBcast(k) == Bcast::Scalar ? toCompute(static_cast<const S*>(a.in[k])[0]) : T(0);
  }

  __device__ bool valid(int64_t vi) const { return vi * V < a.D; }

  // Inputs of the element at column c + l, from the caches (item i) or global memory.
  __device__ void elementInputs(int64_t row, int64_t vi, int i, int l, T* in) const {
    const int64_t c = vi * V;
#pragma unroll
    for (int k = 0; k < P::kInputs; ++k) {
      switch (P::inBcast(k)) {
      case Bcast::Full:
        in[k] = ITEMS > 0 ? toCompute(cache[inputSlot<P>(k, Bcast::Full)][i].v[l])
                          : toCompute(static_cast<const S*>(a.in[k])[row * a.D + c + l]);
        break;
      case Bcast::Col:
        in[k] = ITEMS > 0 ? toCompute(colCache[inputSlot<P>(k, Bcast::Col)][i].v[l])
                          : toCompute(static_cast<const S*>(a.in[k])[c + l]);
        break;
      default:
        in[k] = scalar[k];
      }
    }
  }

  template <int St> __device__ void stage(int64_t row, bool active, T* rv, T* shared) {
    if constexpr (St < P::kStages) {
      T acc[kNR];
#pragma unroll
      for (int j = 0; j < kNR; ++j)
        acc[j] = reduceIdentity<T>(j < P::reductions(St) ? P::reduceKind(St, j) : Reduce::Sum);
      if (active) {
        auto visit = [&](int64_t vi, int i) {
#pragma unroll
          for (int l = 0; l < V; ++l) {
            T in[P::kInputs], t[kNR];
            elementInputs(row, vi, i, l, in);
            P::template term<St, T, isHalf<S>()>(in, rv, attr, Dval, t);
#pragma unroll
            for (int j = 0; j < P::reductions(St); ++j)
              acc[j] = reduceCombine(P::reduceKind(St, j), acc[j], t[j]);
          }
        };
        forEachItem(visit);
      }
      groupReduce<P, St>(acc, shared);
      if (active)
        P::template rowAfter<St, T, isHalf<S>()>(acc, attr, Dval, rv);
      stage<St + 1>(row, active, rv, shared);
    }
  }

  template <class F> __device__ void forEachItem(F&& f) const {
    if constexpr (ITEMS > 0) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int64_t vi = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
        if (valid(vi))
          f(vi, i);
      }
    } else {
      for (int64_t vi = threadIdx.x; valid(vi); vi += blockDim.x)
        f(vi, 0);
    }
  }

  __device__ void run(T* shared, T* partials) {
    // Col inputs and ColSum accumulators belong to fixed columns: set up once per block.
    if constexpr (ITEMS > 0) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int64_t vi = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
#pragma unroll
        for (int k = 0; k < P::kInputs; ++k)
          if (P::inBcast(k) == Bcast::Col && valid(vi))
            colCache[inputSlot<P>(k, Bcast::Col)][i] = loadVec<S, V>(a.in[k], vi * V);
      }
    }
#pragma unroll
    for (int m = 0; m < atLeastOne<colSumOutputs<P>()>(); ++m)
#pragma unroll
      for (int i = 0; i < kItems; ++i)
#pragma unroll
        for (int l = 0; l < V; ++l)
          colAcc[m][i][l] = T(0);

    const int rowsPerBlock = blockDim.y;
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * rowsPerBlock; base < a.rows;
         base += static_cast<int64_t>(gridDim.x) * rowsPerBlock) {
      const int64_t row = base + threadIdx.y;
      const bool active = row < a.rows;
      T rv[atLeastOne<P::kRowValues>()];
      T rowIn[P::kInputs];
#pragma unroll
      for (int k = 0; k < P::kInputs; ++k)
        rowIn[k] = P::inBcast(k) == Bcast::Row && active
                       ? toCompute(static_cast<const S*>(a.in[k])[row])
                       : T(0);
      if (active) {
        P::template rowPre<T, isHalf<S>()>(rowIn, attr, Dval, rv);
        if constexpr (ITEMS > 0)
          forEachItem([&](int64_t vi, int i) {
#pragma unroll
            for (int k = 0; k < P::kInputs; ++k)
              if (P::inBcast(k) == Bcast::Full)
                cache[inputSlot<P>(k, Bcast::Full)][i] = loadVec<S, V>(a.in[k], row * a.D + vi * V);
          });
      }
      stage<0>(row, active, rv, shared);
      if (!active)
        continue;
      forEachItem([&](int64_t vi, int i) {
        Vec<S, V> y[P::kOutputs];
#pragma unroll
        for (int l = 0; l < V; ++l) {
          T in[P::kInputs], out[P::kOutputs];
          elementInputs(row, vi, i, l, in);
          P::template elem<T, isHalf<S>()>(in, rv, attr, Dval, out);
#pragma unroll
          for (int m = 0; m < P::kOutputs; ++m) {
            if (P::outKind(m) == OutKind::Full)
              y[m].v[l] = fromCompute<S>(out[m]);
            else if (P::outKind(m) == OutKind::ColSum) {
              if constexpr (ITEMS > 0)
                colAcc[colSumSlot<P>(m)][i][l] += out[m];
              else if (a.need[m])
                partials[(static_cast<int64_t>(colSumSlot<P>(m)) * gridDim.x + blockIdx.x) * a.D +
                         vi * V + l] += out[m];
            }
          }
        }
#pragma unroll
        for (int m = 0; m < P::kOutputs; ++m)
          if (P::outKind(m) == OutKind::Full && a.need[m])
            storeVec<S, V>(a.out[m], row * a.D + vi * V, y[m]);
      });
      if (threadIdx.x == 0) {
        T out[P::kOutputs];
        P::template rowOut<T, isHalf<S>()>(rv, attr, Dval, out);
#pragma unroll
        for (int m = 0; m < P::kOutputs; ++m)
          if (P::outKind(m) == OutKind::Row && a.need[m])
            static_cast<S*>(a.out[m])[row] = fromCompute<S>(out[m]);
      }
    }
    if constexpr (ITEMS > 0) {
      forEachItem([&](int64_t vi, int i) {
#pragma unroll
        for (int m = 0; m < P::kOutputs; ++m)
          if (P::outKind(m) == OutKind::ColSum && a.need[m])
#pragma unroll
            for (int l = 0; l < V; ++l)
              partials[(static_cast<int64_t>(colSumSlot<P>(m)) * gridDim.x + blockIdx.x) * a.D +
                       vi * V + l] = colAcc[colSumSlot<P>(m)][i][l];
      });
    }
  }
};

// Several rows per block need the same partial row per block for ColSum: the threads of
// different rows (threadIdx.y) would race on it, so ColSum programs use one row per block
// row-group and combine threadIdx.y rows in shared memory first. To keep the plan simple and
// deterministic, programs with ColSum outputs run with blockDim.y == 1.
// At most 512 threads per row, and two such blocks per SM: 64 registers per thread. (Letting
// the compiler use 128 halved the occupancy and made the backward 2.5x slower on the H100.)
constexpr int kMaxGroup = 512;

template <class P, typename S, int V, int ITEMS>
__global__ void __launch_bounds__(kMaxGroup, 2) rowProgram(const typename P::Args a,
                                                        compute_t<S>* partials) {
  extern __shared__ unsigned char sharedRaw[];
  RowKernel<P, S, V, ITEMS> k(a);
  k.run(reinterpret_cast<compute_t<S>*>(sharedRaw), partials);
}

struct RowGeometry {
  int group;        // threads per row
  int rowsPerBlock; // blockDim.y
  int items;        // vectors per thread kept in registers; 0: re-read per stage
  int vec;          // elements per vector
  int blocks;
};

template <class P, typename S> RowGeometry rowGeometry(const typename P::Args& a, int sms) {
  constexpr int V = vecWidth<S>();
  bool aligned = a.D % V == 0;
  for (int k = 0; k < P::kInputs; ++k)
    if (P::inBcast(k) == Bcast::Full || P::inBcast(k) == Bcast::Col)
      aligned = aligned && aligned16(a.in[k]);
  for (int m = 0; m < P::kOutputs; ++m)
    if (P::outKind(m) == OutKind::Full && a.need[m])
      aligned = aligned && aligned16(a.out[m]);
  RowGeometry g{};
  g.vec = aligned ? V : 1;
  const int64_t nv = (a.D + g.vec - 1) / g.vec;
  // Registers the row cache needs per thread and item, in 32-bit words.
  int full = 0, col = 0;
  for (int k = 0; k < P::kInputs; ++k) {
    full += P::inBcast(k) == Bcast::Full;
    col += P::inBcast(k) == Bcast::Col;
  }
  const int wordsPerItem = (full + col) * g.vec * static_cast<int>(sizeof(S)) / 4 +
                           colSumOutputs<P>() * g.vec * static_cast<int>(sizeof(compute_t<S>)) / 4;
  g.items = 0;
  // Items per thread: the fewest that cover the row, moving up to 4 only when 4 items fit
  // in 64 registers. (Measured on the H100, 32768x4096 bf16: rmsnorm's forward+backward ran in
  // 0.91 ms with 1 item x 512 threads and 2.0-2.3 ms with 2 items x 256.) Rows longer than
  // 4 x 512 vectors are re-read per pass (ITEMS == 0).
  for (int items : {1, 2, 4}) {
    if (!aligned)
      break;
    if (static_cast<int64_t>(items) * kMaxGroup >= nv && items * wordsPerItem <= 64) {
      g.items = items;
      if (items < 4 && nv >= 128 * 4 / items && 4 * wordsPerItem <= 64)
        continue;
      break;
    }
  }
  const int64_t perThread = g.items > 0 ? g.items : 8;
  int group = 32;
  while (group < kMaxGroup && static_cast<int64_t>(group) * perThread < nv)
    group *= 2;
  g.group = group;
  g.rowsPerBlock = colSumOutputs<P>() > 0 ? 1 : (group >= 256 ? 1 : 256 / group);
  int64_t blocks = (a.rows + g.rowsPerBlock - 1) / g.rowsPerBlock;
  const int64_t resident = static_cast<int64_t>(sms) * (2048 / (group * g.rowsPerBlock));
  if (blocks > resident)
    blocks = resident;
  g.blocks = static_cast<int>(blocks < 1 ? 1 : blocks);
  return g;
}

template <class P, typename S> size_t rowWorkspaceTyped(const typename P::Args& a) {
  if (colSumOutputs<P>() == 0 || a.rows * a.D == 0)
    return 0;
  RowGeometry g = rowGeometry<P, S>(a, smCount());
  return sizeof(compute_t<S>) * colSumOutputs<P>() * static_cast<size_t>(g.blocks) * a.D;
}

// Shared memory for combining reductions across the warps of each row's group.
template <class P, typename S> size_t rowShared(const RowGeometry& g) {
  return sizeof(compute_t<S>) * g.rowsPerBlock * (g.group / 32) * maxReductions<P>();
}

template <class P, typename S, int V>
void launchRow(const RowGeometry& g, const typename P::Args& a, compute_t<S>* partials,
               cudaStream_t stream) {
  dim3 block(g.group, g.rowsPerBlock);
  size_t shared = rowShared<P, S>(g);
  switch (g.items) {
  case 1:
    return rowProgram<P, S, V, 1><<<g.blocks, block, shared, stream>>>(a, partials);
  case 2:
    return rowProgram<P, S, V, 2><<<g.blocks, block, shared, stream>>>(a, partials);
  case 4:
    return rowProgram<P, S, V, 4><<<g.blocks, block, shared, stream>>>(a, partials);
  default:
    return rowProgram<P, S, V, 0><<<g.blocks, block, shared, stream>>>(a, partials);
  }
}

template <class P, typename S> void rowRunTyped(const typename P::Args& a, cudaStream_t stream) {
  if (a.rows == 0) // with D == 0 rows still get their (empty) reductions
    return;
  RowGeometry g = rowGeometry<P, S>(a, smCount());
  auto* partials = static_cast<compute_t<S>*>(a.workspace);
  if (colSumOutputs<P>() > 0 && g.items == 0) // accumulated in place: start from zero
    check(cudaMemsetAsync(partials, 0, rowWorkspaceTyped<P, S>(a), stream), "memset");
  if (g.vec == 1) // unaligned or odd D: scalar accesses, re-read per pass
    rowProgram<P, S, 1, 0><<<g.blocks, dim3(g.group, g.rowsPerBlock), rowShared<P, S>(g),
                             stream>>>(a, partials);
  else
    launchRow<P, S, vecWidth<S>()>(g, a, partials, stream);
  check(cudaGetLastError(), "row program launch");
  for (int m = 0; m < P::kOutputs; ++m) {
    if (P::outKind(m) != OutKind::ColSum || !a.need[m] || a.D == 0)
      continue;
    const compute_t<S>* p = partials + static_cast<int64_t>(colSumSlot<P>(m)) * g.blocks * a.D;
    int64_t blocks = (a.D + kThreads - 1) / kThreads;
    finalizeCol<S><<<static_cast<unsigned>(blocks > 65535 ? 65535 : blocks), kThreads, 0, stream>>>(
        p, g.blocks, a.D, static_cast<S*>(a.out[m]));
    check(cudaGetLastError(), "ColSum finalize launch");
  }
}

template <class P> size_t rowWorkspace(const typename P::Args& a) {
  using Op = P;
  FG_CUDA_DISPATCH(a.dtype, rowWorkspaceTyped, a);
}

template <class P> void rowRun(const typename P::Args& a, void* stream) {
  using Op = P;
  FG_CUDA_DISPATCH(a.dtype, rowRunTyped, a, static_cast<cudaStream_t>(stream));
}

} // namespace fg::cuda
