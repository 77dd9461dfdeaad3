// fusegen CUDA flat and colwise plans: the kernels of programs (fusegen_program.h) without
// passes over rows (P::kPlan is Plan::Flat or Plan::Colwise), the forwards and backwards of
// elementwise ops, and what every CUDA plan shares (vectors, the finalize kernels). Each
// element is P::elem over the element's inputs, in the compute type T (float for half
// types); P::rowPre, which depends only on [] inputs and attrs here, runs once per thread.
//   flat     - no [D] inputs and no sums needed: one block per kThreads x kFlatUnroll 128-bit
//              vectors (a grid-stride loop covers what 2^31 - 1 blocks do not), scalar tail.
//   colwise  - [D] inputs, or [D] and [] sums of element values (ColSum, Total outputs: the
//              gradients of broadcast inputs): each thread owns V columns (its [D] values
//              stay in registers) and walks rows, accumulating the sums in fp32/fp64; it
//              writes one partial sum per (row chunk, column), and finalize adds the
//              partials in a fixed order, so the result is deterministic (no atomics).
#pragma once

#include "fusegen_program.h"
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

// What the plans' launchers read of the current device: its SM count and the threads one SM
// holds (2048 on sm_80 and sm_90, 1536 on sm_86 and sm_89), queried once per device.
struct DeviceInfo {
  int sms = 0;
  int threadsPerSm = 0;
};

inline DeviceInfo deviceInfo() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  static DeviceInfo cached[64];
  if (device < 64 && cached[device].sms)
    return cached[device];
  DeviceInfo d;
  check(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  check(cudaDeviceGetAttribute(&d.threadsPerSm, cudaDevAttrMaxThreadsPerMultiProcessor, device),
        "threads per SM");
  if (device < 64)
    cached[device] = d;
  return d;
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

// What every element of a flat or colwise call shares: the attrs, D and the per-row values,
// which depend on [] inputs and attrs only (rowPre, once per thread).
template <class P, typename S> struct PointwiseSetup {
  using T = compute_t<S>;
  T attr[atLeastOne<P::kAttrs>()];
  T D;
  T rv[atLeastOne<P::kRowValues>()];

  __device__ __forceinline__ explicit PointwiseSetup(const typename P::Args& a)
      : D(static_cast<T>(a.D)) {
#pragma unroll
    for (int k = 0; k < P::kAttrs; ++k)
      attr[k] = static_cast<T>(a.attr[k]);
    T rowIn[P::kInputs];
#pragma unroll
    for (int k = 0; k < P::kInputs; ++k)
      rowIn[k] = P::inBcast(k) == Bcast::Scalar ? toCompute(static_cast<const S*>(a.in[k])[0])
                                                : T(0);
    P::template rowPre<T, isHalf<S>()>(rowIn, attr, D, rv);
  }

  // out = elem(in) for one element.
  __device__ __forceinline__ void elem(const T* in, T* out) const {
    P::template elem<T, isHalf<S>()>(in, rv, attr, D, out);
  }
};

// Outputs that are sums over rows (ColSum, Total), and output m's slot among them.
template <class P> FG_HD constexpr int sumSlot(int m) { return colSumSlot<P>(m) + totalSlot<P>(m); }
template <class P> constexpr int sumOutputs() { return sumSlot<P>(P::kOutputs); }

// ---------------------------------------------------------------- flat plan
template <class P, typename S, int V, typename I, int kUnroll = kFlatUnroll>
__global__ void __launch_bounds__(kThreads) flatProgram(const typename P::Args a) {
  using T = compute_t<S>;
  const PointwiseSetup<P, S> setup(a);
  const I n = static_cast<I>(a.rows * a.D);
  const I nvec = n / V;
  const I stride = static_cast<I>(gridDim.x) * kThreads;
  // kUnroll vectors per thread and iteration, all loaded before any is stored: the stores
  // may alias the inputs, so without this the compiler keeps one load in flight per thread.
  for (I base = static_cast<I>(blockIdx.x) * kThreads * kUnroll + threadIdx.x; base < nvec;
       base += stride * kUnroll) {
    Vec<S, V> x[kUnroll][P::kInputs];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int k = 0; k < P::kInputs; ++k)
        if (P::inBcast(k) == Bcast::Full && base + u * kThreads < nvec)
          x[u][k] = loadVec<S, V>(a.in[k], (base + u * kThreads) * V);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const I v = base + u * kThreads;
      if (v >= nvec)
        break;
      Vec<S, V> y[P::kOutputs];
#pragma unroll
      for (int l = 0; l < V; ++l) {
        T in[P::kInputs], out[P::kOutputs];
#pragma unroll
        for (int k = 0; k < P::kInputs; ++k)
          in[k] = P::inBcast(k) == Bcast::Full ? toCompute(x[u][k].v[l]) : T(0);
        setup.elem(in, out);
#pragma unroll
        for (int m = 0; m < P::kOutputs; ++m)
          y[m].v[l] = fromCompute<S>(out[m]);
      }
#pragma unroll
      for (int m = 0; m < P::kOutputs; ++m)
        if (P::outKind(m) == OutKind::Full && a.need[m])
          storeVec<S, V>(a.out[m], v * V, y[m]);
    }
  }
  for (I i = nvec * V + static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    T in[P::kInputs], out[P::kOutputs];
#pragma unroll
    for (int k = 0; k < P::kInputs; ++k)
      in[k] = P::inBcast(k) == Bcast::Full ? toCompute(static_cast<const S*>(a.in[k])[i]) : T(0);
    setup.elem(in, out);
#pragma unroll
    for (int m = 0; m < P::kOutputs; ++m)
      if (P::outKind(m) == OutKind::Full && a.need[m])
        static_cast<S*>(a.out[m])[i] = fromCompute<S>(out[m]);
  }
}

