// The C++ spellings of an op's interface: the tables its registration file hands the shared
// glue, and the runtime's enumerators for a program's traits.
#include "emit/api/Spellings.h"

namespace fusegen::emit::api {

const char* bcastEnumerator(ir::ShapeClass s, bool stat) {
  if (stat && s == ir::ShapeClass::Row) return "fg::Bcast::Stat";
  switch (s) {
  case ir::ShapeClass::Full:
    return "fg::Bcast::Full";
  case ir::ShapeClass::Col:
    return "fg::Bcast::Col";
  case ir::ShapeClass::Row:
    return "fg::Bcast::Row";
  case ir::ShapeClass::Scalar:
    break;
  }
  return "fg::Bcast::Scalar";
}

const char* programBcastEnumerator(const plan::Program::Input& in) {
  // (a [D] statistic in the compute type is read as a typed [D] input)
  const bool typed =
      in.type != spec::InputType::Dtype || (in.stat && in.shape == ir::ShapeClass::Col);
  if (in.random) return "fg::Bcast::Random";
  if (in.position) return "fg::Bcast::Position";
  if (!in.read) return "fg::Bcast::Unread";
  if (typed && in.shape == ir::ShapeClass::Full) return "fg::Bcast::TypedFull";
  if (typed && in.shape == ir::ShapeClass::Col) return "fg::Bcast::TypedCol";
  return bcastEnumerator(in.shape, in.stat);
}

const char* moveEnumerator(prims::Move m) {
  switch (m) {
  case prims::Move::SwapHalves:
    return "fg::Move::SwapHalves";
  case prims::Move::SwapPairs:
    return "fg::Move::SwapPairs";
  case prims::Move::Roll:
    return "fg::Move::Roll";
  case prims::Move::None:
    break;
  }
  return "fg::Move::None";
}

std::string dimMaskLiteral(unsigned mask) {
  return mask == ~0u ? "fg::kAllDims" : std::to_string(mask) + "u";
}

const char* elemEnumerator(spec::InputType t) {
  switch (t) {
  case spec::InputType::Int64:
    return "fg::Elem::Int64";
  case spec::InputType::Int32:
    return "fg::Elem::Int32";
  case spec::InputType::Int8:
    return "fg::Elem::Int8";
  case spec::InputType::UInt8:
    return "fg::Elem::UInt8";
  case spec::InputType::Bool:
    return "fg::Elem::Bool";
  case spec::InputType::Dtype:
    break;
  }
  return "fg::Elem::Dtype";
}

const char* programElemEnumerator(const plan::Program::Input& in) {
  // A whole-tensor value saved by the forward is read back in the compute type.
  return in.stat && (in.shape == ir::ShapeClass::Scalar || in.shape == ir::ShapeClass::Col)
             ? "fg::Elem::Compute"
             : elemEnumerator(in.type);
}

const char* outElemEnumerator(spec::OutputType t) {
  switch (t) {
  case spec::OutputType::Float32:
    return "fg::Elem::Float32";
  case spec::OutputType::Float8E4M3:
    return "fg::Elem::Float8E4M3";
  case spec::OutputType::Float8E5M2:
    return "fg::Elem::Float8E5M2";
  case spec::OutputType::Int8:
    return "fg::Elem::Int8";
  case spec::OutputType::UInt8:
    return "fg::Elem::UInt8";
  case spec::OutputType::Int32:
    return "fg::Elem::Int32";
  case spec::OutputType::Int64:
    return "fg::Elem::Int64";
  case spec::OutputType::Bool:
    return "fg::Elem::Bool";
  case spec::OutputType::Compute:
    return "fg::Elem::Compute";
  case spec::OutputType::Dtype:
    break;
  }
  return "fg::Elem::Dtype";
}

const char* outputDtypeName(plan::ElemType t) {
  switch (t) {
  case plan::ElemType::Float32:
    return "float32";
  case plan::ElemType::Float8E4M3:
    return "float8_e4m3fn";
  case plan::ElemType::Float8E5M2:
    return "float8_e5m2";
  case plan::ElemType::Int8:
    return "int8";
  case plan::ElemType::UInt8:
    return "uint8";
  default:
    return nullptr;
  }
}

const char* outKindEnumerator(plan::OutKind k) {
  switch (k) {
  case plan::OutKind::Full:
    return "fg::OutKind::Full";
  case plan::OutKind::Row:
    return "fg::OutKind::Row";
  case plan::OutKind::ColSum:
    return "fg::OutKind::ColSum";
  case plan::OutKind::Total:
    return "fg::OutKind::Total";
  case plan::OutKind::Scalar:
    return "fg::OutKind::Scalar";
  case plan::OutKind::Passed:
    return "fg::OutKind::Passed";
  case plan::OutKind::ColM2:
    return "fg::OutKind::ColM2";
  case plan::OutKind::Stat:
    break;
  }
  return "fg::OutKind::Stat";
}

const char* reduceEnumerator(prims::Combine c) {
  switch (c) {
  case prims::Combine::Sum:
    return "fg::Reduce::Sum";
  case prims::Combine::Max:
    return "fg::Reduce::Max";
  case prims::Combine::Min:
    break;
  }
  return "fg::Reduce::Min";
}

const char* planEnumerator(plan::RuntimePlan p) {
  switch (p) {
  case plan::RuntimePlan::Flat:
    return "fg::Plan::Flat";
  case plan::RuntimePlan::Colwise:
    return "fg::Plan::Colwise";
  case plan::RuntimePlan::Groups:
    return "fg::Plan::Groups";
  case plan::RuntimePlan::Row:
    break;
  }
  return "fg::Plan::Row";
}

std::vector<std::string> tensorTable(const plan::Signature& sig, const plan::Program& program) {
  std::vector<std::string> rows;
  int schemaTensors = 0;
  for (const plan::Arg& a : sig.params)
    schemaTensors += a.isTensor();
  // In the program's order; the shape class and element type are the interface's.
  for (const plan::Program::Input& in : program.inputs) {
    if (in.passed >= 0) { // an earlier program's [D] result: after the schema's tensors
      rows.push_back("{\"" + in.name + "\", fg::Bcast::Col, " +
                     std::to_string(schemaTensors + in.passed) + ", fg::Elem::Compute, " +
                     (in.read ? "true" : "false") + ", fg::kAllDims, 1}");
      continue;
    }
    if (in.random || in.position) { // drawn or computed by the runtime: no tensor
      rows.push_back("{\"" + in.name + "\", " + programBcastEnumerator(in) +
                     ", -1, fg::Elem::Dtype, true, " + dimMaskLiteral(in.dims) + ", 1}");
      continue;
    }
    int position = 0;
    const plan::Arg* arg = nullptr;
    const std::string& name = in.arg.empty() ? in.name : in.arg; // (a moved input: its tensor's)
    for (const plan::Arg& a : sig.params) {
      if (a.name == name) {
        arg = &a;
        break;
      }
      position += a.isTensor();
    }
    rows.push_back("{\"" + in.name + "\", " +
                   bcastEnumerator(arg->shape, arg->type == plan::ElemType::ComputeType) + ", " +
                   std::to_string(position) + ", " + programElemEnumerator(in) + ", " +
                   (in.read ? "true" : "false") + ", " + dimMaskLiteral(in.dims) + ", " +
                   std::to_string(in.chunks) + "}");
  }
  return rows;
}

std::vector<std::string> dtypeTable(const std::vector<spec::DType>& dtypes) {
  std::vector<std::string> out;
  for (spec::DType t : dtypes)
    switch (t) {
    case spec::DType::Float32:
      out.push_back("fg::DType::Float32");
      break;
    case spec::DType::Float16:
      out.push_back("fg::DType::Float16");
      break;
    case spec::DType::BFloat16:
      out.push_back("fg::DType::BFloat16");
      break;
    case spec::DType::Float64:
      out.push_back("fg::DType::Float64");
      break;
    }
  return out;
}

} // namespace fusegen::emit::api
