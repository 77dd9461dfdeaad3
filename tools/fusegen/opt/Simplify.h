// Simplify and CSE: passes that return new expressions (inputs are never modified).
// simplify() folds constants and removes algebraic identities (x*1, x+0, x*0, --x, ...)
// that reverse-mode AD produces in bulk; cse() makes structurally equal subexpressions one
// shared node, so a DAG printed as code computes each value once.
#pragma once

#include "ir/Function.h"
#include "ir/Node.h"
#include "prims/PrimitiveLibrary.h"

#include <vector>

namespace fusegen::opt {

class Simplifier {
public:
  explicit Simplifier(const prims::PrimitiveLibrary& lib) : lib_(lib) {}
  ir::Expr simplify(const ir::Expr& e) const;
  // Builds prim(args) and simplifies just that node (arguments are assumed simplified).
  ir::Expr call(const char* prim, std::vector<ir::Expr> args) const;

private:
  ir::Expr rewrite(const ir::Expr& e) const;
  const prims::PrimitiveLibrary& lib_;
};

// Returns `roots` rebuilt so that structurally equal subtrees are one node. Nodes are kept
// (same pointer) where nothing below them changed, and the first of equal nodes in the
// order of `roots` wins, so passing already-canonical expressions first preserves them.
std::vector<ir::Expr> cse(const std::vector<ir::Expr>& roots);

// `fn` with every with_grad(value, ...) replaced by its value. Run after reverse mode has
// used the stated derivatives: the forward kernels and the eager reference then compute
// values only, not the derivatives that with_grad carries.
ir::Function dropStatedGradients(const ir::Function& fn);

} // namespace fusegen::opt
