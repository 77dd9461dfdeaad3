// Spellings of the spec model's enums, shared by diagnostics and emitters.
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
  case InputType::Bool:
    return "bool";
  }
  return "?";
}

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

} // namespace fusegen::spec
