// The schema spelling of an op's interface.
#include "emit/api/Spellings.h"

#include <cmath>
#include <cstdio>

namespace fusegen::emit::api {

namespace {

std::string typeName(const plan::Arg& a) {
  if (a.isTensor()) return "Tensor";
  if (a.type == plan::ElemType::BoolList) return "bool[" + std::to_string(a.length) + "]";
  if (a.type == plan::ElemType::Generator) return "Generator?";
  return scalarTypeName(a.type);
}

// A float as torch prints a parsed schema's default (IValue's printer): an integral value
// below 1e10 as "3.", any other with 17 significant digits.
std::string schemaFloat(double v) {
  const int cls = std::fpclassify(v);
  if ((cls == FP_NORMAL || cls == FP_ZERO) && std::fabs(v) < 1e10 &&
      static_cast<double>(static_cast<long long>(v)) == v)
    return (std::signbit(v) && v == 0 ? "-" : "") + std::to_string(static_cast<long long>(v)) + ".";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

} // namespace

const char* scalarTypeName(plan::ElemType t) {
  switch (t) {
  case plan::ElemType::Float:
    return "float";
  case plan::ElemType::Int:
    return "int";
  default:
    return "bool";
  }
}

std::string defaultLiteral(const plan::Arg& a, std::string (*spellFloat)(double)) {
  const double v = *a.defaultValue;
  if (a.type == plan::ElemType::Bool) return v != 0 ? "True" : "False";
  if (a.type == plan::ElemType::Int) return std::to_string(static_cast<long long>(v));
  return spellFloat(v);
}

std::string schema(const plan::Signature& sig) {
  std::string params;
  bool keywords = false;
  for (const plan::Arg& a : sig.params) {
    if (!params.empty()) params += ", ";
    if (a.keywordOnly && !keywords) {
      params += "*, ";
      keywords = true;
    }
    // (torch's schema parser reads no infinite float: such a default is the Python
    // function's alone, and the attr, keyword-only, is passed by every caller of the schema)
    const bool spelled = a.defaultValue && std::isfinite(*a.defaultValue);
    params += typeName(a) + " " + a.name +
              (a.type == plan::ElemType::Generator ? "=None"
               : spelled                           ? "=" + defaultLiteral(a, schemaFloat)
                                                   : "");
  }
  std::string results;
  for (const plan::Arg& r : sig.results)
    results += (results.empty() ? "" : ", ") + typeName(r);
  if (sig.results.size() != 1) results = "(" + results + ")";
  return sig.name + "(" + params + ") -> " + results;
}

} // namespace fusegen::emit::api
