// CodePrinter: prints IR as straight-line code, one statement per node in topological
// order (SSA), for the two targets of an op: C++ (the element functions shared by the CPU
// and CUDA plans, in the compute type T) and PyTorch (the reference implementation).
// Leaves print as the names the surrounding template declares: inputs and attrs by their
// spec names, output gradients as _grad_<output>; temporaries are _t0, _t1, ... (spec names
// cannot start with '_', so they never clash).
#pragma once

#include "ir/Node.h"

#include <string>
#include <vector>

namespace fusegen::emit {

struct Assignment {
  std::string target; // an lvalue (C++) or a variable name (Python)
  ir::Expr value;     // null means zero
};

// Statements computing every assignment, indented by `indent` spaces.
std::string printCpp(const std::vector<Assignment>& assignments, int indent);
std::string printPython(const std::vector<Assignment>& assignments, int indent);

// The C++ spelling of a literal in the compute type: T(0.5).
std::string cppLiteral(double v);
std::string pythonLiteral(double v);

} // namespace fusegen::emit
