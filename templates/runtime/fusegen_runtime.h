// fusegen runtime: what every generated op shares on host and device. Copied verbatim into
// generated/runtime/ (with the @generated stamp) so a generated package is self-contained.
//  - FG_HD and the math builtins that primitive `eval` formulas call (fg::exp, fg::tanh...)
//  - storage <-> compute type conversion (fp32 math for half types, fp64 for double)
//  - the plans, the kinds of outputs and the argument block passed from the torch glue to
//    the CPU and CUDA plans
// No torch and no CUDA runtime API here: it is included by .cu files compiled without torch.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define FG_HD __host__ __device__ __forceinline__
#else
#define FG_HD inline
#endif

namespace fg {

enum class DType : int { Float32 = 0, Float16 = 1, BFloat16 = 2, Float64 = 3 };

// How an input broadcasts against the [rows, D] view (spec shape classes). Stat: a per-row
// statistic the backward reads from its forward, broadcast like Row
// but stored in the compute type (float for half types), not the dtype: the backward compares
// and computes with it as the forward computed it (a max is equal to its maximal elements).
// Random: no tensor; one uniform random number per element, drawn by the plan (fg::uniforms),
// the input's slot among the Random ones being its stream. Unread: an argument the program
// does not read (a backward's input that its gradients do not depend on): no loads, and the
// autograd node passes a placeholder of its shape (fusegen_autograd.cpp). TypedFull, TypedCol:
// an integer or bool input of shape [..., D] or [D] (P::inElem(k)), read in its own type, not
// through the dtype's 128-bit vectors: by the row plan V elements at a time (loadTypedVec; kept
// with the row cache where the row fits with them), by the other plans element by element.
// Position: no tensor; pos(S), the row's index along the named dim its P::inDims(k) has,
// computed by the plan per row (positionOf) and read like a Row input.
// Inputs that omit some of the op's named leading dims (P::inDims(k) != kAllDims: a [S, D]
// table against [..., S, H, D]) keep their Bcast (Full, Row, TypedFull) and are read at their
// own row of each of the op's rows (mappedRow), by the row plan and the CPU.
enum class Bcast : int {
  Full = 0,
  Col = 1,
  Row = 2,
  Scalar = 3,
  Stat = 4,
  Random = 5,
  Unread = 6,
  TypedFull = 7,
  TypedCol = 8,
  Position = 9
};

// The columns an input is read at (P::inMove(k); prims::Move in fusegen, from primitives.yaml's
// `move` entries): its own, or a permutation of its row's:
//   SwapHalves  column j reads (j + D/2) mod D (rope's rotate_half moves; D even)
//   SwapPairs   column j reads j xor 1 (GPT-J's interleaved pairs; D even)
//   Roll        column j reads (j - s) mod D, s the shift of the input's roll in the call
//               (torch.roll(x, s, -1)), reduced to [0, D) (fusegen_program.h withRolls)
enum class Move : int { None = 0, SwapHalves = 1, SwapPairs = 2, Roll = 3 };

// (I: an integer index, or the compute type holding one: a moved j in a formula, exact. s: a
// roll's shift in [0, D).)
template <typename I> FG_HD I movedColumn(Move m, I j, I D, I s = I(0)) {
  if (m == Move::SwapHalves)
    return j < D / 2 ? j + D / 2 : j - D / 2;
  if (m == Move::SwapPairs)
    return static_cast<I>(static_cast<int64_t>(j) ^ 1);
  if (m == Move::Roll)
    return j >= s ? j - s : j - s + D;
  return j;
}

// ---- named leading dims (spec `x: [..., S, H, D]`): the op's rows are the batch, then the
// named dims, flattened; an input has a mask of them (bit i: named dim i, outermost first; bit
// n: the batch) and its rows are its dims' flattened.
constexpr int kMaxNamedDims = 6;
constexpr unsigned kAllDims = ~0u; // an input with every dim: its row is the op's

// Division of 32-bit numbers by a divisor fixed for a call, as a multiplication and a shift
// (Granlund and Montgomery, "Division by invariant integers using multiplication", PLDI 1994):
// with s = ceil(log2 d) and m = floor(2^32 (2^s - d) / d) + 1, n / d = (mulhi(n, m) + n) >> s
// for every n < 2^32. A 64-bit division is a loop of about 70 instructions on the GPU; rows of
// 128 columns (rope's) spent more on the divisions by the named dims' sizes than on the row.
struct FastDiv {
  uint32_t d = 1, m = 1, s = 0;

