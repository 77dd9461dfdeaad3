// Moves pushed down to the leaves (issue #17): a move permutes the columns of a row
// (prims::PrimKind::Move: swap_halves, swap_pairs), so a move of an elementwise expression is
// the expression of its moved arguments, m(f(a, b)) = f(m(a), m(b)), and a value the same in
// every column of its row (a reduction, a per-row input, an attr) is its own move. After
// pushMoves, a move applies only to a leaf that varies by column: an input or an output
// gradient, which the runtime reads at the moved column (fg::Move), or j, which the generated
// code computes at the moved column. The derived backward of a move is its inverse applied to
// computed values (rope's swap_halves(grad * sin)); this is what makes it a kernel.
#pragma once

#include "ir/Node.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace fusegen::opt {

struct PushedMoves {
  std::vector<ir::Expr> values; // the roots with moves on leaves only
  // Every node reachable from the roots -> its rebuilt node (itself where nothing changed).
  std::unordered_map<const ir::Node*, ir::Expr> rebuilt;
  // Why the moves cannot be pushed ("" when they were): a move of a move of another kind.
  std::string failure;
};

PushedMoves pushMoves(const std::vector<ir::Expr>& roots);

// Whether n is a move of a leaf: Call(move, {Input | GradOut | Column}), where a chunk of a
// packed input (chunk(x, c, n), prims::PrimKind::View) counts as a leaf.
bool isMovedLeaf(const ir::Node* n);
// Whether n is a leaf or a chunk of one (chunk(x, c, n) of an input).
bool isLeafView(const ir::Node* n);

} // namespace fusegen::opt
