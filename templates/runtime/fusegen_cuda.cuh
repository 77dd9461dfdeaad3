// fusegen CUDA plans: the kernels every elementwise op is instantiated from.
//
// An op is a struct `Op` generated from its spec (see generated/<op>/<op>.h):
//   kInputs, kOutputs, kAttrs; bcast(k) -> how input k broadcasts;
//   forward<T>(in, attr, D, out) and backward<T>(in, attr, D, gout, gin): one element, in the
//   compute type T (float for half types, double for double).
// Plans:
//   flat     - no [D] inputs: one block per kThreads x kFlatUnroll 128-bit vectors (a
//              grid-stride loop covers what 2^31 - 1 blocks do not), scalar tail.
//   colwise  - [D] inputs, or gradients that must be summed over rows: each thread owns VEC
//              columns (its [D] values stay in registers) and walks rows; in backward it
//              accumulates the broadcast gradients in fp32/fp64 and writes one partial sum
//              per (row chunk, column); finalize adds the partials in a fixed order, so the
//              result is deterministic (no atomics).
#pragma once

#include "fusegen_runtime.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace fg::cuda {

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("fusegen: CUDA error in ") + what + ": " +
                             cudaGetErrorString(err));
}

inline int smCount() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  static int cached[64] = {0};
  if (device < 64 && cached[device])
    return cached[device];
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  if (device < 64)
    cached[device] = sms;
  return sms;
}

template <typename S, int V> struct alignas(sizeof(S) * V) Vec {
  S v[V];
};

template <typename S, int V, typename I>
__device__ __forceinline__ Vec<S, V> loadVec(const void* base, I index) {
  return reinterpret_cast<const Vec<S, V>*>(static_cast<const S*>(base) + index)[0];
}

// A 128-bit load through the read-only data path, for inputs no kernel of the op writes.
template <typename S, int V, typename I>
__device__ __forceinline__ Vec<S, V> loadVecReadOnly(const void* base, I index) {
  static_assert(sizeof(Vec<S, V>) == sizeof(uint4), "128-bit vectors only");
  const uint4 bits = __ldg(reinterpret_cast<const uint4*>(static_cast<const S*>(base) + index));
  Vec<S, V> x;
  memcpy(&x, &bits, sizeof(x));
  return x;
}

template <typename S, int V, typename I>
__device__ __forceinline__ void storeVec(void* base, I index, const Vec<S, V>& x) {
  reinterpret_cast<Vec<S, V>*>(static_cast<S*>(base) + index)[0] = x;
}

constexpr int kThreads = 256;
// Flat plan: vectors per thread and loop iteration (bench/flat_unroll.cu measures 1, 2, 4:
// within 1% of each other with a block per kThreads x unroll vectors; 1 was best for sigmoid).
constexpr int kFlatUnroll = 1;