  static FastDiv of(int64_t divisor) { // (host; divisor in [1, 2^32))
    FastDiv f;
    f.d = static_cast<uint32_t>(divisor < 1 ? 1 : divisor);
    while ((uint64_t(1) << f.s) < f.d)
      ++f.s;
    f.m = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << f.s) - f.d)) / f.d + 1);
    return f;
  }
  FG_HD uint32_t quotient(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(n, m);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * m) >> 32);
#endif
    return static_cast<uint32_t>((static_cast<uint64_t>(hi) + n) >> s);
  }
};

// The op's named leading dims in a call: their sizes, outermost first, with their divisions
// for rows below 2^32 (rows32; 64-bit divisions beyond).
struct NamedDims {
  int64_t size[kMaxNamedDims];
  FastDiv div[kMaxNamedDims];
  int64_t batch;   // the rows over the named dims' product: the size of the batch dim
  FastDiv batchDiv; // ... and its division (rows32)
  bool rows32;
};

// The row of an input with dims `has` at the op's row `row`.
template <int N> FG_HD int64_t mappedRow(unsigned has, int64_t row, const NamedDims& dims) {
  if (dims.rows32) {
    uint32_t r = static_cast<uint32_t>(row), out = 0, stride = 1;
    for (int i = N - 1; i >= 0; --i) {
      const uint32_t q = dims.div[i].quotient(r);
      if ((has >> i) & 1u) {
        out += (r - q * dims.div[i].d) * stride;
        stride *= dims.div[i].d;
      }
      r = q;
    }
    return (has >> N) & 1u ? static_cast<int64_t>(out) + static_cast<int64_t>(r) * stride : out;
  }
  int64_t out = 0, stride = 1;
  for (int i = N - 1; i >= 0; --i) {
    const int64_t index = row % dims.size[i];
    row /= dims.size[i];
    if ((has >> i) & 1u) {
      out += index * stride;
      stride *= dims.size[i];
    }
  }
  return (has >> N) & 1u ? out + row * stride : out;
}

// pos(S) at the op's row `row`: the index along the named dim that `has` has.
template <int N> FG_HD int64_t positionOf(unsigned has, int64_t row, const NamedDims& dims) {
  if (dims.rows32) {
    uint32_t r = static_cast<uint32_t>(row);
    for (int i = N - 1; i >= 0; --i) {
      const uint32_t q = dims.div[i].quotient(r);
      if ((has >> i) & 1u)
        return r - q * dims.div[i].d;
      r = q;
    }
    return 0;
  }
  for (int i = N - 1; i >= 0; --i) {
    if ((has >> i) & 1u)
      return row % dims.size[i];
    row /= dims.size[i];
  }
  return 0;
}

// The op's row at place `index` of an order of the rows in which those that agree on the dims
// `keep` (mappedRow's bits) come together: the dims of `keep` outermost, the others innermost,
// each group in the op's order. The row plan runs rows in it where an input has only some of the
// op's dims (scaled_masked_softmax's [S, D] mask against [..., S, D] scores): the rows a block
// and its neighbours run at a time then read the same rows of that input, from L1, where in
// the op's order each read one of its own from L2 (fusegen_row_cuda.cuh RowKernel::run).
template <int N> FG_HD int64_t orderedRow(unsigned keep, int64_t index, const NamedDims& dims) {
  int64_t coord[kMaxNamedDims + 1] = {};
  if (dims.rows32) {
    uint32_t r = static_cast<uint32_t>(index);
    auto split = [&](int i, const FastDiv& div) {
      const uint32_t q = div.quotient(r);
      coord[i] = r - q * div.d;
      r = q;
    };
    for (int i = N - 1; i >= 0; --i) // the other dims, innermost first
      if (!((keep >> i) & 1u))
        split(i, dims.div[i]);
    if (!((keep >> N) & 1u))
      split(N, dims.batchDiv);
    for (int i = N - 1; i >= 0; --i) // then those of `keep`; the batch takes the rest
      if ((keep >> i) & 1u)
        split(i, dims.div[i]);
    if ((keep >> N) & 1u)
      coord[N] = r;
  } else {
    int64_t r = index;
    auto split = [&](int i, int64_t size) {
      coord[i] = r % size;
      r /= size;
    };
    for (int i = N - 1; i >= 0; --i)
      if (!((keep >> i) & 1u))
        split(i, dims.size[i]);
    if (!((keep >> N) & 1u))
      split(N, dims.batch);
    for (int i = N - 1; i >= 0; --i)
      if ((keep >> i) & 1u)
        split(i, dims.size[i]);
    if ((keep >> N) & 1u)
      coord[N] = r;
  }
  int64_t row = coord[N];
  for (int i = 0; i < N; ++i)
    row = row * dims.size[i] + coord[i];
  return row;
}