// ---------------------------------------------------------------- colwise plan
constexpr int64_t kSumRowsPerChunk = 32; // see colGeometry

struct ColGeometry {
  dim3 block;
  dim3 grid;
};

// minRowsPerChunk: rows each block row (grid.y) covers at least. A call that sums writes a
// [D] row of partial sums per chunk: with one chunk per row (small shapes) writing and
// re-reading the partials cost more than the rows themselves, so it asks for 32. One that
// does not asks for 1: 32 left bias_gelu's 512x4096 forward 32 blocks (0.023 ms against
// 0.009 with 1).
inline ColGeometry colGeometry(int64_t rows, int64_t D, int V, const DeviceInfo& device,
                               int64_t minRowsPerChunk) {
  int64_t groups = (D + V - 1) / V;
  int bx = 1;
  while (bx < groups && bx < kThreads)
    bx *= 2;
  int by = kThreads / bx;
  int64_t gx = (groups + bx - 1) / bx;
  // Enough block rows to fill every SM's threads once.
  int64_t wanted =
      (static_cast<int64_t>(device.sms) * device.threadsPerSm / kThreads + gx - 1) / gx;
  int64_t gy = (rows + by * minRowsPerChunk - 1) / (by * minRowsPerChunk);
  if (gy > wanted)
    gy = wanted;
  if (gy > 65535)
    gy = 65535;
  if (gy < 1)
    gy = 1;
  return ColGeometry{dim3(bx, by), dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy))};
}

