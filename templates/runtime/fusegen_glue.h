// fusegen glue interface: what each generated op's registration file (<op>_ops.cpp) hands the
// shared glue (fusegen_glue.cpp, compiled once per toolchain and cached): the schemas of the op
// and of its backward, and for each of the two plans the tensor arguments' names and shapes,
// the results' kinds and the CPU and CUDA entry points behind one type-erased signature. The
// shared glue (fusegen_glue.cpp over ATen, or fusegen_glue_stable.cpp over the LibTorch stable
// ABI) unboxes the dispatcher's arguments, checks and prepares the tensors (fusegen_run.h),
// allocates the results and registers the CPU, CUDA and (ATen) Autograd kernels.
// No torch header is included here: a registration file compiles in a fraction of a second,
// where <torch/library.h> and ATen's operator headers cost about 6 s of CPU per op.
#pragma once

#include "fusegen_program.h"
#include "fusegen_runtime.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace fg::glue {

// One call of a plan, as the shared glue prepared it; argsOf() copies it into the op's Args.
struct Call {
  DType dtype;
  const void* const* tensors; // contiguous data, in the order of PlanInfo::tensors
  void* const* results;       // null where not needed
  const bool* need;           // per result
  const double* attrs;        // the spec's attrs (ints and bools as doubles)
  int64_t rows;
  int64_t D;
  const int64_t* dims; // the sizes of the op's named leading dims
  void* workspace;     // CUDA: set by the glue after asking cudaWorkspace
  RngArgs rng;         // an op that draws random numbers: where its seed and offset are
};

using CpuEntry = void (*)(const Call&);
using CudaWorkspaceEntry = size_t (*)(const Call&);
using CudaEntry = void (*)(const Call&, void* stream);

struct TensorInfo {
  const char* name; // in messages
  Bcast bcast;      // Random: no tensor, the plan draws its elements (position -1)
  int position;     // among the schema's tensor arguments
  Elem elem;        // the dtype of the call, or a fixed integer or bool type
  bool read;        // the program reads its elements (else only its shape is checked)
  // The op's leading dims it has (kAllDims: all): an input that omits some is checked and read
  // against its own (fusegen_runtime.h mappedRow); Position: the dim whose index it is.
  unsigned dims;
  int chunks; // a packed argument [..., chunks * D] (1: its last dim is D)
};

// One program of an op (struct Forward or Backward of <op>.h), described to the glue.
struct PlanInfo {
  const char* op;    // "<ns>::<op>" or "<ns>::<op>_backward", in messages
  Plan plan;         // the runtime plan that runs it (P::kPlan)
  bool column;       // it reads the column index j (P::kColumn): D must be exact in float32
  const char* evenD; // what it moves that needs an even D (P::kEvenD; "": nothing)
  const TensorInfo* tensors;
  int nTensors;
  int full;                    // the full input that defines D and the output shape
  int dtype;                   // the float input whose dtype is the call's (often `full`)
  int namedDims;               // the op's named leading dims: the last of the full input's
  const char* const* dimNames; // ... their names, outermost first
  // Per program output: its shape (allocated by the glue, those not needed empty), element type
  // (Dtype: the call's), the result whose tensor it writes into (-1: its own; a chunk of a
  // packed gradient writes into chunk 0's) and that tensor's chunks.
  const OutKind* kinds;
  const Elem* elems;
  const int* results;
  const int* chunks;
  int nOutputs;
  // Per result: the leading dims kept (kAllDims: all); the kernel writes the others too and the
  // glue sums them away (the gradient of an input broadcast over them).
  const unsigned* keeps;
  int nResults;        // the tensors returned: the outputs of their own, first
  const DType* dtypes; // those the op supports
  int nDtypes;
  CpuEntry cpu;
  CudaWorkspaceEntry cudaWorkspace; // null: no workspace
  CudaEntry cuda;                   // null: built without CUDA
  // Random streams the program draws (fusegen_runtime.h, Philox). The forward (rngTensor -1)
  // takes a seed and offset from the generator and returns them as its last result (int64
  // [2]); the backward reads them from its tensor argument at position rngTensor.
  int randomStreams;
  int rngTensor;
  // A column program (fusegen's plan/ColumnPasses.h: P::kColumns): run over one row of D, its
  // Full outputs [D].
  bool columns;
  // The number of rows goes to the program in the attr slot after the spec's (P::kRowsAttr).
  bool rowsAttr;
  // Attr slots after those that the program fills with the shifts of its rolls (P::kRolls;
  // fusegen_program.h withRolls): the glue passes them as 0.
  int rollAttrs;
  // The programs run before this one, in order (reductions over the rows and the [D] values
  // made of them); their results follow the schema's tensors in TensorInfo::position, and a
  // Passed output (OutKind::Passed) is the result `results[m]` of them.
  const PlanInfo* before;
  int nBefore;
};

