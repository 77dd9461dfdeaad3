// fusegen plan runner: what the shared glue does with one call of an op, written once over a
// tensor backend B: the ATen one (fusegen_torch.h, fusegen_glue.cpp) and the LibTorch stable
// ABI one (fusegen_torch_stable.h, fusegen_glue_stable.cpp). It checks dtype, device and shape
// of the op's tensors with messages that name the argument, makes them contiguous [rows, D]
// views, allocates the results, runs the programs before the plan and the plan for the
// tensors' device, and sums the gradients of broadcast inputs. No torch header here: B is
//   using Tensor;                                      (copyable, default: undefined)
//   static bool defined(t); int64_t dim(t), size(t, k); Sizes sizes(t);
//   static TType type(t); std::string typeName(t) (a type TType does not name);
//   static DeviceId device(t); std::string deviceName(t);
//   static Tensor contiguous(t), empty(shape, TType, like), zeros(shape, TType, like),
//                 copyAs(t, TType), sumTo(t, view, sumDims, TType, shape);
//   static bool isContiguous(t); static void* data(t); [[noreturn]] static void fail(const
//   std::string&); struct DeviceGuard { explicit DeviceGuard(const Tensor& like); }; static void*
//   stream(const Tensor& like) (the current CUDA stream); RngArgs drawRng(like, increment, empty,
//   Tensor& state): a random op's forward, its seed and offset and the int64 [2] tensor it returns
//   them in (may fail: no generator).
#pragma once

