// CodePrinter: prints IR as straight-line code, one statement per node in topological
// order (SSA), for the three targets of an op: C++ (the element functions shared by the CPU
// and CUDA plans, in the compute type T), PyTorch (the reference implementation) and the
// reference's error bounds (Python over fusegen_ops.testing.Rounding: each primitive
// expanded through its `eval` formula, as the kernels compute it, builtin by builtin).
// Leaves print as the names the surrounding template declares: in C++ inputs as
// _in_<input>, attrs as _attr_<attr> (cppInputName, cppAttrName), output gradients as
// _grad_<output>; in Python by their spec names. Temporaries are _t0, _t1, ... (spec names
// cannot start with '_', so they never clash).
#pragma once

#include "ir/Node.h"
#include "prims/PrimitiveLibrary.h"

#include <functional>

#include <map>
#include <string>
#include <vector>

namespace fusegen::emit {

struct Assignment {
  std::string target; // an lvalue (C++) or a variable name (Python)
  ir::Expr value;     // null means zero
};

// Where values come from in a C++ function: a bound leaf (input, attr, output gradient) is
// declared once as `const T name = <binding>;`; any other bound node (a per-row value kept
// in registers, a reduction's result) is used as the given expression and not recomputed.
// D is always the parameter _D.
using Bindings = std::map<const ir::Node*, std::string>;

// The conditions that a program's element functions branch on and that are the same for
// every element (attrs, literals and D only: the lazy branches' conditions, the reductions'
// guards), numbered in the order first printed; structurally equal ones share a number. The
// code printed with them reads each through fg::uniform<U>(i, value) (fusegen_program.h), so
// that a kernel specialized for the values the op's defaults give folds every such branch:
// nvcc does not move a uniform branch out of an element loop, and each cost about 2
// instructions per element (cross_entropy's softcap and label smoothing).
class UniformConditions {
public:
  int indexOf(const ir::Expr& condition);
  const std::vector<ir::Expr>& conditions() const { return conditions_; }

private:
  std::vector<ir::Expr> conditions_;
};

// Statements computing every assignment, indented by `indent` spaces. With `uniforms`, the
// uniform conditions of lazy branches and the assignments of uniform conditions (guards) go
// through fg::uniform<U>.
std::string printCpp(const std::vector<Assignment>& assignments, int indent,
                     const Bindings& bindings, UniformConditions* uniforms = nullptr);
// like: the name of a float tensor of the op's dtype and device, for number values where
// torch would otherwise make a tensor of its default dtype (pythonScalarOperands); full: the
// name of the op's full input, whose rows the reductions over rows are over.
std::string printPython(const std::vector<Assignment>& assignments, int indent,
                        const std::string& like, const std::string& full);
// The same values as Python over `_r` (a testing.Rounding) and its bounded numbers: `a + b`,
// `_r.exp(a)`, `_r.sum(a)`..., each call node's `eval` (or a reduction and its `finish`)
// spelled builtin by builtin, so every rounding the kernels do is visible to the error
// model. Leaves print by name, D as _D; a node in `bound` is used as the given expression
// and not recomputed (a per-row value the backward reads back from the forward).
// Temporaries are <prefix>0, <prefix>1, ...
std::string printPythonBounds(const std::vector<Assignment>& assignments, int indent,
                              const Bindings& bound, const std::string& prefix);

// The C++ identifiers of a spec's inputs and attrs (parameters and locals of the generated
// C++). A spec name may be an object-like macro of a header the generated C++ includes
// (M_PI, INT_MAX, FG_HD, TORCH_API, ...), which cannot all be listed: printed with a prefix
// of '_' and a lower-case word, as the generated code's own locals are, it is never one.
// The schema, the Python code and the messages keep the spec's names.
std::string cppInputName(const std::string& name);
std::string cppAttrName(const std::string& name);

// A formula over builtins printed as C++, names resolved by `name`.
std::string cppFormula(const expr::AstPtr& formula,
                       const std::function<std::string(const std::string&)>& name);
// A reduction's result from its combined value `acc` (its `finish` formula, if any).
std::string cppReductionResult(const prims::Primitive& p, const std::string& acc);

// The C++ spelling of a literal in the compute type: T(0.5).
std::string cppLiteral(double v);
std::string pythonLiteral(double v);

} // namespace fusegen::emit
