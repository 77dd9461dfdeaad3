// fusegen CPU plan: runs every program (fusegen_program.h), whatever its P::kPlan, with
// parallelFor over fixed chunks of rows: per row rowPre, the reduction stages (compensated
// sums in interleaved lanes), then elem per element and rowOut. [D] and [] sums are
// accumulated per chunk in fp32/fp64 and the chunks added in order, so results do not depend
// on the thread count.
#pragma once

#include "fusegen_program.h"
#include "fusegen_runtime.h"

#include "fusegen_cpu_torch.h" // (the half and FP8 types, parallelFor)

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace fg {

inline float toCompute(c10::Half x) { return static_cast<float>(x); }
inline float toCompute(c10::BFloat16 x) { return static_cast<float>(x); }
template <> inline c10::Half fromCompute<c10::Half>(float x) { return c10::Half(x); }
template <> inline c10::BFloat16 fromCompute<c10::BFloat16>(float x) { return c10::BFloat16(x); }

namespace cpu {

// Element i of an output of its own type e (fusegen_runtime.h Elem), from the compute type:
// FP8 saturated (clamped to the largest finite value, NaN kept), then rounded to nearest even
// by c10's conversion, as the CUDA plans' __NV_SATFINITE conversion does; integers by
// toInteger, bools as x != 0.
template <typename T> void storeTyped(Elem e, void* p, int64_t i, T x) {
  if (e == Elem::Compute) {
    static_cast<T*>(p)[i] = x;
    return;
  }
  if (e == Elem::Float32) {
    static_cast<float*>(p)[i] = static_cast<float>(x);
    return;
  }
  if (storeInteger(e, p, i, x)) return;
  const T max = static_cast<T>(fp8Max(e));
  const float f = static_cast<float>(x != x ? x : std::min(std::max(x, -max), max));
  if (e == Elem::Float8E4M3)
    static_cast<c10::Float8_e4m3fn*>(p)[i] = c10::Float8_e4m3fn(f);
  else
    static_cast<c10::Float8_e5m2*>(p)[i] = c10::Float8_e5m2(f);
}

// Element i of output m: in the call's storage type S, or in its own.
template <class P, typename S, typename T> void storeOutput(int m, void* p, int64_t i, T x) {
  if (P::outElem(m) == Elem::Dtype)
    static_cast<S*>(p)[i] = fromCompute<S>(x);
  else
    storeTyped(P::outElem(m), p, i, x);
}

constexpr int64_t kGrain = 32768; // elements per parallel task

template <class P, typename S> struct Runner {
  using T = compute_t<S>;
  const typename P::Args& a;
  T attr[atLeastOne<P::kAttrs>()];
  T Dval;
  T scalar[P::kInputs];
  RngKey key{}; // Random inputs: the call's seed and offset
  // Rolled inputs: the call's shift (fusegen_program.h withRolls); 0 for the others.
  int64_t shift[atLeastOne<P::kInputs>()];

  explicit Runner(const typename P::Args& args) : a(args), Dval(static_cast<T>(args.D)) {
    if (inputsOf<P>(Bcast::Random) > 0)
      key = rngKey(a.rng);
    for (int k = 0; k < P::kInputs; ++k)
      shift[k] = rollShift<P>(a, k);
    for (int k = 0; k < P::kAttrs; ++k)
      attr[k] = static_cast<T>(a.attr[k]);
    for (int k = 0; k < P::kInputs; ++k)
      scalar[k] = P::inBcast(k) != Bcast::Scalar ? T(0)
                  : P::inElem(k) == Elem::Dtype  ? toCompute(static_cast<const S*>(a.in[k])[0])
                                                 : loadTyped<T>(P::inElem(k), a.in[k], 0);
  }

  // Input k's row at the op's row `row`: its own where it omits some leading dims.
  int64_t inRow(int k, int64_t row) const {
    return P::inDims(k) == kAllDims ? row : mappedRow<P::kNamedDims>(P::inDims(k), row, a.dims);
  }
  // The offset of input k's element at column c of the op's row `row` (a chunk of a packed
  // input: in rows of inChunks(k) * D, from column inChunk(k) * D).
  int64_t inElement(int k, int64_t row, int64_t c) const {
    return (inRow(k, row) * P::inChunks(k) + P::inChunk(k)) * a.D + c;
  }

  void elementInputs(int64_t row, int64_t c, T* in) const {
    for (int k = 0; k < P::kInputs; ++k) {
      const int64_t mc = movedColumn(P::inMove(k), c, a.D, shift[k]); // the column k reads at c
      switch (P::inBcast(k)) {
      case Bcast::Full:
        in[k] = toCompute(static_cast<const S*>(a.in[k])[inElement(k, row, mc)]);
        break;
      case Bcast::Col:
        in[k] = toCompute(static_cast<const S*>(a.in[k])[mc]);
        break;
      case Bcast::Random: {
        T u[1];
        uniforms<T, 1>(key, randomStream<P>(k), row * a.D + mc, u);
        in[k] = u[0];
        break;
      }
      case Bcast::TypedFull:
        in[k] = loadTyped<T>(P::inElem(k), a.in[k], inElement(k, row, mc));
        break;
      case Bcast::TypedCol:
        in[k] = loadTyped<T>(P::inElem(k), a.in[k], mc);
        break;
      default:
        in[k] = scalar[k];
      }
    }
  }

  // The element's inputs, then the values pass kPass reads from them (P::kPrefix values after
  // them: fusegen_program.h elementValuesAt).
  template <int kPass> void elementValues(int64_t row, int64_t c, const T* rv, T* in) const {
    elementInputs(row, c, in);
    elementValuesAt<P, kPass, T, isHalf<S>()>(in, rv, attr, Dval, static_cast<T>(c));
  }

  // Pass St's picks (fusegen_program.h): the term at the picked column, into lane 0.
  template <int St, int N, int L>
  void addPicks(int64_t row, const T* rv, RowAcc<T> (&acc)[N][L]) const {
    if constexpr (hasPicks<P>(St)) {
      T c[N];
      P::template pickColumns<St, T, isHalf<S>()>(rv, attr, Dval, c);
      for (int j = 0; j < P::reductions(St); ++j) {
        int64_t col;
        if (!P::pick(St, j) || !pickedColumn(c[j], a.D, col))
          continue;
        T in[P::kInputs + P::kPrefix], t[N];
        elementValues<St>(row, col, rv, in);
        P::template term<St, T, isHalf<S>()>(in, rv, attr, Dval, c[j], t);
        accAdd(Reduce::Sum, acc[j][0], t[j]);
      }
    }
  }

  // Passes St (with the maxima) and St + 1 (sums shifted by them, fusegen_program.h) as one:
  // each lane takes pass St's reductions of its columns, sums against its own maxima, and the
  // lanes merge in lane order. (Pass St's other row values are per lane partial until then:
  // the shifted terms read only the maxima.)
  template <int St> void shiftedStages(int64_t row, T* rv) const {
    constexpr int NM = P::reductions(St), NS = P::reductions(St + 1), kLanes = 4;
    RowAcc<T> first[NM][kLanes], sm[NS][kLanes];
    T laneRv[kLanes][P::kRowValues > 0 ? P::kRowValues : 1];
    bool need[NM], needSum[NS]; // the guards (Program::Stage::guard)
    P::template guards<St, T, isHalf<S>()>(attr, Dval, need);
    P::template guards<St + 1, T, isHalf<S>()>(attr, Dval, needSum);
    for (int l = 0; l < kLanes; ++l) {
      for (int i = 0; i < NM; ++i)
        first[i][l] = accIdentity<T>(P::reduceKind(St, i));
      for (int j = 0; j < NS; ++j)
        sm[j][l] = accIdentity<T>(Reduce::Sum);
      for (int v = 0; v < P::kRowValues; ++v)
        laneRv[l][v] = rv[v];
    }
    for (int64_t c = 0; c < a.D; ++c) {
      T in[P::kInputs + P::kPrefix], t[NM];
      elementValues<St>(row, c, rv, in);
      P::template term<St, T, isHalf<S>()>(in, rv, attr, Dval, static_cast<T>(c), t);
      for (int i = 0; i < NM; ++i)
        if (!P::pick(St, i) && need[i])
          accAdd(P::reduceKind(St, i), first[i][c % kLanes], t[i]);
    }
    T laneRed[kLanes][NM];
    for (int l = 0; l < kLanes; ++l) {
      for (int i = 0; i < NM; ++i)
        laneRed[l][i] = shiftBase(P::reduceKind(St, i), accResult(P::reduceKind(St, i), first[i][l]));
      P::template rowAfter<St, T, isHalf<S>()>(laneRed[l], attr, Dval, laneRv[l]);
    }
    for (int64_t c = 0; c < a.D; ++c) {
      T in[P::kInputs + P::kPrefix], t[NS];
      elementValues<St + 1>(row, c, laneRv[c % kLanes], in);
      P::template term<St + 1, T, isHalf<S>()>(in, laneRv[c % kLanes], attr, Dval,
                                                static_cast<T>(c), t);
      for (int j = 0; j < NS; ++j)
        if (needSum[j])
          accAdd(Reduce::Sum, sm[j][c % kLanes], t[j]);
    }
    addPicks<St>(row, rv, first);
    RowAcc<T> red0[NM], sum[NS];
    for (int i = 0; i < NM; ++i)
      red0[i] = first[i][0];
    for (int j = 0; j < NS; ++j)
      sum[j] = sm[j][0];
    for (int l = 1; l < kLanes; ++l) {
      for (int j = 0; j < NS; ++j) {
        const int i = P::shiftOf(St + 1, j);
        sum[j] = accMergeShifted(sum[j], red0[i].s, sm[j][l], first[i][l].s);
      }
      for (int i = 0; i < NM; ++i)
        red0[i] = accMerge(P::reduceKind(St, i), red0[i], first[i][l]);
    }
    T red[NM > NS ? NM : NS];
    for (int i = 0; i < NM; ++i)
      red[i] = accResult(P::reduceKind(St, i), red0[i]);
    P::template rowAfter<St, T, isHalf<S>()>(red, attr, Dval, rv);
    for (int j = 0; j < NS; ++j)
      red[j] = accResult(Reduce::Sum, sum[j]);
    P::template rowAfter<St + 1, T, isHalf<S>()>(red, attr, Dval, rv);
  }

  template <int St> void stage(int64_t row, T* rv) const {
    if constexpr (St + 1 < P::kStages && shiftedStage<P>(St + 1)) {
      shiftedStages<St>(row, rv);
      stage<St + 2>(row, rv);
    } else if constexpr (St < P::kStages) {
      // Compensated sums (fusegen_program.h) in kLanes accumulators of interleaved columns, merged
      // in lane order: independent dependency chains the core overlaps.
      constexpr int N = P::reductions(St) > 0 ? P::reductions(St) : 1;
      constexpr int kLanes = 4;
      RowAcc<T> acc[N][kLanes];
      bool need[N]; // the guards (Program::Stage::guard)
      P::template guards<St, T, isHalf<S>()>(attr, Dval, need);
      for (int j = 0; j < N; ++j)
        for (int l = 0; l < kLanes; ++l)
          acc[j][l] = accIdentity<T>(P::reduceKind(St, j));
      auto add = [&](int64_t c, int l) {
        T in[P::kInputs + P::kPrefix], t[N];
        elementValues<St>(row, c, rv, in);
        P::template term<St, T, isHalf<S>()>(in, rv, attr, Dval, static_cast<T>(c), t);
        for (int j = 0; j < P::reductions(St); ++j)
          if (!P::pick(St, j) && need[j])
            accAdd(P::reduceKind(St, j), acc[j][l], t[j]);
      };
      int64_t c = 0;
      for (; c + kLanes <= a.D; c += kLanes)
        for (int l = 0; l < kLanes; ++l)
          add(c + l, l);
      for (int l = 0; c + l < a.D; ++l)
        add(c + l, l);
      addPicks<St>(row, rv, acc);
      T red[N];
      for (int j = 0; j < N; ++j) {
        RowAcc<T> r = acc[j][0];
        for (int l = 1; l < kLanes; ++l)
          r = accMerge(P::reduceKind(St, j), r, acc[j][l]);
        red[j] = accResult(P::reduceKind(St, j), r);
      }
      P::template rowAfter<St, T, isHalf<S>()>(red, attr, Dval, rv);
      stage<St + 1>(row, rv);
    }
  }

  // Runs rows [r0, r1); ColSum values go to colPartial[slot * D + c], ColM2 values' running
  // mean (of the values less the shift in the third slot: the values of row 0, set here when
  // r0 is 0, else given; fusegen_cuda.cuh's colwiseBody says why) and sum of squared deviations
  // (Welford) to three slots, Total values (elem's combined per row first, or rowOut's) to
  // totalPartial[slot].
  void rows(int64_t r0, int64_t r1, T* colPartial, T* totalPartial) const {
    for (int64_t row = r0; row < r1; ++row) {
      const T inv = T(1) / static_cast<T>(row - r0 + 1); // ColM2: Welford's weight of the row
      T rv[atLeastOne<P::kRowValues>()];
      T rowTotal[atLeastOne<totalOutputs<P>()>()];
      for (int j = 0; j < totalOutputs<P>(); ++j)
        rowTotal[j] = reduceIdentity<T>(totalReduce<P>(j));
      T rowIn[P::kInputs];
      for (int k = 0; k < P::kInputs; ++k)
        rowIn[k] = P::inBcast(k) == Bcast::Row
                       ? (P::inElem(k) == Elem::Dtype
                              ? toCompute(static_cast<const S*>(a.in[k])[inRow(k, row)])
                              : loadTyped<T>(P::inElem(k), a.in[k], inRow(k, row)))
                   : P::inBcast(k) == Bcast::Stat ? static_cast<const T*>(a.in[k])[row]
                   : P::inBcast(k) == Bcast::Position
                       ? static_cast<T>(positionOf<P::kNamedDims>(P::inDims(k), row, a.dims))
                       : scalar[k];
      P::template rowPre<T, isHalf<S>()>(rowIn, attr, Dval, rv);
      stage<0>(row, rv);
      for (int64_t c = 0; c < a.D; ++c) {
        T in[P::kInputs + P::kPrefix], out[P::kOutputs];
        elementValues<P::kStages>(row, c, rv, in);
        P::template elem<T, isHalf<S>()>(in, rv, attr, Dval, static_cast<T>(c), out);
        int slot = 0;
        for (int m = 0; m < P::kOutputs; ++m) {
          if (P::outKind(m) == OutKind::Full && a.need[m])
            storeOutput<P, S>(m, a.out[m], (row * P::outChunks(m) + P::outChunk(m)) * a.D + c,
                              out[m]);
          if (P::outKind(m) == OutKind::ColSum)
            colPartial[static_cast<int64_t>(slot++) * a.D + c] += out[m];
          if (P::outKind(m) == OutKind::ColM2) {
            T* at = colPartial + static_cast<int64_t>(slot) * a.D + c;
            if (row == 0)
              at[2 * a.D] = out[m];
            const T value = out[m] - at[2 * a.D];
            const T delta = value - at[0];
            at[0] += delta * inv;
            at[a.D] += delta * (value - at[0]);
            slot += 3;
          }
          if (P::outKind(m) == OutKind::Total && !P::totalPerRow(m))
            rowTotal[totalSlot<P>(m)] = reduceCombine(P::outReduce(m), rowTotal[totalSlot<P>(m)], out[m]);
        }
      }
      T out[P::kOutputs];
      P::template rowOut<T, isHalf<S>()>(rv, attr, Dval, out);
      for (int m = 0; m < P::kOutputs; ++m) {
        if (P::outKind(m) == OutKind::Row && a.need[m])
          storeOutput<P, S>(m, a.out[m], row, out[m]);
        if (P::outKind(m) == OutKind::Stat && a.need[m])
          static_cast<T*>(a.out[m])[row] = out[m];
        if (P::outKind(m) == OutKind::Total)
          totalPartial[totalSlot<P>(m)] =
              reduceCombine(P::outReduce(m), totalPartial[totalSlot<P>(m)],
                            P::totalPerRow(m) ? out[m] : rowTotal[totalSlot<P>(m)]);
      }
    }
  }
};

template <class P, typename S> void runTyped(const typename P::Args& a) {
  using T = compute_t<S>;
  Runner<P, S> runner(a);
  int colSums = 0; // partial rows per chunk: one per ColSum output, three per ColM2
  for (int m = 0; m < P::kOutputs; ++m)
    colSums += P::outKind(m) == OutKind::ColSum ? 1 : P::outKind(m) == OutKind::ColM2 ? 3 : 0;
  constexpr int totals = atLeastOne<totalOutputs<P>()>();
  // Fixed chunks of rows, each with its own partial ColSum rows and Total values, added in
  // chunk order.
  constexpr int64_t kMaxChunks = 256;
  const int64_t rowsPerChunk =
      std::max({int64_t(1), kGrain / std::max<int64_t>(a.D, 1), (a.rows + kMaxChunks - 1) / kMaxChunks});
  const int64_t chunks = (a.rows + rowsPerChunk - 1) / rowsPerChunk;
  std::vector<T> partials(static_cast<size_t>(std::max(colSums, 1)) * chunks * a.D, T(0));
  std::vector<T> totalPartials(static_cast<size_t>(totals) * chunks);
  for (int64_t j = 0; j < chunks; ++j)
    for (int t = 0; t < totals; ++t)
      totalPartials[static_cast<size_t>(j) * totals + t] = reduceIdentity<T>(totalReduce<P>(t));
  // ColM2 outputs: chunk 0 first, whose row 0 gives every chunk its shift (rows()).
  int64_t first = 0;
  if constexpr (colM2Outputs<P>() > 0)
    if (chunks > 0) {
      const size_t width = static_cast<size_t>(std::max(colSums, 1)) * a.D;
      runner.rows(0, std::min(a.rows, rowsPerChunk), partials.data(), totalPartials.data());
      for (int m = 0, slot = 0; m < P::kOutputs; ++m) {
        if (P::outKind(m) == OutKind::ColM2)
          for (int64_t j = 1; j < chunks; ++j)
            std::copy_n(partials.data() + (slot + 2) * a.D, a.D,
                        partials.data() + j * width + (slot + 2) * a.D);
        slot += P::outKind(m) == OutKind::ColSum ? 1 : P::outKind(m) == OutKind::ColM2 ? 3 : 0;
      }
      first = 1;
    }
  parallelFor(first, chunks, 1, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j)
      runner.rows(j * rowsPerChunk, std::min(a.rows, (j + 1) * rowsPerChunk),
                  partials.data() + static_cast<size_t>(j) * std::max(colSums, 1) * a.D,
                  totalPartials.data() + static_cast<size_t>(j) * totals);
  });
  int slot = 0;
  for (int m = 0; m < P::kOutputs; ++m) {
    if (P::outKind(m) == OutKind::ColSum) {
      if (a.need[m])
        for (int64_t c = 0; c < a.D; ++c) {
          T s = T(0);
          for (int64_t j = 0; j < chunks; ++j)
            s += partials[(static_cast<size_t>(j) * std::max(colSums, 1) + slot) * a.D + c];
          storeOutput<P, S>(m, a.out[m], c, s);
        }
      ++slot;
    } else if (P::outKind(m) == OutKind::ColM2) { // the chunks merged in chunk order (Chan)
      if (a.need[m])
        for (int64_t c = 0; c < a.D; ++c) {
          T n = T(0), mean = T(0), m2 = T(0);
          for (int64_t j = 0; j < chunks; ++j) {
            const size_t at = (static_cast<size_t>(j) * std::max(colSums, 1) + slot) * a.D + c;
            const int64_t inChunk = std::min(a.rows, (j + 1) * rowsPerChunk) - j * rowsPerChunk;
            chanMerge(n, mean, m2, static_cast<T>(inChunk), partials[at], partials[at + a.D]);
          }
          storeOutput<P, S>(m, a.out[m], c, m2);
        }
      slot += 3;
    }
  }
  // The Total outputs: the chunks' partials combined in chunk order; then the [] outputs
  // computed from them (P::finish).
  T tot[totals], out[P::kOutputs];
  for (int t = 0; t < totals; ++t) {
    tot[t] = reduceIdentity<T>(totalReduce<P>(t));
    for (int64_t j = 0; j < chunks; ++j)
      tot[t] = reduceCombine(totalReduce<P>(t), tot[t], totalPartials[static_cast<size_t>(j) * totals + t]);
  }
  if constexpr (scalarOutputs<P>() > 0)
    P::template finish<T, isHalf<S>()>(tot, runner.attr, runner.Dval, out);
  for (int m = 0; m < P::kOutputs; ++m) {
    if (!a.need[m])
      continue;
    if (P::outKind(m) == OutKind::Total)
      storeOutput<P, S>(m, a.out[m], 0, tot[totalSlot<P>(m)]);
    else if (P::outKind(m) == OutKind::Scalar)
      storeOutput<P, S>(m, a.out[m], 0, out[m]);
  }
}

template <class P> void run(const typename P::Args& call) {
  const typename P::Args a = withRolls<P>(call);
  saveRng(a.rng);
  switch (a.dtype) {
  case DType::Float32:
    return runTyped<P, float>(a);
  case DType::Float64:
    return runTyped<P, double>(a);
  case DType::Float16:
    return runTyped<P, c10::Half>(a);
  case DType::BFloat16:
    return runTyped<P, c10::BFloat16>(a);
  }
  throw std::runtime_error("fusegen: unsupported dtype");
}

} // namespace cpu
} // namespace fg
