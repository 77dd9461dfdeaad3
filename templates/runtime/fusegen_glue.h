// fusegen glue interface: what each generated op's registration file (<op>_ops.cpp) hands the
// shared glue (fusegen_glue.cpp, compiled once per toolchain and cached): the schemas of the op
// and of its backward, and for each of the two plans the tensor arguments' names and shapes,
// the results' kinds and the CPU and CUDA entry points behind one type-erased signature. The
// shared glue unboxes the dispatcher's arguments, checks and prepares the tensors
// (fusegen_torch.h), allocates the results and registers the CPU, CUDA and Autograd kernels.
// No torch header is included here: a registration file compiles in a fraction of a second,
// where <torch/library.h> and ATen's operator headers cost about 6 s of CPU per op.
#pragma once

#include "fusegen_row.h"
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
  void* workspace; // CUDA: set by the glue after asking cudaWorkspace
};

using CpuEntry = void (*)(const Call&);
using CudaWorkspaceEntry = size_t (*)(const Call&);
using CudaEntry = void (*)(const Call&, void* stream);

// How a plan's results are allocated.
enum class Results : int {
  Outputs,    // an elementwise forward: Full or Row outputs (kinds)
  InputGrads, // an elementwise backward: shaped like the inputs, those not in the mask empty
  Program,    // a row program (fusegen_row.h): by kind, those not needed empty
};

struct TensorInfo {
  const char* name; // in messages
  Bcast bcast;
  int position; // among the schema's tensor arguments
};

struct PlanInfo {
  const char* op; // "fusegen::<op>" or "fusegen::<op>_backward", in messages
  Results results;
  const TensorInfo* tensors;
  int nTensors;
  int full; // the first full input: it defines D and the output shape
  const OutKind* kinds;
  int nResults;
  const DType* dtypes; // those the op supports
  int nDtypes;
  CpuEntry cpu;
  CudaWorkspaceEntry cudaWorkspace; // null: no workspace
  CudaEntry cuda;                   // null: built without CUDA
};

struct AutogradInfo {
  const char* backwardOp; // "fusegen::<op>_backward"
  int inputs;             // tensor arguments, first in the schema
  int attrs;              // scalar arguments after them
  int outputs;            // differentiable results, first; the rest are saved statistics
};

struct OpInfo {
  const char* file; // the registration file, in the dispatcher's messages
  const char* name;
  const char* schema;
  const char* backwardName;
  const char* backwardSchema;
  PlanInfo forward;
  PlanInfo backward;
  AutogradInfo autograd;
};

// Registers the op's schemas and its CPU, CUDA (when built with CUDA) and Autograd kernels
// for as long as the library stays loaded. Defined in fusegen_glue.cpp.
void registerOp(const OpInfo& op);

// A registration file's static registration: `const Registrar r(kOp);`.
struct Registrar {
  explicit Registrar(const OpInfo& op) { registerOp(op); }
};

// ---- filling an op's Args (fusegen_runtime.h, fusegen_row.h) from a Call ----

template <int NI, int NO, int NA> void fill(ForwardArgs<NI, NO, NA>& a, const Call& c) {
  for (int k = 0; k < NI; ++k)
    a.in[k] = c.tensors[k];
  for (int m = 0; m < NO; ++m)
    a.out[m] = c.results[m];
}

// The tensors are the inputs followed by the outputs' gradients; the results the inputs'.
template <int NI, int NO, int NA> void fill(BackwardArgs<NI, NO, NA>& a, const Call& c) {
  for (int k = 0; k < NI; ++k) {
    a.in[k] = c.tensors[k];
    a.gin[k] = c.results[k];
    a.need[k] = c.need[k];
  }
  for (int m = 0; m < NO; ++m)
    a.gout[m] = c.tensors[NI + m];
  a.workspace = c.workspace;
}

template <int NI, int NO, int NA> void fill(RowArgs<NI, NO, NA>& a, const Call& c) {
  for (int k = 0; k < NI; ++k)
    a.in[k] = c.tensors[k];
  for (int m = 0; m < NO; ++m) {
    a.out[m] = c.results[m];
    a.need[m] = c.need[m];
  }
  a.workspace = c.workspace;
}

template <class Args> Args argsOf(const Call& c) {
  Args a{};
  a.dtype = c.dtype;
  for (size_t k = 0; k < sizeof(a.attr) / sizeof(a.attr[0]); ++k)
    a.attr[k] = c.attrs[k];
  a.rows = c.rows;
  a.D = c.D;
  fill(a, c);
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

// ---- the kinds of a plan's results, from its struct ----

template <class P, int... M>
constexpr std::array<OutKind, sizeof...(M)> rowKinds(std::integer_sequence<int, M...>) {
  return {P::outKind(M)...};
}
template <class Op, int... M>
constexpr std::array<OutKind, sizeof...(M)> outputKinds(std::integer_sequence<int, M...>) {
  return {(Op::outputBcast(M) == Bcast::Row ? OutKind::Row : OutKind::Full)...};
}
template <class P>
inline constexpr auto kRowKinds = rowKinds<P>(std::make_integer_sequence<int, P::kOutputs>{});
template <class Op>
inline constexpr auto
    kOutputKinds = outputKinds<Op>(std::make_integer_sequence<int, Op::kOutputs>{});
// A row program's plan (struct Forward or Backward of <op>.h).
template <class P, size_t NT, size_t ND>
constexpr PlanInfo rowPlan(const char* op, const TensorInfo (&tensors)[NT], int full,
                           const DType (&dtypes)[ND], CpuEntry cpu,
                           CudaWorkspaceEntry cudaWorkspace, CudaEntry cuda) {
  return {op,
          Results::Program,
          tensors,
          static_cast<int>(NT),
          full,
          kRowKinds<P>.data(),
          P::kOutputs,
          dtypes,
          static_cast<int>(ND),
          cpu,
          cudaWorkspace,
          cuda};
}

// The plans of an elementwise op (struct Op of <op>.h).
template <class Op, size_t NT, size_t ND>
constexpr PlanInfo forwardPlan(const char* op, const TensorInfo (&tensors)[NT], int full,
                               const DType (&dtypes)[ND], CpuEntry cpu, CudaEntry cuda) {
  return {op,
          Results::Outputs,
          tensors,
          static_cast<int>(NT),
          full,
          kOutputKinds<Op>.data(),
          Op::kOutputs,
          dtypes,
          static_cast<int>(ND),
          cpu,
          nullptr,
          cuda};
}
template <class Op, size_t NT, size_t ND>
constexpr PlanInfo backwardPlan(const char* op, const TensorInfo (&tensors)[NT], int full,
                                const DType (&dtypes)[ND], CpuEntry cpu,
                                CudaWorkspaceEntry cudaWorkspace, CudaEntry cuda) {
  return {op,     Results::InputGrads,  tensors, static_cast<int>(NT), full, nullptr, Op::kInputs,
          dtypes, static_cast<int>(ND), cpu,     cudaWorkspace,        cuda};
}

} // namespace fg::glue
