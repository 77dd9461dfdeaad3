// Measures the flat plan's vectors per thread and iteration (kFlatUnroll in
// templates/runtime/fusegen_cuda.cuh) on the GPU present: forward and backward of sigmoid (one
// input) and mul (two inputs) over 16384 x 8192 bf16, each variant launched the way the plan
// launches it (one block per 256 x unroll vectors) and as one wave of resident blocks,
// against a device-to-device copy of the same bytes. Run from the repo root:
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch=sm_90 -Igenerated/runtime
//        -Igenerated/sigmoid -Igenerated/mul bench/flat_unroll.cu -o /tmp/flat_unroll
//   /tmp/flat_unroll
#include "mul.h"
#include "sigmoid.h"

#include "fusegen_cuda.cuh"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using S = __nv_bfloat16;
using fg::cuda::check;
constexpr int64_t kRows = 16384, kD = 8192, kN = kRows * kD;
constexpr int kV = fg::cuda::vecWidth<S>();

template <class F> float medianMs(F launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 5; ++i)
    launch(); // warm-up
  std::vector<float> ms;
  for (int r = 0; r < 25; ++r) { // each run moves 268 MB per tensor: far beyond the 50 MB L2
    check(cudaEventRecord(start), "record");
    launch();
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "sync");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "elapsed");
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void report(const std::string& what, int unroll, unsigned blocks, float ms, int tensors) {
  const double gbps = double(tensors) * kN * sizeof(S) / ms / 1e6;
  std::printf("%-18s unroll %d, %7u blocks: %.4f ms  %6.0f GB/s\n", what.c_str(), unroll, blocks,
              ms, gbps);
}

// Blocks of kThreads threads of `kernel` resident on one SM at once (occupancy calculator).
template <class K> int64_t residentPerSm(K kernel) {
  int blocks = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, fg::cuda::kThreads, 0),
        "occupancy");
  return blocks;
}

// oneWave: one wave of resident blocks, each striding over its share of the work; otherwise
// the plan's grid, one block per kThreads x U vectors.
template <class Op, int U> void run(const char* name, std::vector<void*>& buf, bool oneWave) {
  typename Op::ForwardArgs f{};
  f.dtype = fg::DType::BFloat16;
  for (int k = 0; k < Op::kInputs; ++k)
    f.in[k] = buf[k];
  f.out[0] = buf[Op::kInputs];
  f.rows = kRows;
  f.D = kD;
  constexpr auto forward = fg::cuda::flatForward<Op, S, kV, int32_t, typename Op::ForwardArgs, U>;
  constexpr auto backward =
      fg::cuda::flatBackward<Op, S, kV, int32_t, typename Op::BackwardArgs, U>;
  const int sms = fg::cuda::smCount();
  auto blocksFor = [&](auto kernel) {
    const unsigned all = fg::cuda::flatBlocks(kN / kV, U);
    return oneWave ? std::min<unsigned>(all, sms * residentPerSm(kernel)) : all;
  };
  unsigned blocks = blocksFor(forward);
  float ms = medianMs([&] { forward<<<blocks, fg::cuda::kThreads>>>(f); });
  report(std::string(name) + " forward", U, blocks, ms, Op::kInputs + 1);
  typename Op::BackwardArgs b{};
  b.dtype = fg::DType::BFloat16;
  for (int k = 0; k < Op::kInputs; ++k) {
    b.in[k] = buf[k];
    b.gin[k] = buf[Op::kInputs + 1 + k];
    b.need[k] = true;
  }
  b.gout[0] = buf[Op::kInputs];
  b.rows = kRows;
  b.D = kD;
  blocks = blocksFor(backward);
  ms = medianMs([&] { backward<<<blocks, fg::cuda::kThreads>>>(b); });
  report(std::string(name) + " backward", U, blocks, ms, 2 * Op::kInputs + 1);
}

} // namespace

int main() {
  std::vector<void*> buf(5);
  for (void*& p : buf) {
    check(cudaMalloc(&p, kN * sizeof(S)), "cudaMalloc");
    check(cudaMemset(p, 0, kN * sizeof(S)), "cudaMemset");
  }
  float copy = medianMs([&] {
    check(cudaMemcpyAsync(buf[1], buf[0], kN * sizeof(S), cudaMemcpyDeviceToDevice), "copy");
  });
  report("copy", 0, 0, copy, 2);
  using Sigmoid = fusegen_ops::sigmoid::Op;
  using Mul = fusegen_ops::mul::Op;
  for (bool oneWave : {true, false}) {
    run<Sigmoid, 1>("sigmoid", buf, oneWave);
    run<Sigmoid, 2>("sigmoid", buf, oneWave);
    run<Sigmoid, 4>("sigmoid", buf, oneWave);
    run<Mul, 1>("mul", buf, oneWave);
    run<Mul, 2>("mul", buf, oneWave);
    run<Mul, 4>("mul", buf, oneWave);
  }
  check(cudaDeviceSynchronize(), "sync");
  return 0;
}
