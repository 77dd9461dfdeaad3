// Simplify and CSE: passes that return new expressions (inputs are never modified).
// simplify() folds constants and removes algebraic identities (x*1, x+0, x*0, --x, ...)
// that reverse-mode AD produces in bulk; cse() makes structurally equal subexpressions one
// shared node, so a DAG printed as code computes each value once.
#pragma once

#include "ir/Function.h"
#include "ir/Node.h"
#include "prims/PrimitiveLibrary.h"

#include <unordered_map>
#include <utility>
#include <vector>

namespace fusegen::opt {

class Simplifier {
public:
  explicit Simplifier(const prims::PrimitiveLibrary& lib) : lib_(lib) {}
  // `e` with every call rewritten, arguments first. A node that no rule changes keeps its
  // identity, and every result is remembered for the simplifier's lifetime, so a node
  // shared by many expressions (reverse mode's adjoints all share the forward DAG) is
  // visited once: the work is proportional to the new nodes, not to the tree they unfold to.
  ir::Expr simplify(const ir::Expr& e);
  // Builds prim(args) and simplifies just that node (arguments are assumed simplified).
  ir::Expr call(const char* prim, std::vector<ir::Expr> args);
  // `value`, a sum over a row written another way (a per-row factor pulled out of it, or D
  // times one term), except where the row is empty (D = 0): there it is `empty`, what the sum
  // over no elements is. The rewritten form multiplies by a per-row factor that an empty row
  // can make NaN or infinite (a mean over it), and 0 * NaN is NaN. No guard is needed when
  // `factor` (the factor the sum no longer multiplies by) is a finite constant.
  ir::Expr unlessRowEmpty(const ir::Expr& empty, const ir::Expr& value,
                          const ir::Expr& factor = nullptr);
  // Every node reachable from `e` is left as it is by later calls (simplified to itself).
  // Reverse mode keeps the forward's nodes so: the backward refers to the very nodes the
  // forward computes, which the planner recognizes (by identity) as values to save, and
  // does not recompute a rewritten copy of them (exp(0) * x folded to x, say).
  void keep(const ir::Expr& e);

private:
  ir::Expr rewrite(const ir::Expr& e);
  ir::Expr simplified(const ir::Expr& e) const; // e's result, e itself for leaves
  void remember(const ir::Expr& e, const ir::Expr& result);

  const prims::PrimitiveLibrary& lib_;
  // node -> (the node, kept alive so its address is not reused; its simplified form)
  std::unordered_map<const ir::Node*, std::pair<ir::Expr, ir::Expr>> done_;
};

// Returns `roots` rebuilt so that structurally equal subtrees are one node. Nodes are kept
// (same pointer) where nothing below them changed, and the first of equal nodes in the
// order of `roots` wins, so passing already-canonical expressions first preserves them.
std::vector<ir::Expr> cse(const std::vector<ir::Expr>& roots);

// `fn` with every with_grad(value, ...) replaced by its value, and the same in `backward`
// (the input gradients, which share the forward's nodes): run after reverse mode has used
// the stated derivatives, so the forward kernels and the eager reference compute values
// only, not the derivatives that with_grad carries. Both are rewritten alike and then
// shared (cse, the forward first), so a forward value the backward reads is still one
// node in both, as the planner expects. A with_surrogate_grad stays: its stated gradient is
// not value's derivative, so the reference must compute it too (the kernels print its value).
ir::Function dropStatedGradients(const ir::Function& fn, std::vector<ir::Expr>& backward);

} // namespace fusegen::opt
