// fusegen programs: the interface between a generated op's forward or backward and the
// runtime's plans (fusegen_cpu.h; on CUDA fusegen_plans.cuh picks the plan P::kPlan names).
// Host and device.
//
// A program P (generated: struct Forward / struct Backward in <op>.h) computes, per row:
//   rowPre(rowIn, attr, D, rv)            per-row values that need no reduction (rowIn: the
//                                         [...] inputs' values of the row, and [] inputs)
//   prefix(in, rv, attr, D, j)            per element: the kPrefix values every pass reads,
//                                         into in[kInputs ...] (the row plan may cache them)
//   refresh<s>(in, rv, attr, D, j)        per element, in the passes of kRefreshPasses: the
//                                         values the later passes read, in their place
//   live<k>(rv, attr, D, j)               whether input k (inGuarded) is read at column j
//   for each stage s < kStages:
//     term<s>(in, rv, attr, D, t)         per element: the terms of stage s's reductions
//     rowAfter<s>(red, attr, D, rv)       per row: reduction results -> more per-row values
//   elem(in, rv, attr, D, out)            per element: values of Full, ColSum, Total outputs
//   rowOut(rv, attr, D, out)              per row: values of Row outputs (and Total's part)
// Inputs broadcast per inBcast(k), outputs are written per outKind(m) (fusegen_runtime.h).
// An elementwise op's programs have no stages and no per-row tensors: their rowPre depends on
// [] inputs and attrs only, so the flat and colwise plans call it once per thread.
#pragma once

#include "fusegen_runtime.h"