// What an input's elements are stored as (P::inElem(k)): the call's dtype, or an integer or
// bool type the spec declares. Integer and bool inputs reach the program in the compute type:
// exact for integers up to 2^24 in float32, which covers class indices (the glue checks that
// a program reading the column index j has D <= 2^24, so j == target compares exactly).
// An output's (P::outElem(m)): the call's dtype, or a type of its own: float32, FP8
// (float8_e4m3fn, float8_e5m2) converted with saturation, an out-of-range value becoming the
// largest finite one of its sign and NaN staying NaN; an integer type (int8, uint8, int32,
// int64: toInteger) or bool (value != 0) (the plans' storeTyped, per backend).
// Compute: the compute type (float for half types), in which a forward saves the whole-tensor
// values (sum_all, ...) its backward reads back as [] inputs.
enum class Elem : int {
  Dtype = 0,
  Int64 = 1,
  Int32 = 2,
  Bool = 3,
  Float32 = 4,
  Float8E4M3 = 5,
  Float8E5M2 = 6,
  Compute = 7,
  Int8 = 8,
  UInt8 = 9
};

// Element i of an integer or bool input, in the compute type T.
template <typename T> FG_HD T loadTyped(Elem e, const void* p, int64_t i) {
  switch (e) {
  case Elem::Int64:
    return static_cast<T>(static_cast<const int64_t*>(p)[i]);
  case Elem::Int32:
    return static_cast<T>(static_cast<const int32_t*>(p)[i]);
  case Elem::Int8:
    return static_cast<T>(static_cast<const int8_t*>(p)[i]);
  case Elem::UInt8:
    return static_cast<T>(static_cast<const uint8_t*>(p)[i]);
  case Elem::Compute:
    return static_cast<const T*>(p)[i];
  default:
    return static_cast<const bool*>(p)[i] ? T(1) : T(0);
  }
}

// Bytes per element of an integer or bool input, or of an output of its own type; T: the
// compute type (Elem::Compute's).
template <typename T> FG_HD constexpr int elemBytes(Elem e) {
  return e == Elem::Compute ? static_cast<int>(sizeof(T))
         : e == Elem::Int64 ? 8
         : e == Elem::Int32 || e == Elem::Float32 ? 4
                                                 : 1;
}

// The largest finite value of an FP8 output type: what saturation clamps to.
FG_HD constexpr double fp8Max(Elem e) {
  return e == Elem::Float8E4M3 ? 448.0 : 57344.0;
}

// Elements i ... i + N - 1 of an integer or bool input, in the compute type T, as one load of
// N x elemBytes(e) bytes: the caller has checked that p + i is aligned to that many bytes.
template <typename E, int N> struct alignas(sizeof(E) * N) ElemPack {
  E v[N];
};
template <typename T, typename E, int N> FG_HD void loadPack(const void* p, int64_t i, T (&out)[N]) {
  const ElemPack<E, N> x = reinterpret_cast<const ElemPack<E, N>*>(static_cast<const E*>(p) + i)[0];
  for (int l = 0; l < N; ++l)
    out[l] = static_cast<T>(x.v[l]);
}
template <typename T, int N> FG_HD void loadTypedVec(Elem e, const void* p, int64_t i, T (&out)[N]) {
  switch (e) {
  case Elem::Int64:
    return loadPack<T, int64_t, N>(p, i, out);
  case Elem::Int32:
    return loadPack<T, int32_t, N>(p, i, out);
  case Elem::Int8:
    return loadPack<T, int8_t, N>(p, i, out);
  case Elem::UInt8:
    return loadPack<T, uint8_t, N>(p, i, out);
  case Elem::Compute: // a statistic or an earlier program's [D] result (difffuzz found them read
    return loadPack<T, T, N>(p, i, out); // as bools by the row plan on CUDA)
  default:
    return loadPack<T, bool, N>(p, i, out);
  }
}