struct AutogradInfo {
  const char* backwardOp; // "<ns>::<op>_backward"
  int inputs;             // tensor arguments, first in the schema
  int attrs;              // scalar arguments after them
  int outputs;            // the op's outputs, first among the results; then saved values
  bool generator;         // a `Generator? generator` follows the attrs (random ops)
  // Per input: whether the backward reads it (else the node saves a placeholder of its shape,
  // not the tensor), and the output whose incoming gradient is its gradient unchanged (-1:
  // none; the node passes that gradient on instead of asking the backward op for a copy).
  const bool* saveInput;
  const int* passthrough;
  // Per output: whether gradient flows through it (else no history and no gradient argument
  // in the backward; passthrough indexes the differentiable ones). None: no node at all.
  const bool* differentiable;
};

struct OpInfo {
  const char* file; // the registration file, in the dispatcher's messages
  const char* ns;   // the op namespace (fusegen --namespace): torch.ops.<ns>.<name>
  const char* name;
  const char* schema;
  const char* backwardName;
  const char* backwardSchema;
  PlanInfo forward;
  PlanInfo backward;
  AutogradInfo autograd;
};

// The stable ABI registers a kernel as a plain function (no closure) of the dispatcher's stack
// (StableIValue, a uint64_t each): the stable glue's kernels are one function per op and plan,
// instantiated in the op's registration file, each calling the shared boxedCall with its op.
using StableKernel = void (*)(uint64_t* stack, uint64_t nArgs, uint64_t nResults);
struct StableKernels {
  StableKernel forward = nullptr; // null: the ATen glue (built without FUSEGEN_STABLE)
  StableKernel backward = nullptr;
};
#ifdef FUSEGEN_STABLE
// Defined in fusegen_glue_stable.cpp.
void boxedCall(const OpInfo& op, bool backward, uint64_t* stack, uint64_t nArgs, uint64_t nResults);
template <const OpInfo& Op, bool Backward>
void stableKernel(uint64_t* stack, uint64_t nArgs, uint64_t nResults) {
  boxedCall(Op, Backward, stack, nArgs, nResults);
}
template <const OpInfo& Op>
inline constexpr StableKernels kStableKernels{&stableKernel<Op, false>, &stableKernel<Op, true>};
#else
template <const OpInfo& Op> inline constexpr StableKernels kStableKernels{};
#endif

// Registers the op's schemas and its CPU, CUDA (when built with CUDA) and, in the ATen glue,
// Autograd kernels for as long as the library stays loaded (the stable glue's autograd is
// registered by the op's Python module). Defined in fusegen_glue.cpp or fusegen_glue_stable.cpp.
void registerOp(const OpInfo& op, const StableKernels& kernels);

// A registration file's static registration: `const Registrar r(kOp, kStableKernels<kOp>);`.
struct Registrar {
  Registrar(const OpInfo& op, const StableKernels& kernels) { registerOp(op, kernels); }
};

// ---- filling a program's Args (fusegen_runtime.h) from a Call ----

template <class Args> Args argsOf(const Call& c) {
  Args a{};
  a.dtype = c.dtype;
  for (int k = 0; k < Args::kAttrs; ++k)
    a.attr[k] = c.attrs[k];
  for (int k = 0; k < Args::kInputs; ++k)
    a.in[k] = c.tensors[k];
  for (int m = 0; m < Args::kOutputs; ++m) {
    a.out[m] = c.results[m];
    a.need[m] = c.need[m];
  }
  a.rows = c.rows;
  a.D = c.D;
  for (int i = 0; i < kMaxNamedDims; ++i) {
    a.dims.size[i] = c.dims[i];
    a.dims.div[i] = FastDiv::of(c.dims[i]);
  }
  int64_t named = 1;
  for (int i = 0; i < kMaxNamedDims; ++i)
    named *= c.dims[i] > 0 ? c.dims[i] : 1;
  a.dims.batch = c.rows / named;
  a.dims.batchDiv = FastDiv::of(a.dims.batch);
  a.dims.rows32 = c.rows < (int64_t(1) << 32);
  a.workspace = c.workspace;
  a.rng = c.rng;
  return a;
}

