// fusegen CUDA groups plan: runs a program (fusegen_program.h) whose P::kPlan is Plan::Groups:
// no reductions, element outputs only, and inputs that omit the op's innermost named leading
// dims (RoPE's cos and sin [S, D] against q [B, S, H, D]). The op's rows then come in groups
// (the H rows of one position) that read the same row of every such input: a thread takes one
// 128-bit vector of columns of a group (and where halves of rows are exchanged, its partner in
// the other half, so that each element is loaded once), loads the shared inputs' vectors once,
// and runs the group's rows a few at a time with their loads issued first. The row
// plan gave each thread one vector per row (a 128-column row: 16 threads) and read the tables
// again for every row; RoPE ran latency bound at 61% of copy (docs/perf-notes.md).
// A call the plan cannot vectorize (D not a multiple of the vector width, or of twice it where
// halves are exchanged; a roll's shift not a multiple of it; tensors not 16-byte aligned) runs
// the row plan (fusegen_plans.cuh).
#pragma once

#include "fusegen_cuda.cuh"

namespace fg::cuda {

// Whether input k is read at another row than the op's (it omits some named dims; not a
// position, which is computed per row).
template <class P> FG_HD constexpr bool mappedInput(int k) {
  return P::inDims(k) != kAllDims && P::inBcast(k) != Bcast::Position &&
         P::inBcast(k) != Bcast::Unread;
}

// The innermost named dims that every mapped input omits: the rows of a group differ only in
// them (fusegen's planner picks the plan where there is at least one).
template <class P> constexpr int groupDims() {
  int n = 0;
  for (int i = P::kNamedDims - 1; i >= 0; --i) {
    bool omitted = true;
    for (int k = 0; k < P::kInputs; ++k)
      omitted = omitted && !(mappedInput<P>(k) && ((P::inDims(k) >> i) & 1u));
    if (!omitted)
      break;
    ++n;
  }
  return n;
}

// Rows per group: the product of the group dims' sizes.
template <class P> int64_t groupRows(const typename P::Args& a) {
  int64_t g = 1;
  for (int i = P::kNamedDims - groupDims<P>(); i < P::kNamedDims; ++i)
    g *= a.dims.size[i];
  return g;
}

// Resident blocks of kThreads per SM the register budget is set for (128 registers a thread:
// 64 spilled in RoPE's backward).
constexpr int kGroupBlocksPerSm = 2;

// Whether the program exchanges halves of rows (SwapHalves): a thread then takes a vector of
// the first half and its partner in the second, and a swapped input whose tensor is read at its
// own columns too (P::inSource: the other half's vector, or its own with pairs exchanged) is
// taken from those registers, not loaded again. (A rolled input is loaded at its rolled column.)
template <class P> constexpr bool pairedHalves() {
  for (int k = 0; k < P::kInputs; ++k)
    if (P::inMove(k) == Move::SwapHalves)
      return true;
  return false;
}

// Output m is among the outputs of mask NEED (bits; outputs past the 32nd count as in any mask:
// a variant for fewer outputs then still computes them, and the call's flags decide).
template <unsigned NEED> FG_HD constexpr bool inNeed(int m) {
  return m >= 32 || ((NEED >> m) & 1u) != 0;
}

// The outputs of the op's full shape (not summed over the leading dims an input omits): the
// gradients of the [..., D] inputs, which a backward is nearly always asked for, where the
// tables' (RoPE's cos and sin) are asked for only when they require gradients, which
// precomputed tables do not. A call needing no other output runs a variant compiled for these
// alone (groupRun): the loads and arithmetic only the others need are gone at compile time, and
// with them their registers (RoPE's backward: 4 vectors per row and 1 row ahead, else 2 and 2).
template <class P> constexpr unsigned fullShapeOutputs() {
  unsigned mask = 0;
  for (int m = 0; m < P::kOutputs && m < 32; ++m)
    mask |= P::outKeep(m) == kAllDims ? 1u << m : 0u;
  return mask;
}

// Whether input k is read in a variant for the outputs of NEED: an output there reads it, or a
// moved input taken from its registers (P::inSource) is read.
template <class P, unsigned NEED> constexpr bool readFor(int k) {
  bool read = false;
  for (int m = 0; m < P::kOutputs; ++m)
    read = read || (inNeed<NEED>(m) && (m >= 32 || ((P::inReaders(k) >> m) & 1u) != 0));
  for (int j = 0; j < P::kInputs; ++j)
    read = read || (pairedHalves<P>() && P::inSource(j) == k && readFor<P, NEED>(j));
  return read;
}

// The vectors a thread loads per row: one per half (pairedHalves) of each element input read
// at its own row (a moved one with its source in registers takes none) that the variant reads.
template <class P, unsigned NEED> constexpr int vectorsPerRow() {
  int n = 0;
  for (int k = 0; k < P::kInputs; ++k)
    n += P::inBcast(k) == Bcast::Full && !mappedInput<P>(k) &&
         !(pairedHalves<P>() && P::inSource(k) >= 0) && readFor<P, NEED>(k);
  return n * (pairedHalves<P>() ? 2 : 1);
}

// Rows of a group a thread loads ahead per iteration: about 4 vectors in flight. (H100, bf16,
// RoPE of q and k at 8 x 4096 x {32, 8} x 128: the forwards' 2 vectors per row ran in 0.254 ms
// with 2 rows ahead and 0.277 with 1; the backwards' 4 in about 0.300 ms with 1 and 0.392
// with 2, forward+backward less forward. The backward's variant for x's gradient alone loads 2
// and runs 2 ahead: 264 us of kernel time for q and k, the forwards 245; torch.profiler.)
template <class P, unsigned NEED> constexpr int groupRowsAhead() {
  return vectorsPerRow<P, NEED>() <= 2 ? 2 : 1;
}

// NEED: the outputs this variant can write (groupRun); the call's flags choose among them.
template <class P, typename S, int V, unsigned NEED, class U>
__device__ __forceinline__ void groupBody(const typename P::Args& a, int64_t G, int64_t groups) {
  using T = compute_t<S>;
  constexpr int NI = atLeastOne<P::kInputs>(), NO = atLeastOne<P::kOutputs>();
  constexpr int H = pairedHalves<P>() ? 2 : 1; // vectors per thread and row: c, c + D/2
  constexpr int R = groupRowsAhead<P, NEED>();
  const PointwiseSetup<P, S, U> setup(a);
  // The inputs a needed output reads (P::inReaders). (Loops over inputs, outputs, lanes and
  // rows go through staticFor: their arrays then stay in registers.)
  const unsigned needed = neededOutputs<P>(a);
  bool load[NI];
  staticFor<P::kInputs>([&](auto k) {
    if constexpr (readFor<P, NEED>(k))
      load[k] = (P::inReaders(k) & needed) != 0;
    else
      load[k] = false;
  });
  // A moved input read from its source's registers: the source is loaded then.
  staticFor<P::kInputs>([&](auto k) {
    if constexpr (H == 2 && P::inSource(k) >= 0)
      load[P::inSource(k)] = load[P::inSource(k)] || load[k];
  });
  const int64_t vecs = a.D / (V * H); // per row, per thread
  const int64_t total = groups * vecs;
  int64_t shift[NI]; // rolled inputs: the call's shift, a multiple of V (groupsApply)
  staticFor<P::kInputs>([&](auto k) { shift[k] = rollShift<P>(a, k); });
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t g = t / vecs;
    int64_t c[H]; // the first column of each of the thread's vectors
    c[0] = (t - g * vecs) * V;
    if constexpr (H == 2)
      c[1] = c[0] + a.D / 2;
    const int64_t row0 = g * G;
    // The column vector h of input k starts at (SwapPairs exchanges lanes, below).
    auto column = [&](int k, int h) {
      return P::inMove(k) == Move::SwapHalves ? c[H - 1 - h]
             : P::inMove(k) == Move::Roll     ? movedColumn(Move::Roll, c[h], a.D, shift[k])
                                              : c[h];
    };
    // The inputs the group shares: mapped ones at their row, [D] ones.
    Vec<S, V> shared[NI][H];
    staticFor<P::kInputs>([&](auto k) {
      staticFor<H>([&](auto h) {
        if constexpr (P::inBcast(k) == Bcast::Full && mappedInput<P>(k)) {
          if (load[k])
            shared[k][h] = loadVec<S, V>(
                a.in[k], mappedRow<P::kNamedDims>(P::inDims(k), row0, a.dims) * a.D + column(k, h));
        } else if constexpr (P::inBcast(k) == Bcast::Col) {
          if (load[k])
            shared[k][h] = loadVec<S, V>(a.in[k], column(k, h));
        }
      });
    });
    for (int64_t h0 = 0; h0 < G; h0 += R) {
      Vec<S, V> x[R][NI][H];
      staticFor<R>([&](auto u) {
        staticFor<P::kInputs>([&](auto k) {
          if constexpr (P::inBcast(k) == Bcast::Full && !mappedInput<P>(k) &&
                        !(H == 2 && P::inSource(k) >= 0))
            staticFor<H>([&](auto h) {
              if (load[k] && h0 + u < G)
                x[u][k][h] = loadVec<S, V>(a.in[k], (row0 + h0 + u) * a.D + column(k, h));
            });
        });
      });
      staticFor<R>([&](auto u) {
        if (h0 + u >= G)
          return;
        const int64_t row = row0 + h0 + u;
        // Per-row values: from the [] inputs (the setup's), and the row's positions.
        T rv[atLeastOne<P::kRowValues>()];
#pragma unroll
        for (int i = 0; i < P::kRowValues; ++i)
          rv[i] = setup.rv[i];
        if constexpr (inputsOf<P>(Bcast::Position) > 0 && P::kRowValues > 0) {
          T rowIn[NI];
          staticFor<P::kInputs>([&](auto k) {
            if constexpr (P::inBcast(k) == Bcast::Position)
              rowIn[k] = static_cast<T>(positionOf<P::kNamedDims>(P::inDims(k), row, a.dims));
            else if constexpr (P::inBcast(k) == Bcast::Scalar)
              rowIn[k] = P::inElem(k) == Elem::Dtype ? toCompute(static_cast<const S*>(a.in[k])[0])
                                                     : loadTyped<T>(P::inElem(k), a.in[k], 0);
            else
              rowIn[k] = T(0);
          });
          P::template rowPre<T, isHalf<S>()>(rowIn, setup.attr, setup.D, rv);
        }
        staticFor<H>([&](auto h) {
          Vec<S, V> y[NO];
          T typed[atLeastOne<typedOutputs<P>()>()][V];
          staticFor<V>([&](auto l) {
            T in[NI], out[NO];
            staticFor<P::kInputs>([&](auto k) {
              // (SwapPairs: lane l reads lane l ^ 1 of its own vector)
              constexpr int lane = P::inMove(k) == Move::SwapPairs ? (l ^ 1) : l;
              if constexpr (P::inBcast(k) == Bcast::Full) {
                if constexpr (mappedInput<P>(k))
                  in[k] = toCompute(shared[k][h].v[lane]);
                else if constexpr (H == 2 && P::inSource(k) >= 0) // (its source's registers:
                  in[k] = toCompute(  // the other half, or its own with pairs exchanged)
                      x[u][P::inSource(k)][P::inMove(k) == Move::SwapHalves ? H - 1 - h : h]
                          .v[lane]);
                else
                  in[k] = toCompute(x[u][k][h].v[lane]);
              } else if constexpr (P::inBcast(k) == Bcast::Col) {
                in[k] = toCompute(shared[k][h].v[lane]);
              } else if constexpr (P::inBcast(k) == Bcast::TypedFull ||
                                   P::inBcast(k) == Bcast::TypedCol) {
                const int64_t col = movedColumn(P::inMove(k), c[h] + l, a.D, shift[k]);
                const int64_t inRow =
                    P::inBcast(k) == Bcast::TypedCol ? 0
                    : mappedInput<P>(k) ? mappedRow<P::kNamedDims>(P::inDims(k), row, a.dims)
                                        : row;
                in[k] = load[k] ? loadTyped<T>(P::inElem(k), a.in[k], inRow * a.D + col) : T(0);
              } else {
                in[k] = T(0); // (positions and [] inputs: read per row, by rowPre)
              }
            });
            P::template elem<T, isHalf<S>(), U>(in, rv, setup.attr, setup.D,
                                                columnIndex<T>(c[h], l), out);
            staticFor<P::kOutputs>([&](auto m) {
              if constexpr (P::outElem(m) == Elem::Dtype)
                y[m].v[l] = fromCompute<S>(out[m]);
              else
                typed[typedSlot<P>(m)][l] = out[m];
            });
          });
          staticFor<P::kOutputs>([&](auto m) {
            if (inNeed<NEED>(m) && a.need[m]) {
              if constexpr (P::outElem(m) == Elem::Dtype)
                storeVec<S, V>(a.out[m], row * a.D + c[h], y[m]);
              else
                storeTypedVec(P::outElem(m), a.out[m], row * a.D + c[h], typed[typedSlot<P>(m)]);
            }
          });
        });
      });
    }
  }
}