namespace fg {

enum class Reduce : int { Sum = 0, Max = 1, Min = 2 };

template <typename T> FG_HD T reduceIdentity(Reduce r) {
  return r == Reduce::Sum ? T(0) : r == Reduce::Max ? -T(INFINITY) : T(INFINITY);
}

template <typename T> FG_HD T reduceCombine(Reduce r, T a, T b) {
  return r == Reduce::Sum ? a + b : r == Reduce::Max ? (a > b || a != a ? a : b)
                                                     : (a < b || a != a ? a : b);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// On sm_80 and later one instruction does it for float: max.NaN and min.NaN return NaN when
// either operand is NaN, as the comparisons above do (three instructions per term, of a
// softmax forward's few).
template <> __device__ __forceinline__ float reduceCombine<float>(Reduce r, float a, float b) {
  float y;
  if (r == Reduce::Sum)
    return a + b;
  if (r == Reduce::Max)
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  else
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}
#endif

// A row reduction's accumulator. Sums are compensated (Neumaier's form of Kahan summation):
// s is the running sum, c the sum of the exact rounding errors of its additions (Knuth's
// TwoSum), and the result is s + c. Its error is u |sum| + O(n u^2) sum|partial sums| instead
// of the plain sum's u sum|partial sums| (u: the compute type's unit roundoff), so a row whose
// terms cancel or are large against their spread gets its sum to nearly the compute type's
// precision: LayerNorm of float32 rows of mean 1000 and std 0.01 (D = 1024) erred by 0.07 in
// the output with a plain sum of mean(x), 0.002 (float32's rounding of the mean) with this.
// Chosen over
//  - a shift, sum(x - x0) + n x0: cheaper, but it helps only rows with a common offset, not
//    terms that cancel (sum(t * logits) - ...), and x0 must reach every thread of a row;
//  - pairwise summation: its error grows like log2(n) u sum|terms|, still 10 u 1e6 for the
//    row above;
//  - Welford's running mean: it covers means only, not the sums of every other reduction.
// It costs 6 more additions per term and one more register per sum, off the critical path
// (the loop carries s and c independently): the GPU plans are memory bound, and the CPU's
// sequential loop was bound by the latency of its one dependent addition. Two accumulators
// merge by TwoSum of their sums, which is exact and symmetric in its arguments, so a
// butterfly leaves every lane with the same bits (determinism). Max and min keep c at zero.
template <typename T> struct RowAcc {
  T s, c;
};

// s + e == a + b exactly (barring overflow), in either order of a and b.
template <typename T> FG_HD void twoSum(T a, T b, T& s, T& e) {
  s = a + b;
  const T bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

template <typename T> FG_HD RowAcc<T> accIdentity(Reduce r) { return {reduceIdentity<T>(r), T(0)}; }

template <typename T> FG_HD void accAdd(Reduce r, RowAcc<T>& a, T x) {
  if (r == Reduce::Sum) {
    T s, e;
    twoSum(a.s, x, s, e);
    a.s = s;
    a.c += e;
  } else {
    a.s = reduceCombine(r, a.s, x);
  }
}

// A term into a reduction's accumulator in the GPU's row plan. `plain`: the planner's
// Program::Stage::plain, a sum of terms never below 0 (from the primitives' `sign` claims:
// sums of exp, of squares), which cannot cancel, so one thread's plain sum of its n terms is within n u of
// the exact one, relative (n up to D / 512); compensation would buy nothing there and cost 6
// additions per term, which is what bounds softmax's forward: plain, it ran 8% faster
// (H100, bf16, 32768x4096: 0.199 ms against 0.217; layernorm's variance 15%). Threads'
// sums still merge by TwoSum (accMerge). The CPU's sequential sums stay compensated: one
// lane adds up to D / 4 terms.
template <typename T> FG_HD void accAddTerm(Reduce r, bool plain, RowAcc<T>& a, T x) {
  if (plain)
    a.s += x;
  else
    accAdd(r, a, x);
}

template <typename T> FG_HD RowAcc<T> accMerge(Reduce r, RowAcc<T> a, RowAcc<T> b) {
  if (r != Reduce::Sum)
    return {reduceCombine(r, a.s, b.s), T(0)};
  RowAcc<T> m;
  T e;
  twoSum(a.s, b.s, m.s, e);
  m.c = (a.c + b.c) + e;
  return m;
}

// The reduction's value. An infinite or NaN sum (s - s != 0) has a NaN compensation (inf - inf
// in TwoSum): the sum alone is the value, as a plain sum gives.
template <typename T> FG_HD T accResult(Reduce r, RowAcc<T> a) {
  return r == Reduce::Sum && a.s - a.s == T(0) ? a.s + a.c : a.s;
}

// Online max-and-sum (the planner's Program::Stage::shift). A shifted sum's terms are
// exp(g - m) times factors free of m, m a maximum of the pass before; summed against a share's
// own maximum ma, the sum is the exact one times exp(m - ma). accMergeShifted merges a sum
// scaled so with one against mb into one against max(ma, mb): each side is rescaled once
// (exp and a multiplication), which the error model's bound on the terms covers
// (docs/perf-notes.md). Equal maxima (also both -inf: an empty share) scale by 1.
template <typename T> FG_HD RowAcc<T> accMergeShifted(RowAcc<T> a, T ma, RowAcc<T> b, T mb) {
  const T m = reduceCombine(Reduce::Max, ma, mb);
  const T sa = ma == m ? T(1) : fg::exp(ma - m);
  const T sb = mb == m ? T(1) : fg::exp(mb - m);
  return accMerge(Reduce::Sum, RowAcc<T>{a.s * sa, a.c * sa}, RowAcc<T>{b.s * sb, b.c * sb});
}

// The maximum a share's shifted terms are computed against during online max-and-sum: its
// own, or 0 while it has no finite one (every term so far -inf: a causal mask's hidden keys),
// whose shifted terms exp(-inf - 0) are the 0 they are at any finite maximum, where against
// -inf itself they would be NaN. The merges rescale by the shares' true maxima.
template <typename T> FG_HD T shiftBase(Reduce r, T m) {
  return r == Reduce::Max && m == -T(INFINITY) ? T(0) : m;
}

// Uniform conditions (emit/CodePrinter.h UniformConditions): the conditions, the same for
// every element, that a program's element functions branch on (a lazy branch, a reduction's
// guard) read as fg::uniform<U>(i, value). U knows some of their values at compile time: the
// bits of kKnown, with the values in kValue. A kernel runs its element loop with the values
// the op's attr defaults give (P::kDefaultKnown, P::kDefaultValue) where the call's match
// them, so each such branch folds away, and with NoUniforms (every branch taken at run time)
// else: nvcc keeps a uniform branch inside an unrolled element loop, about 2 instructions per
// element each.
template <unsigned Known, unsigned Value> struct Uniforms {
  static constexpr unsigned kKnown = Known, kValue = Value;
};
using NoUniforms = Uniforms<0u, 0u>;

template <class U> FG_HD constexpr bool uniform(int i, bool value) {
  return i < 32 && ((U::kKnown >> i) & 1u) ? ((U::kValue >> i) & 1u) != 0 : value;
}

// Calls f(U{}) with the Uniforms of this call: P's defaults where its attrs (as T) and D
// give them, else NoUniforms.
template <class P, typename T, class F> FG_HD void withUniforms(const double* attr, int64_t D, F&& f) {
  if constexpr (P::kDefaultKnown == 0u) {
    f(NoUniforms{});
  } else {
    T at[atLeastOne<P::kAttrs>()];
    for (int k = 0; k < P::kAttrs; ++k)
      at[k] = static_cast<T>(attr[k]);
    if ((P::template uniforms<T, false>(at, static_cast<T>(D)) & P::kDefaultKnown) ==
        P::kDefaultValue)
      f(Uniforms<P::kDefaultKnown, P::kDefaultValue>{});
    else
      f(NoUniforms{});
  }
}

// ---- rolls (Move::Roll): input k reads column (j - s) mod D, s the shift of its roll
// (P::inRoll(k)) in the call. The shifts are formulas over the attrs and D (P::rolls, torch.roll's
// k: any integer); the host computes each once per call, reduces it to [0, D) and puts it in
// its attr slot (P::kRollAttr + i, which the glue passes as 0), where every plan reads it: the
// loads as an integer (rollShift), a rolled j in the compute type (exact: below D, which a
// program reading j keeps below 2^24 in float32). A plan's vector loads of a rolled input are
// whole vectors where s is a multiple of their width (and D is): each plan checks that per call
// and runs its scalar variant otherwise.

// s mod D in [0, D) (0 for D == 0: no columns). fmod is exact, and so is the result.
inline double reducedShift(double s, int64_t D) {
  if (D <= 0 || !std::isfinite(s))
    return 0;
  const double r = std::fmod(std::nearbyint(s), static_cast<double>(D));
  return r < 0 ? r + static_cast<double>(D) : r;
}

// The call's arguments with the shifts of P's rolls in their slots: what every plan runs with.
template <class P> typename P::Args withRolls(const typename P::Args& a) {
  typename P::Args b = a;
  if constexpr (P::kRolls > 0) {
    double s[P::kRolls];
    P::template rolls<double, false>(a.attr, static_cast<double>(a.D), s);
    for (int i = 0; i < P::kRolls; ++i)
      b.attr[P::kRollAttr + i] = reducedShift(s[i], a.D);
  }
  return b;
}

// The shift input k is read with in the call (withRolls's): 0 where it is not rolled.
template <class P, class Args> FG_HD int64_t rollShift(const Args& a, int k) {
  if constexpr (P::kRolls == 0) {
    (void)a, (void)k;
    return 0;
  } else {
    return P::inRoll(k) < 0 ? 0 : static_cast<int64_t>(a.attr[P::kRollAttr + P::inRoll(k)]);
  }
}

// Whether every rolled input of P is read by whole vectors of V elements in the call: its shift
// is a multiple of V (D being one; the callers check that).
template <class P, class Args> FG_HD bool rollsAlign(const Args& a, int V) {
  for (int k = 0; k < P::kInputs; ++k)
    if (P::inMove(k) == Move::Roll && rollShift<P>(a, k) % V != 0)
      return false;
  return true;
}

// Picks (P::pick(s, j), the planner's Program::Stage::pick): a sum(where(j == r, x, 0)) with r
// one value per row has one term that may be nonzero, at column r. Its term is evaluated
// there alone (P::pickColumns gives r; the element's inputs are loaded at that column), not
// summed over the row: a load per row instead of a comparison, a select and an addition per
// element. A column r that is not one of the row's (ignore_index, a fraction) picks nothing.
template <class P> FG_HD constexpr bool hasPicks(int s) {
  for (int j = 0; j < P::reductions(s); ++j)
    if (P::pick(s, j))
      return true;
  return false;
}

// Column c of a pick, if the row has it (an integer in [0, D)).
template <typename T> FG_HD bool pickedColumn(T c, int64_t D, int64_t& col) {
  if (!(c >= T(0) && c < static_cast<T>(D)))
    return false;
  col = static_cast<int64_t>(c);
  return static_cast<T>(col) == c;
}

// The element values pass kPass reads, after the inputs in `in` (in[kInputs ...]): the prefix
// computed from them, then the refreshes of passes 1 ... kPass (P::kRefreshPasses) in order,
// each reading the row values rv has by then. Where the row is not held computed (rows re-read
// per pass, the CPU), every pass computes them so; the row plan's cache keeps them instead,
// refreshed in place (fusegen_row_cuda.cuh elementValues).
template <class P, int kFrom, int kTo, typename T, bool kFast, class U>
FG_HD void refreshes(T* in, const T* rv, const T* attr, T D, T j) {
  if constexpr (kFrom <= kTo) {
    if constexpr (((P::kRefreshPasses >> kFrom) & 1u) != 0)
      P::template refresh<kFrom, T, kFast, U>(in, rv, attr, D, j);
    refreshes<P, kFrom + 1, kTo, T, kFast, U>(in, rv, attr, D, j);
  }
}
template <class P, int kPass, typename T, bool kFast, class U = NoUniforms>
FG_HD void elementValuesAt(T* in, const T* rv, const T* attr, T D, T j) {
  if constexpr (P::kPrefix > 0) {
    P::template prefix<T, kFast, U>(in, rv, attr, D, j);
    refreshes<P, 1, kPass, T, kFast, U>(in, rv, attr, D, j);
  }
}

// Whether pass s is shifted by pass s - 1 (every reduction of it; the planner marks a pass
// only then): the two run as one, with one combination across threads or lanes.
template <class P> FG_HD constexpr bool shiftedStage(int s) {
  if (s <= 0 || s >= P::kStages || P::reductions(s) == 0)
    return false;
  for (int j = 0; j < P::reductions(s); ++j)
    if (P::shiftOf(s, j) < 0)
      return false;
  return true;
}

// A program's traits as slots: input k's index among the inputs of its broadcast (registers
// hold full and [D] inputs in compact slots), output m's among the ColSum or the Total outputs
// (their partial sums), and how many of each there are.
template <class P> FG_HD constexpr int inputSlot(int k, Bcast b) {
  int n = 0;
  for (int j = 0; j < k; ++j)
    n += P::inBcast(j) == b;
  return n;
}
template <class P> FG_HD constexpr int inputsOf(Bcast b) { return inputSlot<P>(P::kInputs, b); }
// The outputs a call writes, as a mask of P::inReaders's bits (bit m: output m; every bit for
// the outputs past the 32nd): an input no output of the mask reads is not loaded.
template <class P, class Args> FG_HD unsigned neededOutputs(const Args& a) {
  unsigned needed = 0;
  for (int m = 0; m < P::kOutputs; ++m)
    needed |= m >= 32 ? ~0u : a.need[m] ? 1u << m : 0u;
  return needed;
}
// Its [D] inputs of either kind (of the dtype, or typed: integers, statistics in the compute
// type), which only the colwise and row plans read.
template <class P> FG_HD constexpr int colInputs() {
  return inputsOf<P>(Bcast::Col) + inputsOf<P>(Bcast::TypedCol);
}
// The op's dims that the inputs read per element and lacking some of the op's dims have
// (mappedRow's bits; kAllDims where there are none): rows agreeing on them read the same rows of
// those inputs (fusegen_runtime.h orderedRow).
template <class P> FG_HD constexpr unsigned sharedRowDims() {
  unsigned keep = 0;
  bool any = false;
  for (int k = 0; k < P::kInputs; ++k)
    if ((P::inBcast(k) == Bcast::Full || P::inBcast(k) == Bcast::TypedFull) &&
        P::inDims(k) != kAllDims) {
      keep |= P::inDims(k);
      any = true;
    }
  return any ? keep : kAllDims;
}
// The random streams a program draws (its Random inputs; input k's stream is its slot). The
// streams come first, in order; after them, a stream read at moved columns (the derived
// backward of dropout under a move, RoPE's rotate_half of a dropped value) is an input of its
// own whose stream is its source's (P::inSource), drawn at the moved elements: a number
// depends on its stream and element alone. (Such programs run the CPU and row plans only.)
template <class P> FG_HD constexpr int randomStreams() { return inputsOf<P>(Bcast::Random); }
template <class P> FG_HD constexpr int randomStream(int k) {
  return inputSlot<P>(P::inSource(k) >= 0 ? P::inSource(k) : k, Bcast::Random);
}

template <class P> FG_HD constexpr int outputSlot(int m, OutKind kind) {
  int n = 0;
  for (int j = 0; j < m; ++j)
    n += P::outKind(j) == kind;
  return n;
}
// Outputs stored in a type of their own (P::outElem(m) != Elem::Dtype): the plans keep their
// values in the compute type until the store converts them, in arrays indexed by this slot.
template <class P> FG_HD constexpr int typedSlot(int m) {
  int n = 0;
  for (int j = 0; j < m; ++j)
    n += P::outElem(j) != Elem::Dtype;
  return n;
}
template <class P> FG_HD constexpr int typedOutputs() { return typedSlot<P>(P::kOutputs); }

template <class P> FG_HD constexpr int colSumSlot(int m) { return outputSlot<P>(m, OutKind::ColSum); }
template <class P> FG_HD constexpr int colSumOutputs() { return colSumSlot<P>(P::kOutputs); }
template <class P> FG_HD constexpr int colM2Slot(int m) { return outputSlot<P>(m, OutKind::ColM2); }
template <class P> FG_HD constexpr int colM2Outputs() { return colM2Slot<P>(P::kOutputs); }
template <class P> FG_HD constexpr int totalSlot(int m) { return outputSlot<P>(m, OutKind::Total); }
template <class P> FG_HD constexpr int totalOutputs() { return totalSlot<P>(P::kOutputs); }
// How Total slot j combines (P::outReduce of its output).
template <class P> FG_HD constexpr Reduce totalReduce(int j) {
  for (int m = 0; m < P::kOutputs; ++m)
    if (P::outKind(m) == OutKind::Total && totalSlot<P>(m) == j)
      return P::outReduce(m);
  return Reduce::Sum;
}
// [] outputs computed after every row (P::finish): a program with them runs its finish even
// over no rows (the whole-tensor values of nothing are their combinations' identities).
template <class P> FG_HD constexpr int scalarOutputs() { return outputSlot<P>(P::kOutputs, OutKind::Scalar); }

} // namespace fg
