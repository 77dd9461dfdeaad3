// FunctionImporter: custom primitives from C++. A spec may name a header of scalar
// `__host__ __device__` functions (float in, float out; a body of const locals and one
// return, calls to the standard math functions and to the header's other functions).
// The header is parsed with Clang (LibTooling) and each body is turned into a formula of
// the spec language, which Sema inlines at each call: the gradient is then derived by
// reverse mode like any other formula. What cannot be translated (loops, statements other
// than const locals and return, pointers, globals, other calls) is a diagnostic at the C++
// file's line and column.
//
// A function may instead state its derivatives: FUSEGEN_DERIVATIVE(f_dx, f_dy) before
// `float f(float x, float y)` names one function of the same parameters per parameter,
// defined in the same header; Sema then makes each call with_grad(f's body, x, f_dx(x, y),
// y, f_dy(x, y)) (templates/primitives.yaml), so reverse mode uses them instead of f's body.
#pragma once

#include "expr/Ast.h"
#include "support/Diagnostics.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fusegen::cxx {

struct UserFunction {
  std::string name;
  std::vector<std::string> params;
  expr::AstPtr body; // over the params; calls of primitives and of other user functions
  std::vector<std::string> derivatives; // FUSEGEN_DERIVATIVE: one function per param, or none
  SourceLoc loc;
};

using UserFunctions = std::map<std::string, UserFunction>;

// Parses `path` (its text given, for diagnostics) and translates every function it defines.
std::optional<UserFunctions> importFunctions(const std::string& path, const std::string& text,
                                             Diagnostics& diags);

} // namespace fusegen::cxx
