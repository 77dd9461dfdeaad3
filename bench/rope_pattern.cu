// Measures which order of loads lets a RoPE-shaped kernel read and write at the device's copy
// rate, apart from fusegen's runtime: q [B, S, H, D] bf16 (8 x 4096 x 32 x 128) rotated by cos
// and sin [S, D] (Llama's half rotation), each variant a plain kernel with the same arithmetic,
// against cudaMemcpy of the same bytes. The variants differ only in which thread loads which
// 16-byte vectors and when (docs/perf-notes.md, twentieth session):
//   groups R/B   a thread per (position, vector pair), looping over the H heads R rows at a
//                time, B blocks of 256 resident per SM (fusegen's groups plan today: R 2, B 2);
//                hN: the heads split into chunks of N, a thread per chunk (finer work items,
//                the tables loaded once per chunk)
//   blockpos N   a block of 128 threads per N positions, a thread per (head, vector pair) of
//                16 heads, all its loads issued first (one short block per position, as Triton
//                kernels that take a position per program do)
//   flat U       a thread per U consecutive vector pairs of the flattened rows, the tables read
//                per row from cache
// Run from the repo root:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/rope_pattern.cu -o /tmp/rope_pattern && /tmp/rope_pattern
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda_timing.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int64_t kB = 8, kS = 4096, kH = 32, kD = 128;
constexpr int64_t kPositions = kB * kS, kRows = kPositions * kH, kN = kRows * kD;
constexpr int kV = 8;               // bf16 lanes of a 16-byte vector
constexpr int kPairs = kD / 2 / kV; // vector pairs (c, c + D/2) per row

using bench::check;

struct alignas(16) Vec {
  __nv_bfloat162 h[4];
};

__device__ __forceinline__ Vec ld(const __nv_bfloat16* p) {
  return *reinterpret_cast<const Vec*>(p);
}
__device__ __forceinline__ void st(__nv_bfloat16* p, const Vec& v) {
  *reinterpret_cast<Vec*>(p) = v;
}

// A vector of row `row` at column c and its partner at c + D/2 (x's, or a table's at row s).
struct Pair {
  Vec lo, hi;
};
__device__ __forceinline__ Pair loadPair(const __nv_bfloat16* t, int64_t row, int64_t c) {
  return {ld(t + row * kD + c), ld(t + row * kD + c + kD / 2)};
}

// y's pair: at c, x * cos + (-x at c + D/2) * sin; at c + D/2, x * cos + (x at c) * sin.
__device__ __forceinline__ void storeRotated(__nv_bfloat16* y, int64_t row, int64_t c,
                                             const Pair& x, const Pair& cs, const Pair& sn) {
  Vec lo, hi;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = __bfloat1622float2(x.lo.h[i]), b = __bfloat1622float2(x.hi.h[i]);
    const float2 c0 = __bfloat1622float2(cs.lo.h[i]), c1 = __bfloat1622float2(cs.hi.h[i]);
    const float2 s0 = __bfloat1622float2(sn.lo.h[i]), s1 = __bfloat1622float2(sn.hi.h[i]);
    lo.h[i] = __floats2bfloat162_rn(a.x * c0.x - b.x * s0.x, a.y * c0.y - b.y * s0.y);
    hi.h[i] = __floats2bfloat162_rn(b.x * c1.x + a.x * s1.x, b.y * c1.y + a.y * s1.y);
  }
  st(y + row * kD + c, lo);
  st(y + row * kD + c + kD / 2, hi);
}

// HT heads per thread (kH / HT threads share a position's vector pair, each loading the tables).
template <int R, int B, int HT = kH>
__global__ void __launch_bounds__(256, B) groups(const __nv_bfloat16* x, const __nv_bfloat16* cs,
                                                 const __nv_bfloat16* sn, __nv_bfloat16* y) {
  constexpr int kChunks = kH / HT;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  if (t >= kPositions * kPairs * kChunks) return;
  const int64_t pos = t / (kPairs * kChunks), c = (t % kPairs) * kV, s = pos % kS;
  const int first = static_cast<int>((t / kPairs) % kChunks) * HT;
  const Pair cp = loadPair(cs, s, c), sp = loadPair(sn, s, c);
  for (int h0 = first; h0 < first + HT; h0 += R) {
    Pair xs[R];
#pragma unroll
    for (int u = 0; u < R; ++u)
      xs[u] = loadPair(x, pos * kH + h0 + u, c);
#pragma unroll
    for (int u = 0; u < R; ++u)
      storeRotated(y, pos * kH + h0 + u, c, xs[u], cp, sp);
  }
}

// N positions per block of 128 threads: thread (head h of 16, pair p), heads h and h + 16.
template <int N>
__global__ void __launch_bounds__(128) blockpos(const __nv_bfloat16* x, const __nv_bfloat16* cs,
                                                const __nv_bfloat16* sn, __nv_bfloat16* y) {
  const int p = threadIdx.x % kPairs, h = threadIdx.x / kPairs;
  const int64_t c = p * kV;
#pragma unroll 1
  for (int n = 0; n < N; ++n) {
    const int64_t pos = static_cast<int64_t>(blockIdx.x) * N + n, s = pos % kS;
    Pair xs[2];
#pragma unroll
    for (int u = 0; u < 2; ++u)
      xs[u] = loadPair(x, pos * kH + h + 16 * u, c);
    const Pair cp = loadPair(cs, s, c), sp = loadPair(sn, s, c);
#pragma unroll
    for (int u = 0; u < 2; ++u)
      storeRotated(y, pos * kH + h + 16 * u, c, xs[u], cp, sp);
  }
}

