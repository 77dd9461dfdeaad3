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

#include "cuda_timing.cuh"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using S = __nv_bfloat16;
using fg::cuda::check;
constexpr int64_t kRows = 16384, kD = 8192, kN = kRows * kD;
constexpr int kV = fg::cuda::vecWidth<S>();

using bench::medianMs;

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

// The plan's grid, one block per kThreads x U vectors, or (oneWave) one wave of resident
// blocks, each striding over its share of the work, for one program P whose first kIn
// buffers are its inputs and the next its outputs.
template <class P, int U>
float time(const char* what, void* const* in, void* const* out, bool oneWave, int tensors) {
  typename P::Args a{};
  a.dtype = fg::DType::BFloat16;
  for (int k = 0; k < P::kInputs; ++k)
    a.in[k] = in[k];
  for (int m = 0; m < P::kOutputs; ++m) {
    a.out[m] = out[m];
    a.need[m] = true;
  }
  a.rows = kRows;
  a.D = kD;
  constexpr auto kernel = fg::cuda::flatProgram<P, S, kV, int32_t, U>;
  const unsigned all = fg::cuda::flatBlocks(kN / kV, U);
  const unsigned blocks =
      oneWave ? std::min<unsigned>(all, fg::cuda::deviceInfo().sms * residentPerSm(kernel)) : all;
  const float ms = medianMs([&] { kernel<<<blocks, fg::cuda::kThreads>>>(a); });
  report(what, U, blocks, ms, tensors);
  return ms;
}

// An op's Forward (inputs -> output) and Backward (inputs, output gradient -> gradients).
template <class Op, int U> void run(const char* name, std::vector<void*>& buf, bool oneWave) {
  constexpr int n = Op::Forward::kInputs;
  time<typename Op::Forward, U>((std::string(name) + " forward").c_str(), buf.data(),
                                buf.data() + n, oneWave, n + 1);
  // The backward reads the inputs and then the output gradient (buf[n]).
  time<typename Op::Backward, U>((std::string(name) + " backward").c_str(), buf.data(),
                                 buf.data() + n + 1, oneWave, 2 * n + 1);
}

// The programs of one generated op, as run() takes them.
template <class F, class B> struct Programs {
  using Forward = F;
  using Backward = B;
};
using Sigmoid = Programs<fusegen_ops::sigmoid::Forward, fusegen_ops::sigmoid::Backward>;
using Mul = Programs<fusegen_ops::mul::Forward, fusegen_ops::mul::Backward>;

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