template <class Args, void (*F)(const Args&)> void cpuEntry(const Call& c) {
  F(argsOf<Args>(c));
}

template <class Args, size_t (*F)(const Args&)> size_t cudaWorkspaceEntry(const Call& c) {
  return F(argsOf<Args>(c));
}

template <class Args, void (*F)(const Args&, void*)> void cudaEntry(const Call& c, void* stream) {
  F(argsOf<Args>(c), stream);
}

// ---- a program's description, from its struct ----

template <class P, int... M>
constexpr std::array<OutKind, sizeof...(M)> outKinds(std::integer_sequence<int, M...>) {
  return {P::outKind(M)...};
}
template <class P>
inline constexpr auto kOutKinds = outKinds<P>(std::make_integer_sequence<int, P::kOutputs>{});
template <class P, int... M>
constexpr std::array<Elem, sizeof...(M)> outElems(std::integer_sequence<int, M...>) {
  return {P::outElem(M)...};
}
template <class P>
inline constexpr auto kOutElems = outElems<P>(std::make_integer_sequence<int, P::kOutputs>{});
template <class P, int... M>
constexpr std::array<unsigned, sizeof...(M)> outKeeps(std::integer_sequence<int, M...>) {
  return {P::outKeep(M)...};
}
template <class P>
inline constexpr auto kOutKeeps = outKeeps<P>(std::make_integer_sequence<int, P::kOutputs>{});
template <class P, int... M>
constexpr std::array<int, sizeof...(M)> outResults(std::integer_sequence<int, M...>) {
  return {P::outResult(M)...};
}
template <class P>
inline constexpr auto kOutResults = outResults<P>(std::make_integer_sequence<int, P::kOutputs>{});
template <class P, int... M>
constexpr std::array<int, sizeof...(M)> outChunkCounts(std::integer_sequence<int, M...>) {
  return {P::outChunks(M)...};
}
template <class P>
inline constexpr auto
    kOutChunkCounts = outChunkCounts<P>(std::make_integer_sequence<int, P::kOutputs>{});
// The outputs with a tensor of their own (the chunks of a packed gradient come last; a Passed
// output's outResult is the earlier program's result it returns).
template <class P> constexpr int ownResults() {
  int n = 0;
  for (int m = 0; m < P::kOutputs; ++m)
    n += P::outResult(m) < 0 || P::outKind(m) == OutKind::Passed;
  return n;
}

template <class P, size_t NT, size_t ND>
constexpr PlanInfo plan(const char* op, const TensorInfo (&tensors)[NT], int full, int dtype,
                        const DType (&dtypes)[ND], CpuEntry cpu, CudaWorkspaceEntry cudaWorkspace,
                        CudaEntry cuda, const char* const* dimNames, int rngTensor = -1) {
  return {op,
          P::kPlan,
          P::kColumn,
          P::kEvenD,
          tensors,
          static_cast<int>(NT),
          full,
          dtype,
          P::kNamedDims,
          dimNames,
          kOutKinds<P>.data(),
          kOutElems<P>.data(),
          kOutResults<P>.data(),
          kOutChunkCounts<P>.data(),
          P::kOutputs,
          kOutKeeps<P>.data(),
          ownResults<P>(),
          dtypes,
          static_cast<int>(ND),
          cpu,
          cudaWorkspace,
          cuda,
          randomStreams<P>(),
          rngTensor,
          P::kColumns,
          P::kRowsAttr < P::kRollAttr,
          P::kRolls,
          nullptr,
          0};
}

// The same, after the programs `before` (run first, in order).
template <class P, size_t NT, size_t ND, size_t NB>
constexpr PlanInfo plan(const char* op, const TensorInfo (&tensors)[NT], int full, int dtype,
                        const DType (&dtypes)[ND], CpuEntry cpu, CudaWorkspaceEntry cudaWorkspace,
                        CudaEntry cuda, const char* const* dimNames, int rngTensor,
                        const PlanInfo (&before)[NB]) {
  PlanInfo p =
      plan<P>(op, tensors, full, dtype, dtypes, cpu, cudaWorkspace, cuda, dimNames, rngTensor);
  p.before = before;
  p.nBefore = static_cast<int>(NB);
  return p;
}

} // namespace fg::glue
