// fusegen CPU plans: the same Op structs as the CUDA plans (see fusegen_cuda.cuh), run with
// at::parallel_for. Forward is parallel over elements (or rows when [D] inputs exist);
// backward sums the gradients of broadcast inputs per fixed chunk of rows into fp32/fp64
// partials and adds the chunks in order, so results do not depend on the thread count.
#pragma once

#include "fusegen_runtime.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace fg {

inline float toCompute(c10::Half x) { return static_cast<float>(x); }
inline float toCompute(c10::BFloat16 x) { return static_cast<float>(x); }
template <> inline c10::Half fromCompute<c10::Half>(float x) { return c10::Half(x); }
template <> inline c10::BFloat16 fromCompute<c10::BFloat16>(float x) { return c10::BFloat16(x); }

namespace cpu {

constexpr int64_t kGrain = 32768; // elements per parallel task

template <class Op, typename S, class Args>
void loadFixed(const Args& a, int64_t c, compute_t<S>* in) {
  for (int k = 0; k < Op::kInputs; ++k) {
    if (Op::bcast(k) == Bcast::Col)
      in[k] = toCompute(static_cast<const S*>(a.in[k])[c]);
    else if (Op::bcast(k) == Bcast::Scalar)
      in[k] = toCompute(static_cast<const S*>(a.in[k])[0]);
  }
}

template <class Op, typename S, class Args> void forwardTyped(const Args& a) {
  using T = compute_t<S>;
  T attr[atLeastOne<Op::kAttrs>()];
  for (int k = 0; k < Op::kAttrs; ++k)
    attr[k] = static_cast<T>(a.attr[k]);
  const int64_t D = a.D;
  const int64_t grainRows = D >= kGrain ? 1 : kGrain / D;
  at::parallel_for(0, a.rows, grainRows, [&](int64_t r0, int64_t r1) {
    T in[Op::kInputs], out[Op::kOutputs];
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < D; ++c) {
        const int64_t i = r * D + c;
        loadFixed<Op, S>(a, c, in);
        for (int k = 0; k < Op::kInputs; ++k)
          if (Op::bcast(k) == Bcast::Full)
            in[k] = toCompute(static_cast<const S*>(a.in[k])[i]);
        Op::forward(in, attr, out);
        for (int m = 0; m < Op::kOutputs; ++m)
          static_cast<S*>(a.out[m])[i] = fromCompute<S>(out[m]);
      }
    }
  });
}

template <class Op, typename S, class Args> void backwardTyped(const Args& a) {
  using T = compute_t<S>;
  T attr[atLeastOne<Op::kAttrs>()];
  for (int k = 0; k < Op::kAttrs; ++k)
    attr[k] = static_cast<T>(a.attr[k]);
  const int64_t D = a.D;
  // Fixed chunks of rows: each owns one partial row per reduced input.
  constexpr int64_t kMaxChunks = 256;
  const int64_t rowsPerChunk = std::max({int64_t(16), kGrain / std::max<int64_t>(D, 1),
                                         (a.rows + kMaxChunks - 1) / kMaxChunks});
  const int64_t chunks = (a.rows + rowsPerChunk - 1) / rowsPerChunk;
  bool reduce = false;
  for (int k = 0; k < Op::kInputs; ++k)
    reduce = reduce || (Op::bcast(k) != Bcast::Full && a.need[k]);
  std::vector<T> partials(reduce ? static_cast<size_t>(Op::kInputs * chunks * D) : 0, T(0));
  at::parallel_for(0, chunks, 1, [&](int64_t j0, int64_t j1) {
    T in[Op::kInputs], gout[Op::kOutputs], gin[Op::kInputs];
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t rEnd = std::min(a.rows, (j + 1) * rowsPerChunk);
      for (int64_t r = j * rowsPerChunk; r < rEnd; ++r) {
        for (int64_t c = 0; c < D; ++c) {
          const int64_t i = r * D + c;
          loadFixed<Op, S>(a, c, in);
          for (int k = 0; k < Op::kInputs; ++k)
            if (Op::bcast(k) == Bcast::Full)
              in[k] = toCompute(static_cast<const S*>(a.in[k])[i]);
          for (int m = 0; m < Op::kOutputs; ++m)
            gout[m] = toCompute(static_cast<const S*>(a.gout[m])[i]);
          Op::backward(in, attr, gout, gin);
          for (int k = 0; k < Op::kInputs; ++k) {
            if (!a.need[k])
              continue;
            if (Op::bcast(k) == Bcast::Full)
              static_cast<S*>(a.gin[k])[i] = fromCompute<S>(gin[k]);
            else
              partials[(static_cast<size_t>(k) * chunks + j) * D + c] += gin[k];
          }
        }
      }
    }
  });
  for (int k = 0; k < Op::kInputs; ++k) {
    if (Op::bcast(k) == Bcast::Full || !a.need[k])
      continue;
    T total = T(0);
    for (int64_t c = 0; c < D; ++c) {
      T s = T(0);
      for (int64_t j = 0; j < chunks; ++j)
        s += partials[(static_cast<size_t>(k) * chunks + j) * D + c];
      if (Op::bcast(k) == Bcast::Col)
        static_cast<S*>(a.gin[k])[c] = fromCompute<S>(s);
      total += s;
    }
    if (Op::bcast(k) == Bcast::Scalar)
      static_cast<S*>(a.gin[k])[0] = fromCompute<S>(total);
  }
}

#define FG_CPU_DISPATCH(dtype, FN, ...)                                                            \
  switch (dtype) {                                                                                 \
  case ::fg::DType::Float32:                                                                       \
    return FN<Op, float>(__VA_ARGS__);                                                             \
  case ::fg::DType::Float64:                                                                       \
    return FN<Op, double>(__VA_ARGS__);                                                            \
  case ::fg::DType::Float16:                                                                       \
    return FN<Op, c10::Half>(__VA_ARGS__);                                                         \
  case ::fg::DType::BFloat16:                                                                      \
    return FN<Op, c10::BFloat16>(__VA_ARGS__);                                                     \
  }                                                                                                \
  throw std::runtime_error("fusegen: unsupported dtype")

template <class Op, class Args> void forward(const Args& a) { FG_CPU_DISPATCH(a.dtype, forwardTyped, a); }
template <class Op, class Args> void backward(const Args& a) { FG_CPU_DISPATCH(a.dtype, backwardTyped, a); }

} // namespace cpu
} // namespace fg