template <class P, typename S, int V, unsigned NEED>
__global__ void __launch_bounds__(kThreads, kGroupBlocksPerSm)
    groupProgram(const typename P::Args a, int64_t G, int64_t groups) {
  withUniforms<P, compute_t<S>>(
      a.attr, a.D, [&](auto u) { groupBody<P, S, V, NEED, decltype(u)>(a, G, groups); });
}

// Whether this call can run the groups plan: vectors of the dtype's width over every row (and
// over the exchanged halves), every tensor aligned to them.
template <class P, typename S> bool groupsApply(const typename P::Args& a) {
  constexpr int V = vecWidth<S>();
  bool ok = a.D % V == 0 && a.rows * a.D > 0;
#pragma unroll
  for (int k = 0; k < P::kInputs; ++k) {
    if (P::inBcast(k) == Bcast::Full || P::inBcast(k) == Bcast::Col)
      ok = ok && aligned16(a.in[k]);
    if (P::inMove(k) == Move::SwapHalves)
      ok = ok && (a.D / 2) % V == 0;
  }
  ok = ok && rollsAlign<P>(a, V); // (rolled inputs: whole vectors at the rolled columns)
  for (int m = 0; m < P::kOutputs; ++m)
    if (a.need[m])
      ok = ok && outputAligned<P, S>(m, a.out[m], V);
  return ok;
}