// ---------------------------------------------------------------- flat plan
template <class Op, typename S, int V, typename I, class Args, int kUnroll = kFlatUnroll>
__global__ void __launch_bounds__(kThreads) flatForward(const Args a) {
  using T = compute_t<S>;
  T attr[atLeastOne<Op::kAttrs>()];
#pragma unroll
  for (int k = 0; k < Op::kAttrs; ++k)
    attr[k] = static_cast<T>(a.attr[k]);
  const T Dval = static_cast<T>(a.D);
  T scalar[Op::kInputs];
#pragma unroll
  for (int k = 0; k < Op::kInputs; ++k)
    scalar[k] = Op::bcast(k) == Bcast::Scalar ? toCompute(static_cast<const S*>(a.in[k])[0]) : T(0);
  const I n = static_cast<I>(a.rows * a.D);
  const I nvec = n / V;
  const I stride = static_cast<I>(gridDim.x) * kThreads;
  // kUnroll vectors per thread and iteration, all loaded before any is stored: the stores
  // may alias the inputs, so without this the compiler keeps one load in flight per thread.
  for (I base = static_cast<I>(blockIdx.x) * kThreads * kUnroll + threadIdx.x; base < nvec;
       base += stride * kUnroll) {
    Vec<S, V> x[kUnroll][Op::kInputs];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int k = 0; k < Op::kInputs; ++k)
        if (Op::bcast(k) == Bcast::Full && base + u * kThreads < nvec)
          x[u][k] = loadVec<S, V>(a.in[k], (base + u * kThreads) * V);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const I v = base + u * kThreads;
      if (v >= nvec)
        break;
      Vec<S, V> y[Op::kOutputs];
#pragma unroll
      for (int l = 0; l < V; ++l) {
        T in[Op::kInputs], out[Op::kOutputs];
#pragma unroll
        for (int k = 0; k < Op::kInputs; ++k)
          in[k] = Op::bcast(k) == Bcast::Full ? toCompute(x[u][k].v[l]) : scalar[k];
        Op::template forward<T, isHalf<S>()>(in, attr, Dval, out);
#pragma unroll
        for (int m = 0; m < Op::kOutputs; ++m)
          y[m].v[l] = fromCompute<S>(out[m]);
      }
#pragma unroll
      for (int m = 0; m < Op::kOutputs; ++m)
        storeVec<S, V>(a.out[m], v * V, y[m]);
    }
  }
  for (I i = nvec * V + static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    T in[Op::kInputs], out[Op::kOutputs];
#pragma unroll
    for (int k = 0; k < Op::kInputs; ++k)
      in[k] = Op::bcast(k) == Bcast::Full ? toCompute(static_cast<const S*>(a.in[k])[i]) : scalar[k];
    Op::template forward<T, isHalf<S>()>(in, attr, Dval, out);
#pragma unroll
    for (int m = 0; m < Op::kOutputs; ++m)
      static_cast<S*>(a.out[m])[i] = fromCompute<S>(out[m]);
  }
}

template <class Op, typename S, int V, typename I, class Args, int kUnroll = kFlatUnroll>
__global__ void __launch_bounds__(kThreads) flatBackward(const Args a) {
  using T = compute_t<S>;
  T attr[atLeastOne<Op::kAttrs>()];
#pragma unroll
  for (int k = 0; k < Op::kAttrs; ++k)
    attr[k] = static_cast<T>(a.attr[k]);
  const T Dval = static_cast<T>(a.D);
  T scalar[Op::kInputs];
#pragma unroll
  for (int k = 0; k < Op::kInputs; ++k)
    scalar[k] = Op::bcast(k) == Bcast::Scalar ? toCompute(static_cast<const S*>(a.in[k])[0]) : T(0);
  const I n = static_cast<I>(a.rows * a.D);
  const I nvec = n / V;
  const I stride = static_cast<I>(gridDim.x) * kThreads;
  for (I base = static_cast<I>(blockIdx.x) * kThreads * kUnroll + threadIdx.x; base < nvec;
       base += stride * kUnroll) {
    Vec<S, V> x[kUnroll][Op::kInputs], g[kUnroll][Op::kOutputs];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * kThreads >= nvec)
        break;
#pragma unroll
      for (int k = 0; k < Op::kInputs; ++k)
        if (Op::bcast(k) == Bcast::Full)
          x[u][k] = loadVec<S, V>(a.in[k], (base + u * kThreads) * V);
#pragma unroll
      for (int m = 0; m < Op::kOutputs; ++m)
        g[u][m] = loadVec<S, V>(a.gout[m], (base + u * kThreads) * V);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const I v = base + u * kThreads;
      if (v >= nvec)
        break;
      Vec<S, V> dx[Op::kInputs];
#pragma unroll
      for (int l = 0; l < V; ++l) {
        T in[Op::kInputs], gout[Op::kOutputs], gin[Op::kInputs];
#pragma unroll
        for (int k = 0; k < Op::kInputs; ++k)
          in[k] = Op::bcast(k) == Bcast::Full ? toCompute(x[u][k].v[l]) : scalar[k];
#pragma unroll
        for (int m = 0; m < Op::kOutputs; ++m)
          gout[m] = toCompute(g[u][m].v[l]);
        Op::template backward<T, isHalf<S>()>(in, attr, Dval, gout, gin);
#pragma unroll
        for (int k = 0; k < Op::kInputs; ++k)
          dx[k].v[l] = fromCompute<S>(gin[k]);
      }
#pragma unroll
      for (int k = 0; k < Op::kInputs; ++k)
        if (Op::bcast(k) == Bcast::Full && a.need[k])
          storeVec<S, V>(a.gin[k], v * V, dx[k]);
    }
  }
  for (I i = nvec * V + static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    T in[Op::kInputs], gout[Op::kOutputs], gin[Op::kInputs];
#pragma unroll
    for (int k = 0; k < Op::kInputs; ++k)
      in[k] = Op::bcast(k) == Bcast::Full ? toCompute(static_cast<const S*>(a.in[k])[i]) : scalar[k];
#pragma unroll
    for (int m = 0; m < Op::kOutputs; ++m)
      gout[m] = toCompute(static_cast<const S*>(a.gout[m])[i]);
    Op::template backward<T, isHalf<S>()>(in, attr, Dval, gout, gin);
#pragma unroll
    for (int k = 0; k < Op::kInputs; ++k)
      if (Op::bcast(k) == Bcast::Full && a.need[k])
        static_cast<S*>(a.gin[k])[i] = fromCompute<S>(gin[k]);
  }
}

