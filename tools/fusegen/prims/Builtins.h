// Builtins: the small fixed set of math functions a primitive's `eval` formula may use.
// They are the layer under the primitives: each has one C++ spelling (the fg:: functions in
// templates/runtime/fusegen_math.h, valid on host and device) and one scalar evaluation
// (used by the interpreter for constant folding and the finite-difference tests). Adding a
// primitive never needs a new builtin unless it needs a new math function.
#pragma once

#include <string>
#include <vector>

namespace fusegen::prims {

struct Builtin {
  const char* name;
  int arity;
  bool returnsBool;
  double (*eval)(const double* args);
};

// Returns null when `name` is not a builtin.
const Builtin* findBuiltin(const std::string& name);
std::vector<std::string> builtinNames();

} // namespace fusegen::prims
