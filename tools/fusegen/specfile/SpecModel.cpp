// Spellings of the spec model's enums, shared by diagnostics and emitters, and the inputs'
// dims against the op's.
#include "specfile/SpecModel.h"

namespace fusegen::spec {

const char* attrTypeName(AttrType t) {
  switch (t) {
  case AttrType::Float:
    return "float";
  case AttrType::Int:
    return "int";
  case AttrType::Bool:
    return "bool";
  }
  return "?";
}

const char* inputTypeName(InputType t) {
  switch (t) {
  case InputType::Dtype:
    return "the op's dtype";
  case InputType::Int64:
    return "int64";
  case InputType::Int32:
    return "int32";
  case InputType::Int8:
    return "int8";
  case InputType::UInt8:
    return "uint8";
  case InputType::Bool:
    return "bool";
  }
  return "?";
}

const InputType kDeclarableInputTypes[5] = {InputType::Int64, InputType::Int32, InputType::Int8,
                                            InputType::UInt8, InputType::Bool};

const OutputType kDeclarableOutputTypes[8] = {
    OutputType::Float32, OutputType::Float8E4M3, OutputType::Float8E5M2, OutputType::Int8,
    OutputType::UInt8,   OutputType::Int32,      OutputType::Int64,      OutputType::Bool};

const char* outputTypeName(OutputType t) {
  switch (t) {
  case OutputType::Dtype:
    return "the op's dtype";
  case OutputType::Float32:
    return "float32";
  case OutputType::Float8E4M3:
    return "float8_e4m3fn";
  case OutputType::Float8E5M2:
    return "float8_e5m2";
  case OutputType::Int8:
    return "int8";
  case OutputType::UInt8:
    return "uint8";
  case OutputType::Int32:
    return "int32";
  case OutputType::Int64:
    return "int64";
  case OutputType::Bool:
    return "bool";
  case OutputType::Compute:
    return "the compute type";
  }
  return "?";
}

const char* dtypeName(DType d) {
  switch (d) {
  case DType::Float32:
    return "float32";
  case DType::Float16:
    return "float16";
  case DType::BFloat16:
    return "bfloat16";
  case DType::Float64:
    return "float64";
  }
  return "?";
}

unsigned inputDimMask(const OpSpec& spec, const Input& in) {
  const unsigned batchBit = 1u << spec.dims.size();
  if (in.shape == ShapeClass::Col || in.shape == ShapeClass::Scalar) return 0;
  if (in.batch) return fullDimMask(spec);
  unsigned mask = 0;
  for (const std::string& d : in.dims)
    for (size_t i = 0; i < spec.dims.size(); ++i)
      if (spec.dims[i] == d) mask |= 1u << i;
  return mask & ~batchBit;
}

unsigned fullDimMask(const OpSpec& spec) {
  return (2u << spec.dims.size()) - 1;
}

bool isMapped(const OpSpec& spec, const Input& in) {
  return (in.shape == ShapeClass::Full || in.shape == ShapeClass::Row) &&
         inputDimMask(spec, in) != fullDimMask(spec);
}

std::string inputShapeSpelling(const Input& in) {
  if (in.dims.empty() && in.chunks == 1) return shapeClassSpelling(in.shape);
  std::string out = in.batch ? "[..., " : "[";
  for (const std::string& d : in.dims)
    out += d + ", ";
  const bool hasD = in.shape == ShapeClass::Full || in.shape == ShapeClass::Col;
  if (hasD)
    out += in.chunks > 1 ? std::to_string(in.chunks) + "*D" : "D";
  else
    out.resize(out.size() - 2);
  return out + "]";
}

} // namespace fusegen::spec