// ---------------------------------------------------------------- colwise plan
constexpr int64_t kBackwardRowsPerChunk = 32; // see colGeometry

struct ColGeometry {
  dim3 block;
  dim3 grid;
};

// minRowsPerChunk: rows each block row (grid.y) covers at least. The backward's chunks each
// write a [D] row of partial sums: with one chunk per row (small shapes) writing and re-reading
// the partials cost more than the rows themselves, so it asks for 32. The forward writes no
// partials and asks for 1: 32 left bias_gelu's 512x4096 forward 32 blocks (0.023 ms against
// 0.009 with 1).
inline ColGeometry colGeometry(int64_t rows, int64_t D, int V, int sms, int64_t minRowsPerChunk) {
  int64_t groups = (D + V - 1) / V;
  int bx = 1;
  while (bx < groups && bx < kThreads)
    bx *= 2;
  int by = kThreads / bx;
  int64_t gx = (groups + bx - 1) / bx;
  int64_t wanted = (static_cast<int64_t>(sms) * 2048 / kThreads + gx - 1) / gx;
  int64_t gy = (rows + by * minRowsPerChunk - 1) / (by * minRowsPerChunk);
  if (gy > wanted)
    gy = wanted;
  if (gy > 65535)
    gy = 65535;
  if (gy < 1)
    gy = 1;
  return ColGeometry{dim3(bx, by), dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy))};
}

template <class Op> constexpr int reducedInputs() {
  int n = 0;
  for (int k = 0; k < Op::kInputs; ++k)
    n += Op::bcast(k) == Bcast::Col || Op::bcast(k) == Bcast::Scalar;
  return n;
}

template <class Op> FG_HD constexpr int reducedSlot(int k) {
  int n = 0;
  for (int j = 0; j < k; ++j)
    n += Op::bcast(j) == Bcast::Col || Op::bcast(j) == Bcast::Scalar;
  return n;
}

