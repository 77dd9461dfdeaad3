// Moves pushed down to the leaves (issue #17): a move permutes the columns of a row
// (prims::PrimKind::Move: swap_halves, swap_pairs, roll), so a move of an elementwise expression
// is the expression of its moved arguments, m(f(a, b)) = f(m(a), m(b)), and a value the same in
// every column of its row (a reduction, a per-row input, an attr) is its own move. A move of a
// moved value is one move where the algebra is exact (prims::movesCompose): two swaps of one
// kind cancel, roll(roll(x, a), b) = roll(x, a + b), and swap_halves is a roll by D/2 (D even),
// so it composes with rolls. After pushMoves, a move applies only to a leaf that varies by
// column: an input or an output gradient, which the runtime reads at the moved column
// (fg::Move), or j, which the generated code computes at the moved column. The derived
// backward of a move is its inverse applied to computed values (rope's swap_halves(grad * sin),
// roll(grad * mu, -k)); this is what makes it a kernel.
#pragma once

#include "ir/Node.h"
#include "prims/PrimitiveLibrary.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace fusegen::opt {

struct PushedMoves {
  std::vector<ir::Expr> values; // the roots with moves on leaves only
  // Every node reachable from the roots -> its rebuilt node (itself where nothing changed).
  std::unordered_map<const ir::Node*, ir::Expr> rebuilt;
  // Why the moves cannot be pushed ("" when they were): a move of a moved value that is not one
  // move ('swap_pairs' of a value moved by 'roll').
  std::string failure;
};

// `lib` gives the primitives a composition builds: the roll (a primitive of move: roll) and
// the arithmetic of shifts (add; div for D/2).
PushedMoves pushMoves(const std::vector<ir::Expr>& roots, const prims::PrimitiveLibrary& lib);

// Whether n is a move of a leaf: Call(move, {Input | GradOut | Column, shift...}), where a
// chunk of a packed input (chunk(x, c, n), prims::PrimKind::View) counts as a leaf.
bool isMovedLeaf(const ir::Node* n);
// Whether n is a leaf or a chunk of one (chunk(x, c, n) of an input).
bool isLeafView(const ir::Node* n);
// A roll's shift (its second argument), or null for a node that is not a roll.
ir::Expr rollShift(const ir::Node* n);

} // namespace fusegen::opt
