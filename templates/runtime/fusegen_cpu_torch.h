// fusegen CPU plan, what it takes from torch (fusegen_cpu.h): the half and FP8 element types
// and parallelFor on torch's intra-op thread pool. A stable-ABI build (FUSEGEN_STABLE) takes the
// header-only types and the stable C shim's loop (torch::stable::parallel_for, torch >= 2.10):
// c10's headers refuse to compile there. Any other build takes c10's and at::parallel_for.
#pragma once

#include <cstdint>

#ifdef FUSEGEN_STABLE
#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Float8_e4m3fn.h>
#include <torch/headeronly/util/Float8_e5m2.h>
#include <torch/headeronly/util/Half.h>
#else
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>
#include <c10/util/Half.h>
#endif

namespace fg {

// f(begin, end) over [begin, end) in pieces of at least `grain`, on torch's threads.
template <class F> void parallelFor(int64_t begin, int64_t end, int64_t grain, const F& f) {
#ifdef FUSEGEN_STABLE
  torch::stable::parallel_for(begin, end, grain, f);
#else
  at::parallel_for(begin, end, grain, f);
#endif
}

} // namespace fg