// U vector pairs per thread, consecutive pairs on consecutive threads of a block.
template <int U>
__global__ void __launch_bounds__(256) flat(const __nv_bfloat16* x, const __nv_bfloat16* cs,
                                            const __nv_bfloat16* sn, __nv_bfloat16* y) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * 256 * U + threadIdx.x;
  Pair xs[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t q = base + 256 * u;
    xs[u] = loadPair(x, q / kPairs, (q % kPairs) * kV);
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t q = base + 256 * u, row = q / kPairs, c = (q % kPairs) * kV;
    const int64_t s = (row / kH) % kS;
    storeRotated(y, row, c, xs[u], loadPair(cs, s, c), loadPair(sn, s, c));
  }
}

// (30 timed runs: the figures in bench/results/2026-12-05-h100/rope_pattern.txt)
template <class F> float medianMs(F launch) {
  return bench::medianMs(launch, 30);
}

float copyMs = 0;
__nv_bfloat16* gY = nullptr;
std::vector<uint16_t> want, got;

// Times `ms` of a variant and checks its y bit for bit against the first variant's.
void report(const char* what, float ms, bool compare = true) {
  if (compare) {
    got.resize(kN);
    check(cudaMemcpy(got.data(), gY, kN * 2, cudaMemcpyDeviceToHost), "copy back");
    if (want.empty())
      want = got;
    else if (want != got)
      std::printf("%s: WRONG RESULT\n", what);
  }
  const double gbps = 2.0 * kN * 2 / ms / 1e6;
  std::printf("%-16s %7.1f us  %6.0f GB/s  %5.1f%% of copy\n", what, ms * 1e3, gbps,
              100.0 * copyMs / ms);
}

} // namespace

int main() {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("%s, %d SMs; q %lld x %lld x %lld x %lld bf16 (%.0f MB)\n", prop.name,
              prop.multiProcessorCount, (long long)kB, (long long)kS, (long long)kH, (long long)kD,
              kN * 2 / 1e6);
  __nv_bfloat16 *x, *y, *cs, *sn;
  check(cudaMalloc(&x, kN * 2), "malloc");
  check(cudaMalloc(&y, kN * 2), "malloc");
  check(cudaMalloc(&cs, kS * kD * 2), "malloc");
  check(cudaMalloc(&sn, kS * kD * 2), "malloc");
  {
    std::vector<uint16_t> h(kN);
    for (int64_t i = 0; i < kN; ++i) // bf16 values in [1, 2) from a hash of the index
      h[i] = static_cast<uint16_t>(0x3f80 | ((i * 2654435761u) >> 9 & 0x7f));
    check(cudaMemcpy(x, h.data(), kN * 2, cudaMemcpyHostToDevice), "copy in");
  }
  check(cudaMemset(cs, 0x3c, kS * kD * 2), "memset");
  check(cudaMemset(sn, 0x3c, kS * kD * 2), "memset");
  copyMs =
      medianMs([&] { check(cudaMemcpyAsync(y, x, kN * 2, cudaMemcpyDeviceToDevice), "copy"); });
  gY = y;
  report("cudaMemcpy", copyMs, false);
  const unsigned gGroups = static_cast<unsigned>(kPositions * kPairs / 256);
  report("groups 2/2", medianMs([&] { groups<2, 2><<<gGroups, 256>>>(x, cs, sn, y); }));
  report("groups 1/4", medianMs([&] { groups<1, 4><<<gGroups, 256>>>(x, cs, sn, y); }));
  report("groups 4/2", medianMs([&] { groups<4, 2><<<gGroups, 256>>>(x, cs, sn, y); }));
  report("groups 2/4", medianMs([&] { groups<2, 4><<<gGroups, 256>>>(x, cs, sn, y); }));
  report("groups 2/2 h16", medianMs([&] { groups<2, 2, 16><<<gGroups * 2, 256>>>(x, cs, sn, y); }));
  report("groups 2/2 h8", medianMs([&] { groups<2, 2, 8><<<gGroups * 4, 256>>>(x, cs, sn, y); }));
  report("groups 2/4 h8", medianMs([&] { groups<2, 4, 8><<<gGroups * 4, 256>>>(x, cs, sn, y); }));
  report("groups 2/2 h4", medianMs([&] { groups<2, 2, 4><<<gGroups * 8, 256>>>(x, cs, sn, y); }));
  report("blockpos 1", medianMs([&] { blockpos<1><<<kPositions, 128>>>(x, cs, sn, y); }));
  report("blockpos 2", medianMs([&] { blockpos<2><<<kPositions / 2, 128>>>(x, cs, sn, y); }));
  report("blockpos 4", medianMs([&] { blockpos<4><<<kPositions / 4, 128>>>(x, cs, sn, y); }));
  const int64_t pairs = kRows * kPairs;
  report("flat 1", medianMs([&] { flat<1><<<pairs / 256, 256>>>(x, cs, sn, y); }));
  report("flat 2", medianMs([&] { flat<2><<<pairs / 512, 256>>>(x, cs, sn, y); }));
  report("flat 4", medianMs([&] { flat<4><<<pairs / 1024, 256>>>(x, cs, sn, y); }));
  report("cudaMemcpy",
         medianMs([&] { check(cudaMemcpyAsync(y, x, kN * 2, cudaMemcpyDeviceToDevice), "copy"); }),
         false);
  return 0;
}
