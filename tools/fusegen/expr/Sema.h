// Sema: resolves a formula's names and calls and lowers it to IR, checking arity, value
// types (conditions vs values), constant parameters and reductions. lowerOp does this for a
// whole spec and adds the op-level checks (unused inputs, outputs that depend on nothing,
// output shapes, names that clash with primitives).
#pragma once

#include "expr/Ast.h"
#include "ir/Function.h"
#include "prims/PrimitiveLibrary.h"
#include "spec/SpecModel.h"
#include "support/Diagnostics.h"

#include <map>
#include <optional>

namespace fusegen::expr {

using Scope = std::map<std::string, ir::Expr>;

class Sema {
public:
  Sema(const prims::PrimitiveLibrary& lib, Diagnostics& diags) : lib_(lib), diags_(diags) {}

  // Returns null when an error was reported.
  ir::Expr lower(const AstPtr& ast, const Scope& scope);

private:
  ir::Expr lowerCall(const AstPtr& ast, const Scope& scope);

  const prims::PrimitiveLibrary& lib_;
  Diagnostics& diags_;
};

std::optional<ir::Function> lowerOp(const spec::OpSpec& spec, const prims::PrimitiveLibrary& lib,
                                    Diagnostics& diags);

} // namespace fusegen::expr
