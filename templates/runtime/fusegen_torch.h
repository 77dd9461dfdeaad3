// fusegen torch glue: argument checking and dispatch shared by every generated op's
// registration file. It turns the op's tensors into contiguous [rows, D] views, checks
// dtype, device and shape with messages that name the argument, allocates outputs and
// gradients, and calls the CPU or CUDA plan.
#pragma once

#include "fusegen_row.h"
#include "fusegen_runtime.h"

#include <ATen/core/Tensor.h>
#include <ATen/DeviceGuard.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#ifdef FUSEGEN_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <array>
#include <string>
#include <vector>

namespace fg::glue {

struct TensorArg {
  const char* name;
  const at::Tensor& tensor;
  Bcast bcast;
};

// Numbers are formatted with std::to_string, never streamed: on some toolchains an
// extension's inline ostream<<long resolves locale facets it does not own and crashes.
inline std::string shapeString(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

inline const char* dtypeName(at::ScalarType t) {
  switch (t) {
  case at::kFloat:
    return "float32";
  case at::kHalf:
    return "float16";
  case at::kBFloat16:
    return "bfloat16";
  case at::kDouble:
    return "float64";
  case at::kInt:
    return "int32";
  case at::kLong:
    return "int64";
  case at::kShort:
    return "int16";
  case at::kChar:
    return "int8";
  case at::kByte:
    return "uint8";
  case at::kBool:
    return "bool";
  default:
    return c10::toString(t);
  }
}

inline DType toDType(at::ScalarType t) {
  switch (t) {
  case at::kHalf:
    return DType::Float16;
  case at::kBFloat16:
    return DType::BFloat16;
  case at::kDouble:
    return DType::Float64;
  default:
    return DType::Float32;
  }
}

// The dtype a row program computes in, and stores its saved statistics (Bcast::Stat) in.
inline at::ScalarType computeType(at::ScalarType t) {
  return t == at::kDouble ? at::kDouble : at::kFloat;
}

// The checked, contiguous form of an op's tensor arguments.
struct Prepared {
  std::vector<at::Tensor> tensors; // contiguous, in argument order
  std::vector<int64_t> fullShape;  // shape of the full tensors (and of full outputs)
  int64_t rows = 0;
  int64_t D = 1;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
};

// `full` is the index of the first full input: it defines D and the output shape.
template <size_t N>
Prepared prepare(const char* op, const std::array<TensorArg, N>& args, int full,
                 std::initializer_list<at::ScalarType> dtypes) {
  const at::Tensor& ref = args[full].tensor;
  const char* refName = args[full].name;
  Prepared p;
  p.dtype = ref.scalar_type();
  p.device = ref.device();
  bool hasCol = false;
  for (const TensorArg& a : args)
    hasCol = hasCol || a.bcast == Bcast::Col;
  for (const TensorArg& a : args) {
    TORCH_CHECK(a.tensor.defined(), op, ": argument '", a.name, "' is an undefined tensor");
    if (a.bcast == Bcast::Stat) { // a statistic saved by the forward, in the compute type
      TORCH_CHECK(a.tensor.scalar_type() == computeType(p.dtype), op, ": argument '", a.name,
                  "' has dtype ", dtypeName(a.tensor.scalar_type()), ", but must have dtype ",
                  dtypeName(computeType(p.dtype)), " (the compute type of '", refName, "', ",
                  dtypeName(p.dtype), ")");
    } else {
      bool supported = false;
      for (at::ScalarType t : dtypes)
        supported = supported || a.tensor.scalar_type() == t;
      if (!supported) { // the message is built only when it is needed (this runs every call)
        std::string list;
        for (at::ScalarType t : dtypes)
          list += (list.empty() ? "" : ", ") + std::string(dtypeName(t));
        TORCH_CHECK(false, op, ": argument '", a.name, "' has dtype ",
                    dtypeName(a.tensor.scalar_type()), ", but this op supports ", list);
      }
      TORCH_CHECK(a.tensor.scalar_type() == p.dtype, op, ": argument '", a.name, "' has dtype ",
                  dtypeName(a.tensor.scalar_type()), ", but '", refName, "' has dtype ",
                  dtypeName(p.dtype), "; all tensor arguments must have the same dtype");
    }
    TORCH_CHECK(a.tensor.device() == p.device, op, ": argument '", a.name, "' is on ",
                a.tensor.device().str(), ", but '", refName, "' is on ", p.device.str(),
                "; all tensor arguments must be on the same device");
  }
  TORCH_CHECK(!hasCol || ref.dim() >= 1, op, ": argument '", refName,
              "' must have at least 1 dim (its last dim is D), but is 0-dim");
  p.D = ref.dim() >= 1 ? ref.size(-1) : 1;
  p.fullShape = ref.sizes().vec();
  p.rows = 1; // the leading dims: rows exist with D == 0 too (their reductions are empty)
  for (size_t i = 0; i + 1 < p.fullShape.size(); ++i)
    p.rows *= p.fullShape[i];
  for (const TensorArg& a : args) {
    const at::Tensor& t = a.tensor;
    switch (a.bcast) {
    case Bcast::Full:
      TORCH_CHECK(t.sizes() == ref.sizes(), op, ": argument '", a.name,
                  "' must have the same shape as '", refName, "' ", shapeString(ref.sizes()),
                  ", but has shape ", shapeString(t.sizes()));
      break;
    case Bcast::Col:
      TORCH_CHECK(t.dim() == 1 && t.size(0) == p.D, op, ": argument '", a.name,
                  "' must have shape [D] with D = ", std::to_string(p.D), " (the last dim of '", refName,
                  "'), but has shape ", shapeString(t.sizes()));
      break;
    case Bcast::Row:
    case Bcast::Stat: {
      std::vector<int64_t> rowShape(p.fullShape.begin(), p.fullShape.end() - (ref.dim() ? 1 : 0));
      TORCH_CHECK(t.sizes().vec() == rowShape, op, ": argument '", a.name,
                  "' must have shape ", shapeString(rowShape), " (the leading dims of '", refName,
                  "'), but has shape ", shapeString(t.sizes()));
      break;
    }
    case Bcast::Scalar:
      TORCH_CHECK(t.dim() == 0, op, ": argument '", a.name,
                  "' must be a 0-dim tensor, but has shape ", shapeString(t.sizes()));
      break;
    }
    p.tensors.push_back(t.contiguous());
  }
  return p;
}

inline void* currentStream(const Prepared& p) {
#ifdef FUSEGEN_WITH_CUDA
  return c10::cuda::getCurrentCUDAStream(p.device.index()).stream();
#else
  (void)p;
  return nullptr;
#endif
}

// The CUDA plans' scratch memory (partial sums of [D] gradients) when they need any; `ptr`
// stays null otherwise. Only plans that sum [D] gradients do, and an empty tensor would still
// cost an allocation call per launch (about 4 us of host time at launch-bound sizes).
inline at::Tensor allocateWorkspace(size_t bytes, const at::TensorOptions& options, void*& ptr) {
  if (bytes == 0)
    return {};
  at::Tensor workspace = at::empty({static_cast<int64_t>(bytes)}, options.dtype(at::kByte));
  ptr = workspace.data_ptr();
  return workspace;
}

// Runs an op's forward: checks and prepares the tensors, allocates the outputs (full or
// per-row) and calls the plan for the tensors' device.
template <class Op, size_t N>
std::vector<at::Tensor>
runForward(const char* op, const std::array<TensorArg, N>& args, int full,
           std::initializer_list<at::ScalarType> dtypes,
           const std::array<double, atLeastOne<Op::kAttrs>()>& attrs,
           void (*cpu)(const typename Op::ForwardArgs&),
           void (*cuda)(const typename Op::ForwardArgs&, void*)) {
  Prepared p = prepare(op, args, full, dtypes);
  const at::OptionalDeviceGuard guard(p.device);
  typename Op::ForwardArgs a{};
  a.dtype = toDType(p.dtype);
  for (int k = 0; k < Op::kInputs; ++k)
    a.in[k] = p.tensors[k].data_ptr();
  for (int k = 0; k < Op::kAttrs; ++k)
    a.attr[k] = attrs[k];
  a.rows = p.rows;
  a.D = p.D;
  std::vector<at::Tensor> outs;
  const auto options = p.tensors[full].options();
  std::vector<int64_t> rowShape(p.fullShape.begin(), p.fullShape.end() - (p.fullShape.empty() ? 0 : 1));
  for (int m = 0; m < Op::kOutputs; ++m) {
    outs.push_back(at::empty(Op::outputBcast(m) == Bcast::Row ? rowShape : p.fullShape, options));
    a.out[m] = outs.back().data_ptr();
  }
  if (p.rows * p.D == 0)
    return outs;
  if (p.device.is_cuda()) {
    TORCH_CHECK(cuda != nullptr, op, ": this package was built without CUDA");
    cuda(a, currentStream(p));
  } else {
    cpu(a);
  }
  return outs;
}

// Runs an op's backward: `args` holds the inputs followed by the gradients of the outputs.
// Gradients not asked for in `mask` come back as empty tensors.
template <class Op, size_t N>
std::vector<at::Tensor>
runBackward(const char* op, const std::array<TensorArg, N>& args, int full,
            std::initializer_list<at::ScalarType> dtypes,
            const std::array<double, atLeastOne<Op::kAttrs>()>& attrs,
            const std::array<bool, Op::kInputs>& mask,
            void (*cpu)(const typename Op::BackwardArgs&),
            size_t (*cudaWorkspace)(const typename Op::BackwardArgs&),
            void (*cuda)(const typename Op::BackwardArgs&, void*)) {
  Prepared p = prepare(op, args, full, dtypes);
  const at::OptionalDeviceGuard guard(p.device);
  typename Op::BackwardArgs a{};
  a.dtype = toDType(p.dtype);
  for (int k = 0; k < Op::kInputs; ++k)
    a.in[k] = p.tensors[k].data_ptr();
  for (int m = 0; m < Op::kOutputs; ++m)
    a.gout[m] = p.tensors[Op::kInputs + m].data_ptr();
  for (int k = 0; k < Op::kAttrs; ++k)
    a.attr[k] = attrs[k];
  a.rows = p.rows;
  a.D = p.D;
  const bool empty = p.rows * p.D == 0;
  std::vector<at::Tensor> grads;
  for (int k = 0; k < Op::kInputs; ++k) {
    const at::Tensor& in = p.tensors[k];
    a.need[k] = mask[k];
    // Broadcast gradients are sums; over no rows they are zero.
    at::Tensor g = !mask[k] ? at::empty({0}, in.options())
                   : empty  ? at::zeros(in.sizes(), in.options())
                            : at::empty(in.sizes(), in.options());
    a.gin[k] = mask[k] ? g.data_ptr() : nullptr;
    grads.push_back(g);
  }
  if (empty)
    return grads;
  if (p.device.is_cuda()) {
    TORCH_CHECK(cuda != nullptr, op, ": this package was built without CUDA");
    const at::Tensor workspace = allocateWorkspace(cudaWorkspace(a), p.tensors[0].options(),
                                                   a.workspace);
    cuda(a, currentStream(p));
  } else {
    cpu(a);
  }
  return grads;
}

// Runs a row program (fusegen_row.h): checks and prepares the tensors, allocates the outputs
// by kind (Full, Row, a [D] ColSum or a [] Total), skipping those not in `need`, and calls
// the plan.
template <class P, size_t N>
std::vector<at::Tensor>
runProgram(const char* op, const std::array<TensorArg, N>& args, int full,
           std::initializer_list<at::ScalarType> dtypes,
           const std::array<double, atLeastOne<P::kAttrs>()>& attrs,
           const std::array<bool, P::kOutputs>& need, void (*cpu)(const typename P::Args&),
           size_t (*cudaWorkspace)(const typename P::Args&),
           void (*cuda)(const typename P::Args&, void*)) {
  Prepared p = prepare(op, args, full, dtypes);
  const at::OptionalDeviceGuard guard(p.device);
  typename P::Args a{};
  a.dtype = toDType(p.dtype);
  for (int k = 0; k < P::kInputs; ++k)
    a.in[k] = p.tensors[k].data_ptr();
  for (int k = 0; k < P::kAttrs; ++k)
    a.attr[k] = attrs[k];
  a.rows = p.rows;
  a.D = p.D;
  // With D == 0 the rows still exist: their reductions are empty (a sum is 0, a max -inf).
  const bool empty = p.rows == 0;
  const auto options = p.tensors[full].options();
  std::vector<int64_t> rowShape(p.fullShape.begin(), p.fullShape.end() - (p.fullShape.empty() ? 0 : 1));
  std::vector<at::Tensor> outs;
  for (int m = 0; m < P::kOutputs; ++m) {
    a.need[m] = need[m];
    at::Tensor t;
    if (!need[m])
      t = at::empty({0}, options);
    else if (P::outKind(m) == OutKind::ColSum) // a sum over no rows is zero
      t = empty ? at::zeros({p.D}, options) : at::empty({p.D}, options);
    else if (P::outKind(m) == OutKind::Total)
      t = empty ? at::zeros({}, options) : at::empty({}, options);
    else if (P::outKind(m) == OutKind::Stat)
      t = at::empty(rowShape, options.dtype(computeType(p.dtype)));
    else
      t = at::empty(P::outKind(m) == OutKind::Row ? rowShape : p.fullShape, options);
    a.out[m] = need[m] ? t.data_ptr() : nullptr;
    outs.push_back(t);
  }
  if (empty)
    return outs;
  if (p.device.is_cuda()) {
    TORCH_CHECK(cuda != nullptr, op, ": this package was built without CUDA");
    const at::Tensor workspace = allocateWorkspace(cudaWorkspace(a), options, a.workspace);
    cuda(a, currentStream(p));
  } else {
    cpu(a);
  }
  return outs;
}

} // namespace fg::glue
