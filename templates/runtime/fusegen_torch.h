// fusegen torch glue: argument checking and dispatch shared by every generated op, included
// only by the shared glue (fusegen_glue.cpp; the ops describe themselves in fusegen_glue.h).
// It turns the op's tensors into contiguous [rows, D] views, checks
// dtype, device and shape with messages that name the argument, allocates outputs and
// gradients, and calls the CPU or CUDA plan.
#pragma once

#include "fusegen_glue.h"
#include "fusegen_program.h"
#include "fusegen_runtime.h"

#include <ATen/core/Tensor.h>
#include <ATen/DeviceGuard.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#ifdef FUSEGEN_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <limits>
#include <mutex>
#include <optional>

#include <string>
#include <vector>

namespace fg::glue {

struct TensorArg {
  const char* name;
  const at::Tensor& tensor;
  Bcast bcast;
  Elem elem;
  bool read; // the plan reads its elements (else it may be a placeholder of its shape)
  unsigned dims; // the op's leading dims it has (TensorInfo::dims)
  int chunks;    // a packed argument's chunks of D (TensorInfo::chunks)
};

inline at::ScalarType elemScalarType(Elem e) {
  switch (e) {
  case Elem::Int64:
    return at::kLong;
  case Elem::Int32:
    return at::kInt;
  case Elem::Float32:
    return at::kFloat;
  case Elem::Float8E4M3:
    return at::kFloat8_e4m3fn;
  case Elem::Float8E5M2:
    return at::kFloat8_e5m2;
  default:
    return at::kBool;
  }
}

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

// The dtype a program computes in, and stores its saved statistics (Bcast::Stat) in.
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
  int namedDims = 0;
  int64_t dims[kMaxNamedDims] = {}; // the named leading dims' sizes (the full input's)
};

// The shape of a tensor with the leading dims `keep` of p's (not the batch's), and D if `withD`.
inline std::vector<int64_t> keptShape(const Prepared& p, unsigned keep, bool withD) {
  std::vector<int64_t> s;
  for (int i = 0; i < p.namedDims; ++i)
    if ((keep >> i) & 1u) s.push_back(p.dims[i]);
  if (withD) s.push_back(p.D);
  return s;
}

// "[S, D]": the dims `keep` of the op's, by name.
inline std::string dimsSpelling(const char* const* names, int n, unsigned keep, bool withD) {
  std::string out;
  for (int i = 0; i < n; ++i)
    if ((keep >> i) & 1u) out += (out.empty() ? "" : ", ") + std::string(names[i]);
  if (withD) out += out.empty() ? "D" : ", D";
  return "[" + out + "]";
}

// An input that omits some of the op's leading dims ([S, D] against [..., S, H, D]): its shape
// is its own dims' sizes, each checked against the full input's by name.
inline void checkMapped(const char* op, const TensorArg& a, const char* refName,
                        const at::Tensor& ref, const Prepared& p, const char* const* names) {
  const bool withD = a.bcast == Bcast::Full || a.bcast == Bcast::TypedFull;
  const std::vector<int64_t> want = keptShape(p, a.dims, withD);
  const at::Tensor& t = a.tensor;
  TORCH_CHECK(t.dim() == static_cast<int64_t>(want.size()), op, ": argument '", a.name,
              "' must have shape ", dimsSpelling(names, p.namedDims, a.dims, withD), " = ",
              shapeString(want), " (from '", refName, "' ", shapeString(ref.sizes()),
              "), but has shape ", shapeString(t.sizes()));
  int64_t k = 0;
  for (int i = 0; i < p.namedDims; ++i) {
    if (!((a.dims >> i) & 1u)) continue;
    TORCH_CHECK(t.size(k) == p.dims[i], op, ": argument '", a.name, "' has ", names[i], " = ",
                std::to_string(t.size(k)), " (dim ", std::to_string(k), " of ",
                shapeString(t.sizes()), ") where '", refName, "' has ", names[i], " = ",
                std::to_string(p.dims[i]));
    ++k;
  }
  TORCH_CHECK(!withD || t.size(k) == p.D, op, ": argument '", a.name, "' has D = ",
              std::to_string(t.size(k)), " (its last dim) where '", refName, "' has D = ",
              std::to_string(p.D));
}