template <class Op, typename S, int V, class Args>
__global__ void colwiseForward(const Args a) {
  using T = compute_t<S>;
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (c >= a.D)
    return;
  T attr[atLeastOne<Op::kAttrs>()];
#pragma unroll
  for (int k = 0; k < Op::kAttrs; ++k)
    attr[k] = static_cast<T>(a.attr[k]);
  const T Dval = static_cast<T>(a.D);
  T fixed[Op::kInputs][V]; // [D] and scalar inputs: loaded once, reused for every row
#pragma unroll
  for (int k = 0; k < Op::kInputs; ++k)
#pragma unroll
    for (int l = 0; l < V; ++l)
      fixed[k][l] = Op::bcast(k) == Bcast::Col      ? toCompute(static_cast<const S*>(a.in[k])[c + l])
                    : Op::bcast(k) == Bcast::Scalar ? toCompute(static_cast<const S*>(a.in[k])[0])
                                                    : T(0);
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < a.rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const int64_t off = r * a.D + c;
    Vec<S, V> x[Op::kInputs], y[Op::kOutputs];
#pragma unroll
    for (int k = 0; k < Op::kInputs; ++k)
      if (Op::bcast(k) == Bcast::Full)
        x[k] = loadVec<S, V>(a.in[k], off);
#pragma unroll
    for (int l = 0; l < V; ++l) {
      T in[Op::kInputs], out[Op::kOutputs];
#pragma unroll
      for (int k = 0; k < Op::kInputs; ++k)
        in[k] = Op::bcast(k) == Bcast::Full ? toCompute(x[k].v[l]) : fixed[k][l];
      Op::template forward<T, isHalf<S>()>(in, attr, Dval, out);
#pragma unroll
      for (int m = 0; m < Op::kOutputs; ++m)
        y[m].v[l] = fromCompute<S>(out[m]);
    }
#pragma unroll
    for (int m = 0; m < Op::kOutputs; ++m)
      storeVec<S, V>(a.out[m], off, y[m]);
  }
}

template <class Op, typename S, int V, class Args>
__global__ void colwiseBackward(const Args a, compute_t<S>* partials) {
  using T = compute_t<S>;
  extern __shared__ unsigned char sharedRaw[];
  T* shared = reinterpret_cast<T*>(sharedRaw);
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  const bool active = c < a.D;
  T attr[atLeastOne<Op::kAttrs>()];
#pragma unroll
  for (int k = 0; k < Op::kAttrs; ++k)
    attr[k] = static_cast<T>(a.attr[k]);
  const T Dval = static_cast<T>(a.D);
  T fixed[Op::kInputs][V];
  T acc[Op::kInputs][V];
#pragma unroll
  for (int k = 0; k < Op::kInputs; ++k)
#pragma unroll
    for (int l = 0; l < V; ++l) {
      acc[k][l] = T(0);
      fixed[k][l] = !active                         ? T(0)
                    : Op::bcast(k) == Bcast::Col    ? toCompute(static_cast<const S*>(a.in[k])[c + l])
                    : Op::bcast(k) == Bcast::Scalar ? toCompute(static_cast<const S*>(a.in[k])[0])
                                                    : T(0);
    }
  if (active) {
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < a.rows;
         r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
      const int64_t off = r * a.D + c;
      Vec<S, V> x[Op::kInputs], g[Op::kOutputs], dx[Op::kInputs];
#pragma unroll
      for (int k = 0; k < Op::kInputs; ++k)
        if (Op::bcast(k) == Bcast::Full)
          x[k] = loadVec<S, V>(a.in[k], off);
#pragma unroll
      for (int m = 0; m < Op::kOutputs; ++m)
        g[m] = loadVec<S, V>(a.gout[m], off);
#pragma unroll
      for (int l = 0; l < V; ++l) {
        T in[Op::kInputs], gout[Op::kOutputs], gin[Op::kInputs];
#pragma unroll
        for (int k = 0; k < Op::kInputs; ++k)
          in[k] = Op::bcast(k) == Bcast::Full ? toCompute(x[k].v[l]) : fixed[k][l];
#pragma unroll
        for (int m = 0; m < Op::kOutputs; ++m)
          gout[m] = toCompute(g[m].v[l]);
        Op::template backward<T, isHalf<S>()>(in, attr, Dval, gout, gin);
#pragma unroll
        for (int k = 0; k < Op::kInputs; ++k) {
          if (Op::bcast(k) == Bcast::Full)
            dx[k].v[l] = fromCompute<S>(gin[k]);
          else
            acc[k][l] += gin[k];
        }
      }
#pragma unroll
      for (int k = 0; k < Op::kInputs; ++k)
        if (Op::bcast(k) == Bcast::Full && a.need[k])
          storeVec<S, V>(a.gin[k], off, dx[k]);
    }
  }
  // Sum each thread column's partial over threadIdx.y, in a fixed order.
  const int width = blockDim.x * V;
