// The Python spellings of an op's interface: its wrapper's and fake's parameters.
#include "emit/api/Spellings.h"

#include "emit/CodePrinter.h"

namespace fusegen::emit::api {

namespace {

std::string annotation(const plan::Arg& a) {
  if (a.isTensor()) return "Tensor";
  if (a.type == plan::ElemType::Generator) return "Optional[torch.Generator]";
  return a.type == plan::ElemType::BoolList ? "list[bool]" : scalarTypeName(a.type);
}

std::string tupleOf(const std::string& element, size_t n) {
  if (n == 1) return element;
  std::string items;
  for (size_t i = 0; i < n; ++i)
    items += (i ? ", " : "") + element;
  return "tuple[" + items + "]";
}

} // namespace

std::string pythonDefault(const plan::Arg& a) {
  return defaultLiteral(a, pythonLiteral);
}

std::string pythonParams(const plan::Signature& sig, bool annotated) {
  std::string out;
  bool keywords = false;
  for (const plan::Arg& a : sig.params) {
    if (!out.empty()) out += ", ";
    if (a.keywordOnly && !keywords) {
      out += "*, ";
      keywords = true;
    }
    out += a.name;
    if (annotated) out += ": " + annotation(a);
    if (a.type == plan::ElemType::Generator) out += annotated ? " = None" : "=None";
    if (a.defaultValue) out += (annotated ? " = " : "=") + pythonDefault(a);
  }
  return out;
}

std::string pythonCallArgs(const plan::Signature& sig) {
  std::string out;
  for (const plan::Arg& a : sig.params)
    out += (out.empty() ? "" : ", ") + (a.keywordOnly ? a.name + "=" + a.name : a.name);
  return out;
}

std::string pythonReturnType(const plan::Signature& sig) {
  return tupleOf("Tensor", plan::argsWith(sig.results, plan::Role::Output).size());
}

std::string pythonUserResult(const plan::Signature& sig) {
  const size_t user = plan::argsWith(sig.results, plan::Role::Output).size();
  if (user == sig.results.size()) return "result";
  return user == 1 ? "result[0]" : "tuple(result[:" + std::to_string(user) + "])";
}

} // namespace fusegen::emit::api