#include "fusegen_glue.h"
#include "fusegen_program.h"
#include "fusegen_runtime.h"

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace fg::glue {

// A tensor's dtype as the glue tells them apart.
enum class TType {
  Float32,
  Float16,
  BFloat16,
  Float64,
  Int64,
  Int32,
  Int16,
  Int8,
  UInt8,
  Bool,
  Float8E4M3,
  Float8E5M2,
  Other
};

// A device: its type (kCpu, kCuda, else another) and index.
struct DeviceId {
  static constexpr int kCpu = 0, kCuda = 1;
  int type = kCpu;
  int index = -1;
  bool isCuda() const { return type == kCuda; }
  bool isCpu() const { return type == kCpu; }
  bool operator==(const DeviceId& o) const { return type == o.type && index == o.index; }
  bool operator!=(const DeviceId& o) const { return !(*this == o); }
};

// A tensor's sizes, borrowed from the tensor.
struct Sizes {
  const int64_t* data;
  size_t n;
  size_t size() const { return n; }
  int64_t operator[](size_t i) const { return data[i]; }
  std::vector<int64_t> vec() const { return {data, data + n}; }
  bool operator==(const Sizes& o) const {
    if (n != o.n) return false;
    for (size_t i = 0; i < n; ++i)
      if (data[i] != o.data[i]) return false;
    return true;
  }
  bool operator==(const std::vector<int64_t>& v) const {
    return *this == Sizes{v.data(), v.size()};
  }
};

inline TType elemType(Elem e) {
  switch (e) {
  case Elem::Int64:
    return TType::Int64;
  case Elem::Int32:
    return TType::Int32;
  case Elem::Float32:
    return TType::Float32;
  case Elem::Float8E4M3:
    return TType::Float8E4M3;
  case Elem::Float8E5M2:
    return TType::Float8E5M2;
  case Elem::Int8:
    return TType::Int8;
  case Elem::UInt8:
    return TType::UInt8;
  default:
    return TType::Bool;
  }
}

inline TType toTType(DType t) {
  switch (t) {
  case DType::Float16:
    return TType::Float16;
  case DType::BFloat16:
    return TType::BFloat16;
  case DType::Float64:
    return TType::Float64;
  default:
    return TType::Float32;
  }
}

inline DType toDType(TType t) {
  switch (t) {
  case TType::Float16:
    return DType::Float16;
  case TType::BFloat16:
    return DType::BFloat16;
  case TType::Float64:
    return DType::Float64;
  default:
    return DType::Float32;
  }
}

inline const char* typeName(TType t) {
  switch (t) {
  case TType::Float32:
    return "float32";
  case TType::Float16:
    return "float16";
  case TType::BFloat16:
    return "bfloat16";
  case TType::Float64:
    return "float64";
  case TType::Int64:
    return "int64";
  case TType::Int32:
    return "int32";
  case TType::Int16:
    return "int16";
  case TType::Int8:
    return "int8";
  case TType::UInt8:
    return "uint8";
  case TType::Bool:
    return "bool";
  case TType::Float8E4M3:
    return "float8_e4m3fn";
  case TType::Float8E5M2:
    return "float8_e5m2";
  default:
    return "?";
  }
}

// The dtype a program computes in, and stores its saved statistics (Bcast::Stat) in.
inline TType computeType(TType t) {
  return t == TType::Float64 ? TType::Float64 : TType::Float32;
}

// Numbers are formatted with std::to_string, never streamed: on some toolchains an
// extension's inline ostream<<long resolves locale facets it does not own and crashes.
inline std::string shapeString(Sizes s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}
inline std::string shapeString(const std::vector<int64_t>& s) {
  return shapeString(Sizes{s.data(), s.size()});
}

inline void append(std::string& out, const char* s) {
  out += s;
}
inline void append(std::string& out, const std::string& s) {
  out += s;
}
template <class N, std::enable_if_t<std::is_arithmetic_v<N>, int> = 0>
void append(std::string& out, N n) {
  out += std::to_string(n);
}

// B::fail with the parts of a message.
template <class B, class... Parts> [[noreturn]] void failWith(const Parts&... parts) {
  std::string message;
  (append(message, parts), ...);
  B::fail(message);
}

// FG_CHECK(ok, parts...): failWith<B>(parts...) where `ok` is false, in a function templated on
// the backend B. A macro, not a function, so that the parts (device names, shapes and numbers
// as text) are evaluated only on failure: these checks run for every tensor of every plan of
// every call, and their text had cost more host time than the launches at small sizes.
#define FG_CHECK(ok, ...)                                                                          \
  do {                                                                                             \
    if (!(ok)) ::fg::glue::failWith<B>(__VA_ARGS__);                                               \
  } while (false)

template <class B> struct TensorArg {
  const char* name;
  const typename B::Tensor& tensor;
  Bcast bcast;
  Elem elem;
  bool read;     // the plan reads its elements (else it may be a placeholder of its shape)
  unsigned dims; // the op's leading dims it has (TensorInfo::dims)
  int chunks;    // a packed argument's chunks of D (TensorInfo::chunks)
};

// The checked, contiguous form of an op's tensor arguments.
template <class B> struct Prepared {
  std::vector<typename B::Tensor> tensors; // contiguous, in argument order
  std::vector<int64_t> fullShape;          // shape of the full tensors (and of full outputs)
  int64_t rows = 0;
  int64_t D = 1;
  TType dtype = TType::Float32;
  DeviceId device;
  int namedDims = 0;
  int64_t dims[kMaxNamedDims] = {}; // the named leading dims' sizes (the full input's)
};

template <class B> std::string dtypeName(const typename B::Tensor& t) {
  const TType type = B::type(t);
  return type == TType::Other ? B::typeName(t) : std::string(typeName(type));
}

// The shape of a tensor with the leading dims `keep` of p's (not the batch's), and D if `withD`.
template <class B> std::vector<int64_t> keptShape(const Prepared<B>& p, unsigned keep, bool withD) {
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
template <class B>
void checkMapped(const char* op, const TensorArg<B>& a, const char* refName,
                 const typename B::Tensor& ref, const Prepared<B>& p, const char* const* names) {
  const bool withD = a.bcast == Bcast::Full || a.bcast == Bcast::TypedFull;
  const std::vector<int64_t> want = keptShape(p, a.dims, withD);
  const auto& t = a.tensor;
  FG_CHECK(B::dim(t) == static_cast<int64_t>(want.size()), op, ": argument '", a.name,
           "' must have shape ", dimsSpelling(names, p.namedDims, a.dims, withD), " = ",
           shapeString(want), " (from '", refName, "' ", shapeString(B::sizes(ref)),
           "), but has shape ", shapeString(B::sizes(t)));
  int64_t k = 0;
  for (int i = 0; i < p.namedDims; ++i) {
    if (!((a.dims >> i) & 1u)) continue;
    FG_CHECK(B::size(t, k) == p.dims[i], op, ": argument '", a.name, "' has ", names[i], " = ",
             B::size(t, k), " (dim ", k, " of ", shapeString(B::sizes(t)), ") where '", refName,
             "' has ", names[i], " = ", p.dims[i]);
    ++k;
  }
  FG_CHECK(!withD || B::size(t, k) == p.D, op, ": argument '", a.name,
           "' has D = ", withD ? B::size(t, k) : 0, " (its last dim) where '", refName,
           "' has D = ", p.D);
}

// A result written per element (or row) of the op that the glue sums over the leading dims
// not in `keep` (the gradient of an input broadcast over them), in the compute type, then
// stored in `dtype`.
template <class B>
typename B::Tensor sumToKept(const typename B::Tensor& t, const Prepared<B>& p, unsigned keep,
                             bool withD, TType dtype) {
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
  return B::sumTo(t, view, sumDims, dtype, keptShape(p, keep, withD));
}

// `full` is the index of the full input that defines D and the output shape; `dtypeArg` that
// of the float input whose dtype is the call's (the same one unless `full` holds integers).
template <class B>
Prepared<B> prepare(const char* op, const std::vector<TensorArg<B>>& args, int full, int dtypeArg,
                    const std::vector<TType>& dtypes, int namedDims, const char* const* dimNames) {
  const auto& ref = args[full].tensor;
  const char* refName = args[full].name;
  const auto& typeRef = args[dtypeArg].tensor;
  const char* typeRefName = args[dtypeArg].name;
  Prepared<B> p;
  p.dtype = B::type(typeRef);
  p.device = B::device(ref);
  bool hasCol = false;
  for (const TensorArg<B>& a : args)
    hasCol = hasCol || a.bcast == Bcast::Col;
  for (const TensorArg<B>& a : args) {
    if (a.bcast == Bcast::Random || a.bcast == Bcast::Position) // no tensor: the plan makes it
      continue;
    FG_CHECK(B::defined(a.tensor), op, ": argument '", a.name, "' is an undefined tensor");
    const TType type = B::type(a.tensor);
    if (a.elem == Elem::Compute) { // a whole-tensor value saved by the forward
      FG_CHECK(type == computeType(p.dtype), op, ": argument '", a.name, "' has dtype ",
               dtypeName<B>(a.tensor), ", but must have dtype ", typeName(computeType(p.dtype)),
               " (the compute type of '", typeRefName, "', ", dtypeName<B>(typeRef), ")");
    } else if (a.elem != Elem::Dtype) { // an integer or bool input: its own dtype, as the spec says
      FG_CHECK(type == elemType(a.elem), op, ": argument '", a.name, "' has dtype ",
               dtypeName<B>(a.tensor), ", but must have dtype ", typeName(elemType(a.elem)));
    } else if (a.bcast == Bcast::Stat) { // a statistic saved by the forward, in the compute type
      FG_CHECK(type == computeType(p.dtype), op, ": argument '", a.name, "' has dtype ",
               dtypeName<B>(a.tensor), ", but must have dtype ", typeName(computeType(p.dtype)),
               " (the compute type of '", typeRefName, "', ", dtypeName<B>(typeRef), ")");
    } else {
      bool supported = false;
      for (TType t : dtypes)
        supported = supported || type == t;
      if (!supported) { // the message is built only when it is needed (this runs every call)
        std::string list;
        for (TType t : dtypes)
          list += (list.empty() ? "" : ", ") + std::string(typeName(t));
        FG_CHECK(false, op, ": argument '", a.name, "' has dtype ", dtypeName<B>(a.tensor),
                 ", but this op supports ", list);
      }
      FG_CHECK(type == p.dtype, op, ": argument '", a.name, "' has dtype ", dtypeName<B>(a.tensor),
               ", but '", typeRefName, "' has dtype ", dtypeName<B>(typeRef),
               "; all tensor arguments must have the same dtype");
    }
    FG_CHECK(B::device(a.tensor) == p.device, op, ": argument '", a.name, "' is on ",
             B::deviceName(a.tensor), ", but '", refName, "' is on ", B::deviceName(ref),
             "; all tensor arguments must be on the same device");
  }
  const int64_t refDim = B::dim(ref);
  const Sizes refSizes = B::sizes(ref);
  FG_CHECK(!hasCol || refDim >= 1, op, ": argument '", refName,
           "' must have at least 1 dim (its last dim is D), but is 0-dim");
  p.D = refDim >= 1 ? refSizes[refDim - 1] : 1;
  const int refChunks = args[full].chunks;
  if (refChunks > 1) { // a packed full input: [..., chunks * D]
    FG_CHECK(refDim >= 1 && p.D % refChunks == 0, op, ": argument '", refName,
             "' is packed ([..., ", refChunks, "*D]): its last dim must be a multiple of ",
             refChunks, ", but its shape is ", shapeString(refSizes));
    p.D /= refChunks;
  }
  p.fullShape = refSizes.vec();
  if (!p.fullShape.empty()) p.fullShape.back() = p.D;
  p.rows = 1; // the leading dims: rows exist with D == 0 too (their reductions are empty)
  for (size_t i = 0; i + 1 < p.fullShape.size(); ++i)
    p.rows *= p.fullShape[i];
  p.namedDims = namedDims;
  if (namedDims > 0) {
    FG_CHECK(refDim >= namedDims + 1, op, ": argument '", refName, "' must have at least ",
             namedDims + 1, " dims [..., ",
             dimsSpelling(dimNames, namedDims, kAllDims, true).substr(1), ", but has shape ",
             shapeString(refSizes));
    for (int i = 0; i < namedDims; ++i)
      p.dims[i] = refSizes[refDim - 1 - namedDims + i];
  }
  for (const TensorArg<B>& a : args) {
    const auto& t = a.tensor;
    if (a.dims != kAllDims && a.bcast != Bcast::Position && a.bcast != Bcast::Random &&
        a.bcast != Bcast::Unread) {
      checkMapped(op, a, refName, ref, p, dimNames);
      p.tensors.push_back(a.read ? B::contiguous(t) : typename B::Tensor());
      continue;
    }
    switch (a.bcast) {
    case Bcast::Full:
      if (a.chunks > 1 || refChunks > 1) { // [..., chunks*D] against the op's [..., D]
        std::vector<int64_t> want = p.fullShape;
        if (!want.empty()) want.back() *= a.chunks;
        FG_CHECK(B::sizes(t) == want, op, ": argument '", a.name, "' must have shape ",
                 shapeString(want), " (the leading dims of '", refName, "' and ",
                 a.chunks > 1 ? std::to_string(a.chunks) + " x " : std::string(), "D = ", p.D,
                 "), but has shape ", shapeString(B::sizes(t)));
        break;
      }
      FG_CHECK(B::sizes(t) == refSizes, op, ": argument '", a.name,
               "' must have the same shape as '", refName, "' ", shapeString(refSizes),
               ", but has shape ", shapeString(B::sizes(t)));
      break;
    case Bcast::Col:
      FG_CHECK(B::dim(t) == 1 && B::size(t, 0) == p.D, op, ": argument '", a.name,
               "' must have shape [D] with D = ", p.D, " (the last dim of '", refName,
               "'), but has shape ", shapeString(B::sizes(t)));
      break;
    case Bcast::Row:
    case Bcast::Stat: {
      std::vector<int64_t> rowShape(p.fullShape.begin(), p.fullShape.end() - (refDim ? 1 : 0));
      FG_CHECK(B::sizes(t) == rowShape, op, ": argument '", a.name, "' must have shape ",
               shapeString(rowShape), " (the leading dims of '", refName, "'), but has shape ",
               shapeString(B::sizes(t)));
      break;
    }
    case Bcast::Scalar:
      FG_CHECK(B::dim(t) == 0, op, ": argument '", a.name,
               "' must be a 0-dim tensor, but has shape ", shapeString(B::sizes(t)));
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
    p.tensors.push_back(a.read ? B::contiguous(t)
                               : typename B::Tensor()); // (an unread placeholder)
  }
  return p;
}

// The (seed, offset) a backward reads, as its forward returned it.
template <class B>
void checkRngState(const char* op, const typename B::Tensor& t, const DeviceId& device,
                   const std::string& deviceName) {
  FG_CHECK(B::defined(t) && B::type(t) == TType::Int64 && B::dim(t) == 1 && B::size(t, 0) == 2 &&
               B::isContiguous(t),
           op,
           ": argument '_saved_rng' must be the int64 [2] tensor (seed, offset) the "
           "forward returned");
  FG_CHECK(B::device(t) == device, op, ": argument '_saved_rng' is on ", B::deviceName(t),
           ", but the op's tensors are on ", deviceName);
}

// Runs one plan of an op (fusegen_glue.h): checks and prepares the tensors, allocates the
// results (skipping those not in `need`) and calls the plan for the tensors' device. A random
// op's forward draws a seed and offset (backend.drawRng) and returns them last; its backward
// reads `rngState`. `earlier`: the results of the programs run before it (PlanInfo::before),
// which its Passed outputs are.
template <class B>
std::vector<typename B::Tensor>
runPlan(B& backend, const PlanInfo& plan, const std::vector<TensorArg<B>>& args,
        const std::vector<double>& spanAttrs, const std::vector<bool>& need,
        const typename B::Tensor* rngState, const std::vector<typename B::Tensor>& earlier) {
  using Tensor = typename B::Tensor;
  std::vector<TType> dtypes;
  for (int k = 0; k < plan.nDtypes; ++k)
    dtypes.push_back(toTType(plan.dtypes[k]));
  Prepared<B> p =
      prepare<B>(plan.op, args, plan.full, plan.dtype, dtypes, plan.namedDims, plan.dimNames);
  // The number of rows, where a formula reads it: in the attr slot after the spec's.
  std::vector<double> attrs(spanAttrs.begin(), spanAttrs.end());
  if (plan.rowsAttr) attrs.push_back(static_cast<double>(p.rows));
  attrs.insert(attrs.end(), static_cast<size_t>(plan.rollAttrs),
               0.0);  // (the program fills them: withRolls)
  if (plan.columns) { // [D] values: one row of D
    p.rows = 1;
    p.fullShape = {p.D};
  }
  const char* fullName = args[plan.full].name;
  // The column index reaches the program in the compute type: exact in float32 up to 2^24.
  FG_CHECK(!plan.column || p.dtype == TType::Float64 || p.D <= (int64_t(1) << 24), plan.op,
           ": the last dim of '", fullName, "' is ", p.D,
           "; this op reads the column index, which is exact in float32 up to 2^24 = 16777216 "
           "columns (float64 inputs have no such limit)");
  FG_CHECK(!*plan.evenD || p.D % 2 == 0, plan.op, ": the last dim of '", fullName, "' is ", p.D,
           "; this op ", plan.evenD, ", which needs an even last dim");
  // The GPU's row plan indexes a row's vectors in 32 bits (fusegen_row_cuda.cuh).
  FG_CHECK((plan.plan != Plan::Row && plan.plan != Plan::Groups) || !p.device.isCuda() ||
               p.D <= std::numeric_limits<int32_t>::max(),
           plan.op, ": the last dim of '", fullName, "' is ", p.D,
           "; this op reduces over it, which on the GPU takes rows of at most 2^31 - 1 = "
           "2147483647 elements");
  const Tensor& like = args[plan.full].tensor; // (p.tensors: undefined where unread)
  const typename B::DeviceGuard guard(like);
  std::vector<int64_t> rowShape(p.fullShape.begin(),
                                p.fullShape.end() - (p.fullShape.empty() ? 0 : 1));
  // A row plan's rows exist with D == 0 too: their reductions are empty (a sum is 0, a max
  // -inf). A flat or colwise program has nothing to compute without elements.
  const bool empty = plan.plan == Plan::Row ? p.rows == 0 : p.rows * p.D == 0;
  std::vector<Tensor> results;
  std::vector<void*> resultData;
  std::vector<char> handedOut(earlier.size(), 0); // earlier results returned as they are
  for (int m = 0; m < plan.nResults; ++m) {
    Tensor t;
    // An output of its own type (float32, FP8) is allocated as that type.
    const TType type = plan.elems[m] == Elem::Dtype     ? p.dtype
                       : plan.elems[m] == Elem::Compute ? computeType(p.dtype)
                                                        : elemType(plan.elems[m]);
    auto alloc = [&](const std::vector<int64_t>& shape, bool zeroed) {
      return zeroed ? B::zeros(shape, type, like) : B::empty(shape, type, like);
    };
    if (!need[m]) {
      t = B::empty({0}, type, like);
    } else if (plan.kinds[m] == OutKind::Passed) { // an earlier program's result: itself
      // where it has this output's type and no output before took it, else a copy (results
      // do not alias, and one may be both a [D] output and a saved statistic). A copy is a
      // kernel launch: BatchNorm's forward made four.
      const int r = plan.results[m];
      if (!handedOut[r] && B::type(earlier[r]) == type) {
        t = earlier[r];
        handedOut[r] = 1;
      } else {
        t = B::copyAs(earlier[r], type);
      }
    } else if (plan.keeps[m] != kAllDims) { // summed over the dims not kept, below
      t = alloc(plan.kinds[m] == OutKind::Row ? rowShape : p.fullShape, empty);
    } else if (plan.kinds[m] == OutKind::ColSum || plan.kinds[m] == OutKind::ColM2) {
      // (a sum over no rows is zero)
      t = alloc({p.D}, empty);
    } else if (plan.kinds[m] == OutKind::Total || plan.kinds[m] == OutKind::Scalar) {
      t = alloc({}, empty);
    } else if (plan.kinds[m] == OutKind::Stat) { // saved statistics: the compute type
      t = B::empty(rowShape, computeType(p.dtype), like);
    } else if (plan.chunks[m] > 1) { // a packed gradient: [..., chunks * D]
      std::vector<int64_t> shape = p.fullShape;
      shape.back() *= plan.chunks[m];
      t = alloc(shape, false);
    } else {
      t = alloc(plan.kinds[m] == OutKind::Row ? rowShape : p.fullShape, false);
    }
    resultData.push_back(need[m] && plan.kinds[m] != OutKind::Passed ? B::data(t) : nullptr);
    results.push_back(t);
  }
  // The other chunks of packed gradients write into their chunk 0's tensor; the program does
  // not write the Passed outputs.
  std::vector<char> needed(need.begin(), need.end()); // (bool elements, addressable)
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
    Tensor state;
    rng = backend.drawRng(like, 4 * static_cast<uint64_t>(plan.randomStreams), empty, state);
    results.push_back(state);
  } else if (plan.randomStreams > 0) { // a backward: the forward's draw
    checkRngState<B>(plan.op, *rngState, p.device, B::deviceName(like));
    rng.seedPtr = static_cast<const int64_t*>(B::data(*rngState));
    rng.offsetPtr = rng.seedPtr + 1;
  }
  bool finish = false; // [] outputs computed after every row: over no rows too
  for (int m = 0; m < plan.nResults; ++m)
    finish = finish || plan.kinds[m] == OutKind::Scalar;
  // The results summed over leading dims (the gradients of inputs broadcast over them).
  auto sumResults = [&]() {
    for (int m = 0; m < plan.nResults; ++m)
      if (need[m] && plan.keeps[m] != kAllDims)
        results[m] =
            sumToKept(results[m], p, plan.keeps[m], plan.kinds[m] != OutKind::Row, p.dtype);
  };
  if (empty && !finish) {
    sumResults();
    return results;
  }
  std::vector<const void*> tensorData;
  for (const Tensor& t : p.tensors)
    tensorData.push_back(B::defined(t) ? B::data(t) : nullptr);
  static_assert(sizeof(bool) == sizeof(char), "Call::need reads the flags as bools");
  Call c{toDType(p.dtype),
         tensorData.data(),
         resultData.data(),
         reinterpret_cast<const bool*>(needed.data()),
         attrs.data(),
         p.rows,
         p.D,
         p.dims,
         nullptr,
         rng};
  if (p.device.isCuda()) {
    FG_CHECK(plan.cuda != nullptr, plan.op, ": this package was built without CUDA");
    // The CUDA plans' scratch memory (partial sums of [D] gradients) when they need any: only
    // plans that sum [D] gradients do, and an empty tensor would still cost an allocation call
    // per launch (about 4 us of host time at launch-bound sizes).
    Tensor workspace;
    const size_t bytes = plan.cudaWorkspace ? plan.cudaWorkspace(c) : 0;
    if (bytes > 0) {
      workspace = B::empty({static_cast<int64_t>(bytes)}, TType::UInt8, like);
      c.workspace = B::data(workspace);
    }
    plan.cuda(c, B::stream(like));
  } else {
    plan.cpu(c);
  }
  sumResults();
  return results;
}

// One call of an op's forward or backward plan: the programs before it (reductions over the
// rows, whose results follow the schema's tensors), then the plan. `tensors`: the schema's
// tensor arguments in order; attrs as doubles; need: per result (the backward's output_mask).
template <class B>
std::vector<typename B::Tensor> runOp(B& backend, const PlanInfo& plan,
                                      const std::vector<const typename B::Tensor*>& tensors,
                                      const std::vector<double>& attrs, std::vector<bool> need) {
  using Tensor = typename B::Tensor;
  if (need.empty()) need.assign(plan.nResults, true);
  FG_CHECK(static_cast<int>(need.size()) == plan.nResults, plan.op, ": output_mask has ",
           need.size(), " entries for ", plan.nResults, " results");
  static const Tensor kNone; // a Random input's: the plan draws it
  const size_t schemaTensors = tensors.size();
  std::vector<Tensor> earlier;
  auto tensorArgs = [&](const PlanInfo& q) {
    std::vector<TensorArg<B>> out;
    out.reserve(q.nTensors);
    for (int k = 0; k < q.nTensors; ++k) {
      const TensorInfo& t = q.tensors[k];
      const Tensor& tensor = t.position < 0 ? kNone
                             : static_cast<size_t>(t.position) < schemaTensors
                                 ? *tensors.at(t.position)
                                 : earlier.at(t.position - schemaTensors);
      out.push_back(TensorArg<B>{t.name, tensor, t.bcast, t.elem, t.read, t.dims, t.chunks});
    }
    return out;
  };
  for (int q = 0; q < plan.nBefore; ++q) {
    const PlanInfo& before = plan.before[q];
    const std::vector<bool> all(before.nResults, true);
    for (Tensor& t : runPlan(backend, before, tensorArgs(before), attrs, all, nullptr, {}))
      earlier.push_back(std::move(t));
  }
  const Tensor* rngState = plan.rngTensor >= 0 ? tensors.at(plan.rngTensor) : nullptr;
  return runPlan(backend, plan, tensorArgs(plan), attrs, need, rngState, earlier);
}

} // namespace fg::glue