#pragma unroll
  for (int k = 0; k < Op::kInputs; ++k) {
    if (Op::bcast(k) == Bcast::Full || !a.need[k])
      continue;
#pragma unroll
    for (int l = 0; l < V; ++l)
      shared[threadIdx.y * width + threadIdx.x * V + l] = acc[k][l];
    __syncthreads();
    if (threadIdx.y == 0 && active) {
      T* out = partials + static_cast<int64_t>(reducedSlot<Op>(k)) * gridDim.y * a.D +
               static_cast<int64_t>(blockIdx.y) * a.D;
#pragma unroll
      for (int l = 0; l < V; ++l) {
        T s = T(0);
        for (unsigned y = 0; y < blockDim.y; ++y)
          s += shared[y * width + threadIdx.x * V + l];
        out[c + l] = s;
      }
    }
    __syncthreads();
  }
}

// Blocks of kThreads for the column-by-column kernels below (each strides over the columns a
// 65535-block grid does not cover).
inline unsigned columnBlocks(int64_t D) {
  const int64_t blocks = (D + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks > 65535 ? 65535 : blocks < 1 ? 1 : blocks);
}

// Sums partials[chunks][D] over chunks into a [D] gradient, in a fixed order.
template <typename S>
__global__ void finalizeCol(const compute_t<S>* partials, int chunks, int64_t D, S* out) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < D;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    compute_t<S> s = 0;
    for (int j = 0; j < chunks; ++j)
      s += partials[static_cast<int64_t>(j) * D + c];
    out[c] = fromCompute<S>(s);
  }
}

// Row 0 of `partials` ([chunks][D]) becomes the sum of all chunks, column by column, in
// chunk order; each thread reads its column's chunks before it writes row 0.
template <typename T> __global__ void sumChunksInPlace(T* partials, int chunks, int64_t D) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < D;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T s = 0;
    for (int j = 0; j < chunks; ++j)
      s += partials[static_cast<int64_t>(j) * D + c];
    partials[c] = s;
  }
}

template <typename S>
__global__ void __launch_bounds__(kThreads) finalizeScalar(const compute_t<S>* partials,
                                                           int64_t n, S* out) {
  __shared__ compute_t<S> shared[kThreads];
  compute_t<S> s = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads)
    s += partials[i];
  shared[threadIdx.x] = s;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width)
      shared[threadIdx.x] += shared[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    out[0] = fromCompute<S>(shared[0]);
}

// ---------------------------------------------------------------- launchers
template <typename S> constexpr int vecWidth() { return 16 / static_cast<int>(sizeof(S)); }

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <class Op> bool hasCol() {
  for (int k = 0; k < Op::kInputs; ++k)
    if (Op::bcast(k) == Bcast::Col)
      return true;
  return false;
}

// Vector width for this call: 128-bit when every pointer is 16-byte aligned and, for the
// colwise plan, D is a multiple of the width; otherwise 1.
template <class Op, typename S, class Args> int pickVec(const Args& a, bool colwise) {
  constexpr int V = vecWidth<S>();
  if (colwise && a.D % V != 0)
    return 1;
  for (int k = 0; k < Op::kInputs; ++k)
    if (Op::bcast(k) != Bcast::Scalar && !aligned16(a.in[k]))
      return 1;
  return V;
}