// A result written per element (or row) of the op that the glue sums over the leading dims
// not in `keep` (the gradient of an input broadcast over them), in the compute type, then
// stored in `dtype`.
inline at::Tensor sumToKept(const at::Tensor& t, const Prepared& p, unsigned keep, bool withD,
                            at::ScalarType dtype) {
  int64_t named = 1;
  for (int i = 0; i < p.namedDims; ++i)
    named *= p.dims[i];
  std::vector<int64_t> view{named ? p.rows / named : 0};
  std::vector<int64_t> sumDims;
  if (!((keep >> p.namedDims) & 1u)) sumDims.push_back(0);
  for (int i = 0; i < p.namedDims; ++i) {
    view.push_back(p.dims[i]);
    if (!((keep >> i) & 1u)) sumDims.push_back(1 + i);
  }
  if (withD) view.push_back(p.D);
  at::Tensor v = t.view(view);
  return (sumDims.empty() ? v : v.sum(sumDims)).to(dtype).view(keptShape(p, keep, withD));
}

// `full` is the index of the first full input: it defines D and the output shape.
inline Prepared prepare(const char* op, c10::ArrayRef<TensorArg> args, int full,
                        c10::ArrayRef<at::ScalarType> dtypes, int namedDims,
                        const char* const* dimNames) {
  const at::Tensor& ref = args[full].tensor;
  const char* refName = args[full].name;
  Prepared p;
  p.dtype = ref.scalar_type();
  p.device = ref.device();
  bool hasCol = false;
  for (const TensorArg& a : args)
    hasCol = hasCol || a.bcast == Bcast::Col;
  for (const TensorArg& a : args) {
    if (a.bcast == Bcast::Random || a.bcast == Bcast::Position) // no tensor: the plan makes it
      continue;
    TORCH_CHECK(a.tensor.defined(), op, ": argument '", a.name, "' is an undefined tensor");
    if (a.elem == Elem::Compute) { // a whole-tensor value saved by the forward
      TORCH_CHECK(a.tensor.scalar_type() == computeType(p.dtype), op, ": argument '", a.name,
                  "' has dtype ", dtypeName(a.tensor.scalar_type()), ", but must have dtype ",
                  dtypeName(computeType(p.dtype)), " (the compute type of '", refName, "', ",
                  dtypeName(p.dtype), ")");
    } else if (a.elem != Elem::Dtype) { // an integer or bool input: its own dtype, as the spec says
      TORCH_CHECK(a.tensor.scalar_type() == elemScalarType(a.elem), op, ": argument '", a.name,
                  "' has dtype ", dtypeName(a.tensor.scalar_type()), ", but must have dtype ",
                  dtypeName(elemScalarType(a.elem)));
    } else if (a.bcast == Bcast::Stat) { // a statistic saved by the forward, in the compute type
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
  const int refChunks = args[full].chunks;
  if (refChunks > 1) { // a packed full input: [..., chunks * D]
    TORCH_CHECK(ref.dim() >= 1 && p.D % refChunks == 0, op, ": argument '", refName,
                "' is packed ([..., ", std::to_string(refChunks), "*D]): its last dim must be a "
                "multiple of ", std::to_string(refChunks), ", but its shape is ",
                shapeString(ref.sizes()));
    p.D /= refChunks;
  }
  p.fullShape = ref.sizes().vec();
  if (!p.fullShape.empty()) p.fullShape.back() = p.D;
  p.rows = 1; // the leading dims: rows exist with D == 0 too (their reductions are empty)
  for (size_t i = 0; i + 1 < p.fullShape.size(); ++i)
    p.rows *= p.fullShape[i];
  p.namedDims = namedDims;
  if (namedDims > 0) {
    TORCH_CHECK(ref.dim() >= namedDims + 1, op, ": argument '", refName, "' must have at least ",
                std::to_string(namedDims + 1), " dims [..., ",
                dimsSpelling(dimNames, namedDims, kAllDims, true).substr(1), ", but has shape ",
                shapeString(ref.sizes()));
    for (int i = 0; i < namedDims; ++i)
      p.dims[i] = ref.size(ref.dim() - 1 - namedDims + i);
  }
  for (const TensorArg& a : args) {
    const at::Tensor& t = a.tensor;
    if (a.dims != kAllDims && a.bcast != Bcast::Position && a.bcast != Bcast::Random &&
        a.bcast != Bcast::Unread) {
      checkMapped(op, a, refName, ref, p, dimNames);
      p.tensors.push_back(a.read ? t.contiguous() : at::Tensor());
      continue;
    }
    switch (a.bcast) {
    case Bcast::Full:
      if (a.chunks > 1 || refChunks > 1) { // [..., chunks*D] against the op's [..., D]
        std::vector<int64_t> want = p.fullShape;
        if (!want.empty()) want.back() *= a.chunks;
        TORCH_CHECK(t.sizes().vec() == want, op, ": argument '", a.name, "' must have shape ",
                    shapeString(want), " (the leading dims of '", refName, "' and ",
                    a.chunks > 1 ? std::to_string(a.chunks) + " x " : std::string(), "D = ",
                    std::to_string(p.D), "), but has shape ", shapeString(t.sizes()));
        break;
      }
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
    case Bcast::Random:
    case Bcast::Position:
    case Bcast::Unread: // (programs' tables only: an argument's is its shape's)
      p.tensors.emplace_back();
      continue;
    case Bcast::TypedFull:
    case Bcast::TypedCol:
      break; // (programs' tables only)
    }
    p.tensors.push_back(a.read ? t.contiguous() : at::Tensor()); // (an unread placeholder)
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

inline at::ScalarType toScalarType(DType t) {
  switch (t) {
  case DType::Float16:
    return at::kHalf;
  case DType::BFloat16:
    return at::kBFloat16;
  case DType::Float64:
    return at::kDouble;
  default:
    return at::kFloat;
  }
}

// A random op's forward: a seed and offset from the generator (`generator`, else the device's
// default), reserving `increment` of its offset. CUDA: the generator's Philox state, as ATen's
// own random kernels take it (under CUDA graph capture, pointers the replays advance). CPU: a
// 63-bit seed drawn by random_() of an int64 tensor, offset 0; the package's _support.draw_rng
// takes the same two in Python.
inline RngArgs drawRng(const at::Device& device, const std::optional<at::Generator>& generator,
                       uint64_t increment) {
  RngArgs r{};
#ifdef FUSEGEN_WITH_CUDA
  if (device.is_cuda()) {
    auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(
        generator, at::cuda::detail::getDefaultCUDAGenerator(device.index()));
    at::PhiloxCudaState s;
    {
      std::lock_guard<std::mutex> lock(gen->mutex_);
      s = gen->philox_cuda_state(increment);
    }
    if (s.captured_) {
      r.seedPtr = s.seed_.ptr;
      r.offsetPtr = s.offset_.ptr;
      r.offset = s.offset_intragraph_;
    } else {
      r.seed = s.seed_.val;
      r.offset = s.offset_.val;
    }
    return r;
  }
#endif
  (void)increment;
  TORCH_CHECK(device.is_cpu(), "fusegen: random numbers on ", device.str(), " are not supported");
  at::Tensor seed = at::empty({}, at::TensorOptions().dtype(at::kLong));
  seed.random_(generator);
  r.seed = static_cast<uint64_t>(seed.item<int64_t>());
  return r;
}

// The (seed, offset) a backward reads, as its forward returned it.
inline void checkRngState(const char* op, const at::Tensor& t, const at::Device& device) {
  TORCH_CHECK(t.defined() && t.scalar_type() == at::kLong && t.dim() == 1 && t.size(0) == 2 &&
                  t.is_contiguous(),
              op, ": argument '_saved_rng' must be the int64 [2] tensor (seed, offset) the "
              "forward returned");
  TORCH_CHECK(t.device() == device, op, ": argument '_saved_rng' is on ", t.device().str(),
              ", but the op's tensors are on ", device.str());
}

// Runs one plan of an op (fusegen_glue.h): checks and prepares the tensors, allocates the
// results (skipping those not in `need`) and calls the plan for the tensors' device. A random
// op's forward draws a seed and offset and returns them last; its backward reads `rngState`.
// `earlier`: the results of the programs run before it (PlanInfo::before), which its Passed
// outputs are.
inline std::vector<at::Tensor> runPlan(const PlanInfo& plan, c10::ArrayRef<TensorArg> args,
                                       c10::ArrayRef<double> spanAttrs, c10::ArrayRef<bool> need,
                                       const std::optional<at::Generator>& generator,
                                       const at::Tensor* rngState,
                                       c10::ArrayRef<at::Tensor> earlier = {}) {
  c10::SmallVector<at::ScalarType, 4> dtypes;
  for (int k = 0; k < plan.nDtypes; ++k)
    dtypes.push_back(toScalarType(plan.dtypes[k]));
  Prepared p = prepare(plan.op, args, plan.full, dtypes, plan.namedDims, plan.dimNames);
  // The number of rows, where a formula reads it: in the attr slot after the spec's.
  c10::SmallVector<double, 8> attrs(spanAttrs.begin(), spanAttrs.end());
  if (plan.rowsAttr) attrs.push_back(static_cast<double>(p.rows));
  attrs.append(static_cast<size_t>(plan.rollAttrs), 0.0); // (the program fills them: withRolls)
  if (plan.columns) { // [D] values: one row of D
    p.rows = 1;
    p.fullShape = {p.D};
  }
  // The column index reaches the program in the compute type: exact in float32 up to 2^24.
  TORCH_CHECK(!plan.column || p.dtype == at::kDouble || p.D <= (int64_t(1) << 24), plan.op,
              ": the last dim of '", args[plan.full].name, "' is ", std::to_string(p.D),
              "; this op reads the column index, which is exact in float32 up to 2^24 = 16777216 "
              "columns (float64 inputs have no such limit)");
  TORCH_CHECK(!plan.evenD || p.D % 2 == 0, plan.op, ": the last dim of '", args[plan.full].name,
              "' is ", std::to_string(p.D), "; this op moves columns (swap_halves, swap_pairs), "
              "which needs an even last dim");
  // The GPU's row plan indexes a row's vectors in 32 bits (fusegen_row_cuda.cuh).
  TORCH_CHECK((plan.plan != Plan::Row && plan.plan != Plan::Groups) || !p.device.is_cuda() ||
                  p.D <= std::numeric_limits<int32_t>::max(),
              plan.op, ": the last dim of '", args[plan.full].name, "' is ", std::to_string(p.D),
              "; this op reduces over it, which on the GPU takes rows of at most 2^31 - 1 = "
              "2147483647 elements");
  const at::OptionalDeviceGuard guard(p.device);
  const auto resultOptions = args[plan.full].tensor.options(); // (p.tensors: undefined where unread)
  std::vector<int64_t> rowShape(p.fullShape.begin(), p.fullShape.end() - (p.fullShape.empty() ? 0 : 1));
  // A row plan's rows exist with D == 0 too: their reductions are empty (a sum is 0, a max
  // -inf). A flat or colwise program has nothing to compute without elements.
  const bool empty = plan.plan == Plan::Row ? p.rows == 0 : p.rows * p.D == 0;
  std::vector<at::Tensor> results;
  c10::SmallVector<void*, 8> resultData;
  for (int m = 0; m < plan.nResults; ++m) {
    at::Tensor t;
    // An output of its own type (float32, FP8) is allocated as that type.
    const auto options = plan.elems[m] == Elem::Dtype ? resultOptions
                         : plan.elems[m] == Elem::Compute
                             ? resultOptions.dtype(computeType(p.dtype))
                             : resultOptions.dtype(elemScalarType(plan.elems[m]));
    if (!need[m]) {
      t = at::empty({0}, options);
    } else if (plan.kinds[m] == OutKind::Passed) { // an earlier program's result (a copy:
      // results do not alias, and one may be both a [D] output and a saved statistic)
      t = earlier[plan.results[m]].to(options, /*non_blocking=*/false, /*copy=*/true);
    } else if (plan.keeps[m] != kAllDims) { // summed over the dims not kept, below
      const auto shape = plan.kinds[m] == OutKind::Row ? rowShape : p.fullShape;
      t = empty ? at::zeros(shape, options) : at::empty(shape, options);
    } else if (plan.kinds[m] == OutKind::ColSum || plan.kinds[m] == OutKind::ColM2) {
      // (a sum over no rows is zero)
      t = empty ? at::zeros({p.D}, options) : at::empty({p.D}, options);
    } else if (plan.kinds[m] == OutKind::Total || plan.kinds[m] == OutKind::Scalar) {
      t = empty ? at::zeros({}, options) : at::empty({}, options);
    } else if (plan.kinds[m] == OutKind::Stat) { // saved statistics: the compute type
      t = at::empty(rowShape, options.dtype(computeType(p.dtype)));
    } else if (plan.chunks[m] > 1) { // a packed gradient: [..., chunks * D]
      std::vector<int64_t> shape = p.fullShape;
      shape.back() *= plan.chunks[m];
      t = at::empty(shape, options);
    } else {
      t = at::empty(plan.kinds[m] == OutKind::Row ? rowShape : p.fullShape, options);
    }
    resultData.push_back(need[m] && plan.kinds[m] != OutKind::Passed ? t.data_ptr() : nullptr);
    results.push_back(t);
  }
  // The other chunks of packed gradients write into their chunk 0's tensor; the program does
  // not write the Passed outputs.
  c10::SmallVector<bool, 16> needed(need.begin(), need.end());
  for (int m = 0; m < plan.nResults; ++m)
    needed[m] = needed[m] && plan.kinds[m] != OutKind::Passed;
  for (int m = plan.nResults; m < plan.nOutputs; ++m) {
    resultData.push_back(resultData[plan.results[m]]);
    needed.push_back(need[plan.results[m]]);
  }
  RngArgs rng{};
  if (plan.randomStreams > 0 && plan.rngTensor < 0) { // a forward: draw, and return the draw
    // Four numbers of the generator's offset per stream and element (the counter layout of
    // fusegen_runtime.h's Philox): the next call's streams start past this one's.
    rng = drawRng(p.device, generator, 4 * static_cast<uint64_t>(plan.randomStreams));
    at::Tensor state = at::empty({2}, resultOptions.dtype(at::kLong));
    rng.save = state.data_ptr<int64_t>();
    if (empty) { // no kernel runs to write it
      const at::TensorOptions longs = resultOptions.dtype(at::kLong);
      const at::Tensor seed = rng.seedPtr ? at::from_blob(const_cast<int64_t*>(rng.seedPtr), {1}, longs)
                                          : at::full({1}, static_cast<int64_t>(rng.seed), longs);
      const at::Tensor offset =
          (rng.offsetPtr ? at::from_blob(const_cast<int64_t*>(rng.offsetPtr), {1}, longs)
                         : at::zeros({1}, longs))
              .add(static_cast<int64_t>(rng.offset));
      state.copy_(at::cat({seed, offset}));
    }
    results.push_back(state);
  } else if (plan.randomStreams > 0) { // a backward: the forward's draw
    checkRngState(plan.op, *rngState, p.device);
    rng.seedPtr = rngState->data_ptr<int64_t>();
    rng.offsetPtr = rng.seedPtr + 1;
  }
  bool finish = false; // [] outputs computed after every row: over no rows too
  for (int m = 0; m < plan.nResults; ++m)
    finish = finish || plan.kinds[m] == OutKind::Scalar;
  // The results summed over leading dims (the gradients of inputs broadcast over them).
  auto sumResults = [&]() {
    for (int m = 0; m < plan.nResults; ++m)
      if (need[m] && plan.keeps[m] != kAllDims)
        results[m] = sumToKept(results[m], p, plan.keeps[m], plan.kinds[m] != OutKind::Row, p.dtype);
  };
  if (empty && !finish) {
    sumResults();
    return results;
  }
  c10::SmallVector<const void*, 16> tensorData;
  for (const at::Tensor& t : p.tensors)
    tensorData.push_back(t.defined() ? t.data_ptr() : nullptr);
  Call c{toDType(p.dtype), tensorData.data(), resultData.data(), needed.data(), attrs.data(),
         p.rows,           p.D,               p.dims,            nullptr,
         rng};
  if (p.device.is_cuda()) {
    TORCH_CHECK(plan.cuda != nullptr, plan.op, ": this package was built without CUDA");
    const at::Tensor workspace =
        plan.cudaWorkspace ? allocateWorkspace(plan.cudaWorkspace(c), resultOptions, c.workspace)
                           : at::Tensor();
    plan.cuda(c, currentStream(p));
  } else {
    plan.cpu(c);
  }
  sumResults();
  return results;
}

} // namespace fg::glue