template <int N> constexpr int atLeastOne() { return N > 0 ? N : 1; }

// A constant table the generated programs carry (input broadcasts, output kinds, reductions
// per pass): Table<T, V0, V1, ...>::at(i) is Vi (T{} past the end). The value is picked by
// comparisons, not read from an array: device code that indexes it with a run-time index (a
// loop nvcc does not unroll) gets selects in registers, where a constexpr array would be
// copied to the stack (24-32 more bytes of stack frame per row kernel of polynorm, and its
// backward 14% slower at 32768x256).
template <class T, T... V> struct Table {
  FG_HD static constexpr T at(int i) {
    T out{};
    int k = 0;
    ((out = k++ == i ? V : out), ...);
    return out;
  }
};

// staticFor<N>(f) calls f(std::integral_constant<int, 0>{}) ... f(...<int, N - 1>{}). The
// index is a compile-time constant, so per-thread arrays indexed through it (or through a
// constexpr function of it) stay in registers; with `#pragma unroll` alone nvcc sometimes
// computes such an index at run time and moves the array to local memory.
template <class F, int... I> FG_HD void staticForEach(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F> FG_HD void staticFor(F&& f) {
  staticForEach(f, std::make_integer_sequence<int, N>{});
}

// The runtime plan that runs a program (fusegen_program.h), chosen by fusegen's planner from
// the program's traits and carried by the generated code as P::kPlan:
//   Flat    no passes over rows, no per-row tensors, no sums: 128-bit vectors over all
//           elements (fusegen_cuda.cuh)
//   Colwise the same with [D] inputs (kept in registers) or [D] and [] sums of element values:
//           each thread owns columns and walks rows (fusegen_cuda.cuh)
//   Row     reductions over each row, per-row inputs or outputs: the row kept on chip
//           (fusegen_row_cuda.cuh)
//   Groups  no reductions, element outputs, inputs that omit the innermost named dims: the
//           rows that read the same rows of those run in one thread (fusegen_group_cuda.cuh;
//           a call it cannot vectorize runs the row plan)
// The CPU runs every program with one loop over rows (fusegen_cpu.h).
enum class Plan : int { Flat = 0, Colwise = 1, Row = 2, Groups = 3 };

// How a program writes output m (P::outKind(m)):
//   Full   one value per element
//   Row    one value per row
//   Stat   one value per row in the compute type: a statistic saved for the backward, which
//          reads it as an input of Bcast::Stat
//   ColSum the sum over rows of an element value (a [D] gradient), accumulated in the
//          compute type per fixed chunk of rows and added in a fixed order
//   Total  the combination (P::outReduce(m): sum, max or min) over rows and columns of an
//          element value, or over rows of a per-row value (P::totalPerRow(m)): a [] gradient,
//          or a whole-tensor value (sum_all, max_all, min_all); accumulated per fixed chunk of
//          rows (CPU) or per block (CUDA), then the partials combined in a fixed order
//   Scalar a [] output computed once after every row, from the Total outputs' values
//          (P::finish)
//   Passed a result of a program run before this one (a [D] batch statistic): the glue
//          returns it, the program does not write it
//   ColM2  the sum over rows of the squared deviations of an element value from its column
//          mean, in one pass (a variance's numerator: fusegen's plan/ColumnPasses.h): a running
//          mean and sum per thread (Welford's update), merged across threads and chunks with
//          Chan et al.'s formula in a fixed order; colwise plan and CPU only
enum class OutKind : int {
  Full = 0,
  Row = 1,
  ColSum = 2,
  Total = 3,
  Stat = 4,
  Scalar = 5,
  Passed = 6,
  ColM2 = 7
};

// (n, mean, m2) += (nb, meanb, m2b): two sets of values' counts, means and sums of squared
// deviations from their mean, merged (Chan, Golub and LeVeque, "Updating formulae and a pairwise
// algorithm for computing sample variances", 1979). An empty set (nb = 0) changes nothing.
template <typename T> FG_HD void chanMerge(T& n, T& mean, T& m2, T nb, T meanb, T m2b) {
  if (nb == T(0))
    return;
  const T total = n + nb;
  const T delta = meanb - mean;
  mean += delta * (nb / total);
  m2 += m2b + delta * delta * (n * (nb / total));
  n = total;
}

// ---- random numbers: Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1,
// 2, 3", SC 2011), counter-based, so a value depends on (seed, offset, stream, element) alone
// and not on the launch geometry: the backward, any plan and the CPU redraw the same numbers.
// The layout is curand's and ATen's: key = seed; counter = (offset / 4 + stream, element / 4)
// as two 64-bit halves, so a call that reserves 4 x streams of the generator's offset never
// meets the numbers of another call (ATen's kernels use counters (offset / 4 + i, thread)).
// Element e takes word e % 4 of the block of e / 4, as u = (word >> 8) 2^-24 in [0, 1): 24
// random bits, exact in float32. the package's _support.uniform is the same in PyTorch.

// Where a call's seed and offset are (fusegen_torch.h fills it): as values, or in device or
// host memory (a backward reads its forward's; a CUDA graph replays the generator's), plus
// `offset`. `save`, if set, receives (seed, offset) as two int64: the forward's for its
// backward. seedPtr null: no random numbers.
struct RngArgs {
  uint64_t seed, offset;
  const int64_t* seedPtr;
  const int64_t* offsetPtr;
  int64_t* save;
};

struct RngKey {
  uint32_t k0, k1;  // the seed
  uint64_t counter; // offset / 4: the first counter's high half
};

FG_HD uint64_t rngSeed(const RngArgs& r) {
  return r.seedPtr ? static_cast<uint64_t>(*r.seedPtr) : r.seed;
}
FG_HD uint64_t rngOffset(const RngArgs& r) {
  return (r.offsetPtr ? static_cast<uint64_t>(*r.offsetPtr) : 0) + r.offset;
}

FG_HD RngKey rngKey(const RngArgs& r) {
  const uint64_t seed = rngSeed(r);
  return RngKey{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), rngOffset(r) / 4};
}