// Flat-plan blocks: one per kThreads x unroll vectors, left to the hardware to schedule as
// SMs free up; the grid-stride loop covers what 2^31 - 1 blocks do not. One wave of resident
// blocks striding over the work instead ran sigmoid's forward 15% slower on the H100 (0.2124
// against 0.1833 ms), short of eager's 0.182, and mul's backward 6% slower
// (bench/flat_unroll.cu).
inline unsigned flatBlocks(int64_t work, int unroll = kFlatUnroll) {
  int64_t blocks = (work + kThreads * unroll - 1) / (kThreads * unroll);
  constexpr int64_t kMaxBlocks = 0x7fffffff;
  if (blocks > kMaxBlocks)
    blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// Calls f(vector width as std::integral_constant, index type) for the flat variant of n
// elements: 128-bit vectors when `vec`, 64-bit indices beyond 2^30 elements (32-bit ones keep
// that margin for the grid stride).
template <typename S, class F> void withFlatVariant(int64_t n, bool vec, F&& f) {
  constexpr int V = vecWidth<S>();
  const bool wide = n > (int64_t(1) << 30);
  if (vec && wide)
    f(std::integral_constant<int, V>{}, int64_t{});
  else if (vec)
    f(std::integral_constant<int, V>{}, int32_t{});
  else if (wide)
    f(std::integral_constant<int, 1>{}, int64_t{});
  else
    f(std::integral_constant<int, 1>{}, int32_t{});
}

template <class Op, typename S, class Args> void forwardTyped(const Args& a, cudaStream_t stream) {
  const int64_t n = a.rows * a.D;
  if (n == 0)
    return;
  const int sms = smCount();
  constexpr int V = vecWidth<S>();
  if (hasCol<Op>()) {
    bool vec = pickVec<Op, S>(a, true) == V;
    for (int m = 0; m < Op::kOutputs; ++m)
      vec = vec && aligned16(a.out[m]);
    ColGeometry g = colGeometry(a.rows, a.D, vec ? V : 1, sms, 1);
    if (vec)
      colwiseForward<Op, S, V><<<g.grid, g.block, 0, stream>>>(a);
    else
      colwiseForward<Op, S, 1><<<g.grid, g.block, 0, stream>>>(a);
  } else {
    bool vec = pickVec<Op, S>(a, false) == V;
    for (int m = 0; m < Op::kOutputs; ++m)
      vec = vec && aligned16(a.out[m]);
    withFlatVariant<S>(n, vec, [&](auto width, auto index) {
      constexpr int W = decltype(width)::value;
      flatForward<Op, S, W, decltype(index)><<<flatBlocks(n / W), kThreads, 0, stream>>>(a);
    });
  }
  check(cudaGetLastError(), "forward launch");
}

template <class Op, class Args> bool needsReduction(const Args& a) {
  for (int k = 0; k < Op::kInputs; ++k)
    if (Op::bcast(k) != Bcast::Full && a.need[k])
      return true;
  return false;
}

// Whether the backward uses 128-bit vectors: every input, output gradient and full input
// gradient aligned (colwise: D a multiple of the width too).
template <class Op, typename S, class Args> bool backwardVec(const Args& a, bool colwise) {
  bool vec = pickVec<Op, S>(a, colwise) == vecWidth<S>();
  for (int m = 0; m < Op::kOutputs; ++m)
    vec = vec && aligned16(a.gout[m]);
  for (int k = 0; k < Op::kInputs; ++k)
    if (Op::bcast(k) == Bcast::Full && a.need[k])
      vec = vec && aligned16(a.gin[k]);
  return vec;
}

// The [D] partial sums of the colwise backward: its geometry, so the same as the launch's.
template <class Op, typename S, class Args> size_t workspaceTyped(const Args& a) {
  if (!needsReduction<Op>(a) || a.rows * a.D == 0)
    return 0;
  const int width = backwardVec<Op, S>(a, true) ? vecWidth<S>() : 1;
  ColGeometry g = colGeometry(a.rows, a.D, width, smCount(), kBackwardRowsPerChunk);
  return sizeof(compute_t<S>) * static_cast<size_t>(reducedInputs<Op>()) * g.grid.y * a.D;
}

template <class Op, typename S, class Args> void backwardTyped(const Args& a, cudaStream_t stream) {
  const int64_t n = a.rows * a.D;
  if (n == 0)
    return;
  const int sms = smCount();
  constexpr int V = vecWidth<S>();
  const bool colwise = hasCol<Op>() || needsReduction<Op>(a);
  const bool vec = backwardVec<Op, S>(a, colwise);
  if (colwise) {
    ColGeometry g = colGeometry(a.rows, a.D, vec ? V : 1, sms, kBackwardRowsPerChunk);
    auto* partials = static_cast<compute_t<S>*>(a.workspace);
    size_t shared = sizeof(compute_t<S>) * g.block.x * g.block.y * (vec ? V : 1);
    if (vec)
      colwiseBackward<Op, S, V><<<g.grid, g.block, shared, stream>>>(a, partials);
    else
      colwiseBackward<Op, S, 1><<<g.grid, g.block, shared, stream>>>(a, partials);
    check(cudaGetLastError(), "backward launch");
    for (int k = 0; k < Op::kInputs; ++k) {
      if (Op::bcast(k) == Bcast::Full || !a.need[k])
        continue;
      compute_t<S>* p = partials + static_cast<int64_t>(reducedSlot<Op>(k)) * g.grid.y * a.D;
      if (Op::bcast(k) == Bcast::Col) {
        finalizeCol<S><<<columnBlocks(a.D), kThreads, 0, stream>>>(
            p, static_cast<int>(g.grid.y), a.D, static_cast<S*>(a.gin[k]));
      } else { // two stages: the chunks of each column (in place), then one block over D
        sumChunksInPlace<compute_t<S>><<<columnBlocks(a.D), kThreads, 0, stream>>>(
            p, static_cast<int>(g.grid.y), a.D);
        finalizeScalar<S><<<1, kThreads, 0, stream>>>(p, a.D, static_cast<S*>(a.gin[k]));
      }
      check(cudaGetLastError(), "gradient finalize launch");
    }
    return;
  }
  withFlatVariant<S>(n, vec, [&](auto width, auto index) {
    constexpr int W = decltype(width)::value;
    flatBackward<Op, S, W, decltype(index)><<<flatBlocks(n / W), kThreads, 0, stream>>>(a);
  });
  check(cudaGetLastError(), "backward launch");
}

// dtype dispatch: the entry points generated ops call.
#define FG_CUDA_DISPATCH(dtype, FN, ...)                                                           \
  switch (dtype) {                                                                                 \
  case ::fg::DType::Float32:                                                                       \
    return FN<Op, float>(__VA_ARGS__);                                                             \
  case ::fg::DType::Float64:                                                                       \
    return FN<Op, double>(__VA_ARGS__);                                                            \
  case ::fg::DType::Float16:                                                                       \
    return FN<Op, __half>(__VA_ARGS__);                                                            \
  case ::fg::DType::BFloat16:                                                                      \
    return FN<Op, __nv_bfloat16>(__VA_ARGS__);                                                     \
  }                                                                                                \
  throw std::runtime_error("fusegen: unsupported dtype")

template <class Op, class Args> void forward(const Args& a, void* stream) {
  FG_CUDA_DISPATCH(a.dtype, forwardTyped, a, static_cast<cudaStream_t>(stream));
}
template <class Op, class Args> size_t backwardWorkspace(const Args& a) {
  FG_CUDA_DISPATCH(a.dtype, workspaceTyped, a);
}
template <class Op, class Args> void backward(const Args& a, void* stream) {
  FG_CUDA_DISPATCH(a.dtype, backwardTyped, a, static_cast<cudaStream_t>(stream));
}

} // namespace fg::cuda
