// Timing for the standalone CUDA microbenchmarks (bench/flat_unroll.cu, bench/rope_pattern.cu):
// a checked CUDA call, and the median milliseconds of a launch over CUDA events.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace bench {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// The median of `runs` timed launches after 5 untimed ones (each benchmark's tensors are far
// beyond the 50 MB L2, so no run finds the last one's bytes there).
template <class F> float medianMs(F launch, int runs = 25) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 5; ++i)
    launch();
  std::vector<float> ms;
  for (int r = 0; r < runs; ++r) {
    check(cudaEventRecord(start), "record");
    launch();
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "sync");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "elapsed");
    ms.push_back(t);
  }
  check(cudaGetLastError(), "launch");
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

} // namespace bench
