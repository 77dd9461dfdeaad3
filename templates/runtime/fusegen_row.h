// fusegen row programs: the interface between a generated op with reductions over the last
// dim and the row plans (fusegen_row_cuda.cuh, fusegen_cpu.h). Host and device.
//
// A program P (generated: struct Forward / struct Backward in <op>.h) computes, per row:
//   rowPre(rowIn, attr, D, rv)            per-row values that need no reduction
//   for each stage s < kStages:
//     term<s>(in, rv, attr, D, t)         per element: the terms of stage s's reductions
//     rowAfter<s>(red, attr, D, rv)       per row: reduction results -> more per-row values
//   elem(in, rv, attr, D, out)            per element: values of Full and ColSum outputs
//   rowOut(rv, attr, D, out)              per row: values of Row outputs
// Inputs broadcast per inBcast(k); outputs are written per outKind(m):
//   Full   one value per element
//   Row    one value per row
//   ColSum the sum over rows of an element value (a [D] gradient), accumulated in the
//          compute type per fixed chunk of rows and added in a fixed order
#pragma once

#include "fusegen_runtime.h"

namespace fg {

enum class OutKind : int { Full = 0, Row = 1, ColSum = 2 };
enum class Reduce : int { Sum = 0, Max = 1, Min = 2 };

template <typename T> FG_HD T reduceIdentity(Reduce r) {
  return r == Reduce::Sum ? T(0) : r == Reduce::Max ? -T(INFINITY) : T(INFINITY);
}

template <typename T> FG_HD T reduceCombine(Reduce r, T a, T b) {
  return r == Reduce::Sum ? a + b : r == Reduce::Max ? (a > b || a != a ? a : b)
                                                     : (a < b || a != a ? a : b);
}

template <int NI, int NO, int NA> struct RowArgs {
  DType dtype;
  const void* in[NI];
  void* out[NO];
  bool need[atLeastOne<NO>()]; // outputs not needed are not written (null)
  double attr[atLeastOne<NA>()];
  int64_t rows;
  int64_t D;
  void* workspace; // CUDA: partial sums of ColSum outputs
};

} // namespace fg