// The forward's (seed, offset) for its backward: written once per call.
FG_HD void saveRng(const RngArgs& r) {
  if (!r.save)
    return;
  r.save[0] = static_cast<int64_t>(rngSeed(r));
  r.save[1] = static_cast<int64_t>(rngOffset(r));
}

FG_HD void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
#ifdef __CUDA_ARCH__
  hi = __umulhi(a, b);
  lo = a * b;
#else
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
#endif
}

// The four words of block `block` of stream `stream`.
FG_HD void philox(const RngKey& key, int stream, uint64_t block, uint32_t (&w)[4]) {
  const uint64_t c = key.counter + static_cast<uint64_t>(stream);
  uint32_t c0 = static_cast<uint32_t>(c), c1 = static_cast<uint32_t>(c >> 32);
  uint32_t c2 = static_cast<uint32_t>(block), c3 = static_cast<uint32_t>(block >> 32);
  uint32_t k0 = key.k0, k1 = key.k1;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c0, hi0, lo0);
    mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  w[0] = c0;
  w[1] = c1;
  w[2] = c2;
  w[3] = c3;
}

template <typename T> FG_HD T uniformOf(uint32_t word) {
  return static_cast<T>(word >> 8) * static_cast<T>(5.9604644775390625e-08); // 2^-24
}

// The numbers of stream `stream` at elements e0 ... e0 + N - 1 (row-major over [rows, D]):
// one Philox block per 4 of them where e0 is a multiple of 4, else one per element.
template <typename T, int N> FG_HD void uniforms(const RngKey& key, int stream, int64_t e0,
                                                 T (&u)[N]) {
  uint32_t w[4];
  if (N % 4 == 0 && e0 % 4 == 0) {
    for (int g = 0; g < N / 4; ++g) {
      philox(key, stream, static_cast<uint64_t>(e0 / 4 + g), w);
      for (int l = 0; l < 4; ++l)
        u[4 * g + l] = uniformOf<T>(w[l]);
    }
  } else {
    for (int l = 0; l < N; ++l) {
      const uint64_t e = static_cast<uint64_t>(e0 + l);
      philox(key, stream, e / 4, w);
      u[l] = uniformOf<T>(w[e % 4]);
    }
  }
}

