// Spellings of an op's interface (plan/OpInterface.h), one small function per target, the
// way torchgen's api/ modules spell one FunctionSchema: the dispatcher schema (Schema.cpp),
// the Python signatures (Python.cpp) and the C++ tables the shared glue reads (Cpp.cpp).
// Each reads only the interface; the templates place what they return.
#pragma once

#include "plan/OpInterface.h"

#include <string>
#include <vector>

namespace fusegen::emit::api {

// ---- Schema.cpp: torch's function schema language ----
// "rmsnorm(Tensor x, Tensor w, *, float eps=9.9999999999999995e-07) -> (Tensor, Tensor)":
// as torch prints a schema it parsed, so a generated test round-trips it through
// torch._C.parse_schema unchanged.
std::string schema(const plan::Signature& sig);
// A scalar's type as the schema and Python both spell it: float, int, bool.
const char* scalarTypeName(plan::ElemType t);
// An attr's default, its floats spelled by `spellFloat`: True, 3, spellFloat(v).
std::string defaultLiteral(const plan::Arg& a, std::string (*spellFloat)(double));

// ---- Python.cpp ----
// An attr's default in Python: True, 3, 1e-06.
std::string pythonDefault(const plan::Arg& a);
// The parameters of a Python function with the signature's params: "x: Tensor, *, eps:
// float = 1e-06" (annotated), or "x, *, eps=1e-06" (as torch.library passes them to a fake).
std::string pythonParams(const plan::Signature& sig, bool annotated);
// The arguments of a call forwarding those parameters: "x, eps=eps".
std::string pythonCallArgs(const plan::Signature& sig);
// The user-facing return: the type ("Tensor", "tuple[Tensor, Tensor]") and the expression
// taking it from the op's `result` (which also holds the saved values).
std::string pythonReturnType(const plan::Signature& sig);
std::string pythonUserResult(const plan::Signature& sig);

// ---- Cpp.cpp: the glue's tables (fusegen_glue.h) ----
// The program's tensor inputs as glue::TensorInfo initializers: name, broadcast, position
// among the schema's tensors, element type, whether the program reads it.
std::vector<std::string> tensorTable(const plan::Signature& sig, const plan::Program& program);
// fg::DType::Float32, ...
std::vector<std::string> dtypeTable(const std::vector<spec::DType>& dtypes);
// The runtime's enumerators for a program's tables (fusegen_runtime.h, fusegen_program.h).
const char* bcastEnumerator(ir::ShapeClass s, bool stat);
// How a program reads input `in` (its table InBcasts): the above, or Random, Unread, TypedFull
// and TypedCol (fusegen_runtime.h).
const char* programBcastEnumerator(const plan::Program::Input& in);
// A mask of leading dims (Program::Input::dims) as a C++ literal: fg::kAllDims for all.
std::string dimMaskLiteral(unsigned mask);
// A move as the runtime's enumerator: fg::Move::SwapHalves.
const char* moveEnumerator(prims::Move m);
const char* elemEnumerator(spec::InputType t);
// What input `in`'s elements are to the program (its table InElems): the above, or Compute for
// a whole-tensor value the forward saved.
const char* programElemEnumerator(const plan::Program::Input& in);
const char* outElemEnumerator(spec::OutputType t);
// An output's dtype as torch names it (float8_e4m3fn, ...); null for the op's dtype.
const char* outputDtypeName(plan::ElemType t);
const char* outKindEnumerator(plan::OutKind k);
const char* reduceEnumerator(prims::Combine c);
const char* planEnumerator(plan::RuntimePlan p);

} // namespace fusegen::emit::api