template <class P, typename S> void groupRun(const typename P::Args& a, cudaStream_t stream) {
  static_assert(colM2Outputs<P>() == 0, "the planner gives ColM2 outputs the colwise plan");
  constexpr int V = vecWidth<S>();
  const int64_t G = groupRows<P>(a);
  const int64_t groups = a.rows / G;
  const DeviceInfo device = deviceInfo();
  // Enough blocks to fill every SM a few times over; each thread strides over the rest.
  const int64_t work = groups * (a.D / (V * (pairedHalves<P>() ? 2 : 1)));
  int64_t blocks = (work + kThreads - 1) / kThreads;
  const int64_t most = static_cast<int64_t>(device.sms) * (device.threadsPerSm / kThreads) * 8;
  if (blocks > most)
    blocks = most;
  const unsigned grid = static_cast<unsigned>(blocks < 1 ? 1 : blocks);
  constexpr unsigned kFull = fullShapeOutputs<P>();
  constexpr bool kOthers = P::kOutputs >= 32 || kFull != (1u << P::kOutputs) - 1u;
  if constexpr (kOthers)
    if ((neededOutputs<P>(a) & ~kFull) == 0) {
      groupProgram<P, S, V, kFull><<<grid, kThreads, 0, stream>>>(a, G, groups);
      check(cudaGetLastError(), "groups launch");
      return;
    }
  groupProgram<P, S, V, ~0u><<<grid, kThreads, 0, stream>>>(a, G, groups);
  check(cudaGetLastError(), "groups launch");
}

} // namespace fg::cuda