// kSums: the call needs one of the sums (ColSum, Total outputs): they are accumulated and
// written as partials[sumSlot][blockIdx.y][D].
template <class P, typename S, int V, bool kSums>
__global__ void colwiseProgram(const typename P::Args a, compute_t<S>* partials) {
  using T = compute_t<S>;
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  const bool active = c < a.D;
  if (!kSums && !active)
    return;
  const PointwiseSetup<P, S> setup(a);
  T fixed[P::kInputs][V]; // [D] inputs: loaded once, reused for every row
  T acc[P::kOutputs][V];
#pragma unroll
  for (int k = 0; k < P::kInputs; ++k)
#pragma unroll
    for (int l = 0; l < V; ++l)
      fixed[k][l] = active && P::inBcast(k) == Bcast::Col
                        ? toCompute(static_cast<const S*>(a.in[k])[c + l])
                        : T(0);
#pragma unroll
  for (int m = 0; m < P::kOutputs; ++m)
#pragma unroll
    for (int l = 0; l < V; ++l)
      acc[m][l] = T(0);
  if (active) {
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < a.rows;
         r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
      const int64_t off = r * a.D + c;
      Vec<S, V> x[P::kInputs], y[P::kOutputs];
#pragma unroll
      for (int k = 0; k < P::kInputs; ++k)
        if (P::inBcast(k) == Bcast::Full)
          x[k] = loadVec<S, V>(a.in[k], off);
#pragma unroll
      for (int l = 0; l < V; ++l) {
        T in[P::kInputs], out[P::kOutputs];
#pragma unroll
        for (int k = 0; k < P::kInputs; ++k)
          in[k] = P::inBcast(k) == Bcast::Full ? toCompute(x[k].v[l]) : fixed[k][l];
        setup.elem(in, out);
#pragma unroll
        for (int m = 0; m < P::kOutputs; ++m) {
          if (P::outKind(m) == OutKind::Full)
            y[m].v[l] = fromCompute<S>(out[m]);
          else if (kSums)
            acc[m][l] += out[m];
        }
      }
#pragma unroll
      for (int m = 0; m < P::kOutputs; ++m)
        if (P::outKind(m) == OutKind::Full && a.need[m])
          storeVec<S, V>(a.out[m], off, y[m]);
    }
  }
  if constexpr (kSums) {
    // Sum each thread column's partial over threadIdx.y, in a fixed order.
    extern __shared__ unsigned char sharedRaw[];
    T* shared = reinterpret_cast<T*>(sharedRaw);
    const int width = blockDim.x * V;
#pragma unroll
    for (int m = 0; m < P::kOutputs; ++m) {
      if (P::outKind(m) == OutKind::Full || !a.need[m])
        continue;
#pragma unroll
      for (int l = 0; l < V; ++l)
        shared[threadIdx.y * width + threadIdx.x * V + l] = acc[m][l];
      __syncthreads();
      if (threadIdx.y == 0 && active) {
        T* out = partials + static_cast<int64_t>(sumSlot<P>(m)) * gridDim.y * a.D +
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

// The shape of one flat or colwise call: whether it sums (some ColSum or Total output is
// needed), runs colwise ([D] inputs, or sums) and uses 128-bit vectors (every tensor it
// reads or writes per element 16-byte aligned; colwise: D a multiple of the width too).
struct PointwiseCall {
  bool sums;
  bool colwise;
  bool vec;
};

template <class P, typename S> PointwiseCall pointwiseCall(const typename P::Args& a) {
  PointwiseCall call{false, false, true};
  for (int k = 0; k < P::kInputs; ++k)
    if (P::inBcast(k) != Bcast::Scalar)
      call.vec = call.vec && aligned16(a.in[k]);
  for (int m = 0; m < P::kOutputs; ++m) {
    if (P::outKind(m) == OutKind::Full && a.need[m])
      call.vec = call.vec && aligned16(a.out[m]);
    call.sums = call.sums || (P::outKind(m) != OutKind::Full && a.need[m]);
  }
  // A colwise program that sums nothing in this call and has no [D] inputs runs flat.
  call.colwise = P::kPlan == Plan::Colwise && (inputsOf<P>(Bcast::Col) > 0 || call.sums);
  if (call.colwise && a.D % vecWidth<S>() != 0)
    call.vec = false;
  return call;
}

template <class P, typename S> ColGeometry pointwiseColGeometry(const typename P::Args& a,
                                                                const PointwiseCall& call) {
  return colGeometry(a.rows, a.D, call.vec ? vecWidth<S>() : 1, deviceInfo(),
                     call.sums ? kSumRowsPerChunk : 1);
}

// The partial sums of a colwise call, in its geometry.
template <class P, typename S> size_t pointwiseWorkspace(const typename P::Args& a) {
  const PointwiseCall call = pointwiseCall<P, S>(a);
  if (!call.sums || a.rows * a.D == 0)
    return 0;
  const ColGeometry g = pointwiseColGeometry<P, S>(a, call);
  return sizeof(compute_t<S>) * static_cast<size_t>(sumOutputs<P>()) * g.grid.y * a.D;
}

// Only the kernel variants a program can launch are instantiated: a flat program has no
// colwise ones, one with [D] inputs no flat ones, one without sums none that sum.
template <class P, typename S> void pointwiseRun(const typename P::Args& a, cudaStream_t stream) {
  const int64_t n = a.rows * a.D;
  if (n == 0)
    return;
  constexpr int V = vecWidth<S>();
  const PointwiseCall call = pointwiseCall<P, S>(a);
  if constexpr (inputsOf<P>(Bcast::Col) == 0) {
    if (!call.colwise) {
      withFlatVariant<S>(n, call.vec, [&](auto width, auto index) {
        constexpr int W = decltype(width)::value;
        flatProgram<P, S, W, decltype(index)><<<flatBlocks(n / W), kThreads, 0, stream>>>(a);
      });
      check(cudaGetLastError(), "flat launch");
      return;
    }
  }
  if constexpr (P::kPlan == Plan::Colwise) {
    const ColGeometry g = pointwiseColGeometry<P, S>(a, call);
    auto* partials = static_cast<compute_t<S>*>(a.workspace);
    const size_t shared =
        call.sums ? sizeof(compute_t<S>) * g.block.x * g.block.y * (call.vec ? V : 1) : 0;
    auto launch = [&](auto width) {
      constexpr int W = decltype(width)::value;
      if constexpr (sumOutputs<P>() > 0)
        if (call.sums) {
          colwiseProgram<P, S, W, true><<<g.grid, g.block, shared, stream>>>(a, partials);
          return;
        }
      if constexpr (inputsOf<P>(Bcast::Col) > 0)
        colwiseProgram<P, S, W, false><<<g.grid, g.block, shared, stream>>>(a, partials);
    };
    if (call.vec)
      launch(std::integral_constant<int, V>{});
    else
      launch(std::integral_constant<int, 1>{});
    check(cudaGetLastError(), "colwise launch");
    for (int m = 0; m < P::kOutputs; ++m) {
      if (P::outKind(m) == OutKind::Full || !a.need[m])
        continue;
      compute_t<S>* p = partials + static_cast<int64_t>(sumSlot<P>(m)) * g.grid.y * a.D;
      if (P::outKind(m) == OutKind::ColSum) {
        finalizeCol<S><<<columnBlocks(a.D), kThreads, 0, stream>>>(
            p, static_cast<int>(g.grid.y), a.D, static_cast<S*>(a.out[m]));
      } else { // two stages: the chunks of each column (in place), then one block over D
        sumChunksInPlace<compute_t<S>><<<columnBlocks(a.D), kThreads, 0, stream>>>(
            p, static_cast<int>(g.grid.y), a.D);
        finalizeScalar<S><<<1, kThreads, 0, stream>>>(p, a.D, static_cast<S*>(a.out[m]));
      }
      check(cudaGetLastError(), "sum finalize launch");
    }
  }
}

// dtype dispatch: calls FN<P, S>(...) for the storage type S of `dtype`.
#define FG_CUDA_DISPATCH(P, dtype, FN, ...)                                                        \
  switch (dtype) {                                                                                 \
  case ::fg::DType::Float32:                                                                       \
    return FN<P, float>(__VA_ARGS__);                                                              \
  case ::fg::DType::Float64:                                                                       \
    return FN<P, double>(__VA_ARGS__);                                                             \
  case ::fg::DType::Float16:                                                                       \
    return FN<P, __half>(__VA_ARGS__);                                                             \
  case ::fg::DType::BFloat16:                                                                      \
    return FN<P, __nv_bfloat16>(__VA_ARGS__);                                                      \
  }                                                                                                \
  throw std::runtime_error("fusegen: unsupported dtype")

} // namespace fg::cuda
