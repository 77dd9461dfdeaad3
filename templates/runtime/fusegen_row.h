// fusegen row programs: the interface between a generated op with reductions over the last
// dim and the row plans (fusegen_row_cuda.cuh, fusegen_cpu.h). Host and device.
//
// A program P (generated: struct Forward / struct Backward in <op>.h) computes, per row:
//   rowPre(rowIn, attr, D, rv)            per-row values that need no reduction (rowIn: the
//                                         [...] inputs' values of the row, and [] inputs)
//   for each stage s < kStages:
//     term<s>(in, rv, attr, D, t)         per element: the terms of stage s's reductions
//     rowAfter<s>(red, attr, D, rv)       per row: reduction results -> more per-row values
//   elem(in, rv, attr, D, out)            per element: values of Full, ColSum, Total outputs
//   rowOut(rv, attr, D, out)              per row: values of Row outputs (and Total's part)
// Inputs broadcast per inBcast(k); outputs are written per outKind(m):
//   Full   one value per element
//   Row    one value per row
//   Stat   one value per row in the compute type: a statistic saved for the backward, which
//          reads it as an input of Bcast::Stat
//   ColSum the sum over rows of an element value (a [D] gradient), accumulated in the
//          compute type per fixed chunk of rows and added in a fixed order
//   Total  the sum over rows and columns of an element value plus the sum over rows of a
//          per-row value (a [] gradient; the generated code makes one of them zero),
//          accumulated per fixed chunk of rows (CPU) or per block (CUDA), then the partials
//          added in a fixed order
#pragma once

#include "fusegen_runtime.h"

namespace fg {

enum class OutKind : int { Full = 0, Row = 1, ColSum = 2, Total = 3, Stat = 4 };
enum class Reduce : int { Sum = 0, Max = 1, Min = 2 };

template <typename T> FG_HD T reduceIdentity(Reduce r) {
  return r == Reduce::Sum ? T(0) : r == Reduce::Max ? -T(INFINITY) : T(INFINITY);
}

template <typename T> FG_HD T reduceCombine(Reduce r, T a, T b) {
  return r == Reduce::Sum ? a + b : r == Reduce::Max ? (a > b || a != a ? a : b)
                                                     : (a < b || a != a ? a : b);
}

// Total outputs: how many a program has, and output m's index among them.
template <class P> FG_HD constexpr int totalSlot(int m) {
  int n = 0;
  for (int j = 0; j < m; ++j)
    n += P::outKind(j) == OutKind::Total;
  return n;
}

template <class P> FG_HD constexpr int totalOutputs() { return totalSlot<P>(P::kOutputs); }

template <int NI, int NO, int NA> struct RowArgs {
  DType dtype;
  const void* in[NI];
  void* out[NO];
  bool need[atLeastOne<NO>()]; // outputs not needed are not written (null)
  double attr[atLeastOne<NA>()];
  int64_t rows;
  int64_t D;
  void* workspace; // CUDA: partial sums of ColSum and Total outputs
};

} // namespace fg