// One call of a program: its tensors as contiguous [rows, D] views (fusegen_run.h).
template <int NI, int NO, int NA> struct Args {
  static constexpr int kInputs = NI, kOutputs = NO, kAttrs = NA;
  DType dtype;
  const void* in[NI];
  void* out[NO];
  bool need[atLeastOne<NO>()]; // outputs not needed are not written (null)
  double attr[atLeastOne<NA>()];
  int64_t rows; // product of the leading dims
  int64_t D;    // the last dim (1 for a 0-dim tensor)
  NamedDims dims; // the op's named leading dims (P::kNamedDims)
  void* workspace; // CUDA: partial sums of ColSum and Total outputs
  RngArgs rng;     // programs with Random inputs: the seed and offset
};

// ---- math builtins (templates/primitives.yaml `eval` formulas call these) ----
// Fast is true where the storage type is a half type (float16, bfloat16): there the GPU's
// approximate instructions (tanh.approx, ex2.approx, lg2.approx: relative error below
// 2^-10, under the storage's rounding) replace the exact ones. float32 and float64 compute
// with the exact functions.
// clang-format off
// Fast exp is 2^(x log2 e) by the special function unit with denormal results flushed to 0
// (ex2.approx.ftz: one instruction; __expf's ex2.approx keeps denormals at the cost of a
// range test and two multiplications around it, per element of a softmax's sum).
template <bool Fast = false> FG_HD float exp(float x) {
#ifdef __CUDA_ARCH__
  if (Fast) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
    return y;
  }
#endif
  return ::expf(x);
}
template <bool Fast = false> FG_HD float log(float x) {
#ifdef __CUDA_ARCH__
  if (Fast) return __logf(x);
#endif
  return ::logf(x);
}
template <bool Fast = false> FG_HD float tanh(float x) {
#ifdef __CUDA_ARCH__
  if (Fast) {
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  }
#endif
  return ::tanhf(x);
}
// Division: fg::div, not "/", so that half-type storage gets the approximate division (2 ulp;
// a finite a over 2^126 < |b| < 2^128 gives 0) instead of IEEE division's refinement and
// slow path, several times the instructions per element.
template <bool Fast = false> FG_HD float div(float a, float b) {
#ifdef __CUDA_ARCH__
  if (Fast) return __fdividef(a, b);
#endif
  return a / b;
}
template <bool Fast = false> FG_HD double div(double a, double b) { return a / b; }
template <bool Fast = false> FG_HD double exp(double x) { return ::exp(x); }
template <bool Fast = false> FG_HD double log(double x) { return ::log(x); }
template <bool Fast = false> FG_HD double tanh(double x) { return ::tanh(x); }
template <bool Fast = false> FG_HD float expm1(float x) { return ::expm1f(x); }
template <bool Fast = false> FG_HD double expm1(double x) { return ::expm1(x); }
template <bool Fast = false> FG_HD float log1p(float x) { return ::log1pf(x); }
template <bool Fast = false> FG_HD double log1p(double x) { return ::log1p(x); }
template <bool Fast = false> FG_HD float erf(float x) { return ::erff(x); }
template <bool Fast = false> FG_HD double erf(double x) { return ::erf(x); }
template <bool Fast = false> FG_HD float sqrt(float x) { return ::sqrtf(x); }
template <bool Fast = false> FG_HD double sqrt(double x) { return ::sqrt(x); }
template <bool Fast = false> FG_HD float abs(float x) { return ::fabsf(x); }
template <bool Fast = false> FG_HD double abs(double x) { return ::fabs(x); }
template <bool Fast = false> FG_HD float pow(float x, float y) { return ::powf(x, y); }
template <bool Fast = false> FG_HD double pow(double x, double y) { return ::pow(x, y); }
// sin and cos exact in every type (the fast __sinf is accurate only near 0; RoPE's angles
// reach the positions); round is rint: halves to even in the default rounding mode.
template <bool Fast = false> FG_HD float sin(float x) { return ::sinf(x); }
template <bool Fast = false> FG_HD double sin(double x) { return ::sin(x); }
template <bool Fast = false> FG_HD float cos(float x) { return ::cosf(x); }
template <bool Fast = false> FG_HD double cos(double x) { return ::cos(x); }
template <bool Fast = false> FG_HD float floor(float x) { return ::floorf(x); }
template <bool Fast = false> FG_HD double floor(double x) { return ::floor(x); }
template <bool Fast = false> FG_HD float ceil(float x) { return ::ceilf(x); }
template <bool Fast = false> FG_HD double ceil(double x) { return ::ceil(x); }
template <bool Fast = false> FG_HD float round(float x) { return ::rintf(x); }
template <bool Fast = false> FG_HD double round(double x) { return ::rint(x); }
template <bool Fast = false> FG_HD float trunc(float x) { return ::truncf(x); }
template <bool Fast = false> FG_HD double trunc(double x) { return ::trunc(x); }
#ifdef __CUDA_ARCH__
template <bool Fast = false> FG_HD float rsqrt(float x) { return ::rsqrtf(x); }
template <bool Fast = false> FG_HD double rsqrt(double x) { return ::rsqrt(x); }
#else
template <bool Fast = false> FG_HD float rsqrt(float x) { return 1.0f / ::sqrtf(x); }
template <bool Fast = false> FG_HD double rsqrt(double x) { return 1.0 / ::sqrt(x); }
#endif
// clang-format on

// An output of an integer type I from the compute type: rounded to the nearest integer (halves
// to even, as torch.round), saturated to I's range, NaN as 0 (PTX's cvt.rni.sat to an integer,
// spelled portably). An int8 quantizer writes {value: x / scale, dtype: int8}.
// IntRange<I>: lo, I's least value, and top, the first value past its largest (max), both
// powers of 2 or 0, so exact in the compute type.
template <typename I> struct IntRange;
template <> struct IntRange<int8_t> {
  static constexpr double lo = -128.0, top = 128.0;
  static constexpr int8_t max = 127;
};
template <> struct IntRange<uint8_t> {
  static constexpr double lo = 0.0, top = 256.0;
  static constexpr uint8_t max = 255;
};
template <> struct IntRange<int32_t> {
  static constexpr double lo = -2147483648.0, top = 2147483648.0;
  static constexpr int32_t max = 2147483647;
};
template <> struct IntRange<int64_t> {
  static constexpr double lo = -9223372036854775808.0, top = 9223372036854775808.0;
  static constexpr int64_t max = 9223372036854775807;
};
template <typename I, typename T> FG_HD I toInteger(T x) {
  const T r = fg::round(x);
  if (!(r == r)) return I(0);
  if (r >= static_cast<T>(IntRange<I>::top)) return IntRange<I>::max;
  if (r <= static_cast<T>(IntRange<I>::lo)) return static_cast<I>(IntRange<I>::lo);
  return static_cast<I>(r);
}

// Element i of an output of an integer or bool type e (toInteger; bool: x != 0) from the
// compute type, the same in every backend; false where e is neither (the backend stores it).
template <typename T> FG_HD bool storeInteger(Elem e, void* p, int64_t i, T x) {
  switch (e) {
  case Elem::Int8:
    static_cast<int8_t*>(p)[i] = toInteger<int8_t>(x);
    return true;
  case Elem::UInt8:
    static_cast<uint8_t*>(p)[i] = toInteger<uint8_t>(x);
    return true;
  case Elem::Int32:
    static_cast<int32_t*>(p)[i] = toInteger<int32_t>(x);
    return true;
  case Elem::Int64:
    static_cast<int64_t*>(p)[i] = toInteger<int64_t>(x);
    return true;
  case Elem::Bool:
    static_cast<bool*>(p)[i] = x != T(0);
    return true;
  default:
    return false;
  }
}

// ---- compute types ----
template <typename S> struct Compute { using type = float; };
template <> struct Compute<double> { using type = double; };
template <typename S> using compute_t = typename Compute<S>::type;
// Whether S is a half type (fast math allowed, see the builtins above).
template <typename S> constexpr bool isHalf() { return sizeof(S) == 2; }

FG_HD float toCompute(float x) { return x; }
FG_HD double toCompute(double x) { return x; }
template <typename S> FG_HD S fromCompute(compute_t<S> x) { return static_cast<S>(x); }

#ifdef __CUDACC__
FG_HD float toCompute(__half x) { return __half2float(x); }
FG_HD float toCompute(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> FG_HD __half fromCompute<__half>(float x) { return __float2half_rn(x); }
template <> FG_HD __nv_bfloat16 fromCompute<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
#endif

} // namespace fg
