// Second order: the backward of the derived backward, by the same reverse mode and rules.
// The backward is a function B(inputs, output gradients) (a Gradient's DAG); the per-row
// statistics its kernels read back from the forward are forward nodes of that DAG, so here
// they are recomputed from the inputs and their dependence on the inputs is part of the
// total derivative. reverse() runs over B seeded with the cotangent of each input's
// gradient, as B's outputs mean it: a [..., D] or [...] gradient per element or row; a [D]
// gradient the sum over rows of its (full-shaped) expression, so the cotangent is broadcast
// back over rows; a [] gradient the sum over every element (over rows where the expression
// is per-row), so the cotangent is broadcast back everywhere.
#pragma once

#include "autodiff/ReverseMode.h"

#include <string>
#include <vector>

namespace fusegen::autodiff {

struct SecondOrder {
  // Per input of the op: the leaf standing for the cotangent of its gradient (an Input node
  // named _gg_<input>, of the input's shape class); null where the input has no gradient.
  std::vector<ir::Expr> cotangents;
  // Per input and per output gradient (the GradOut leaves): the derivative of the sum of
  // cotangent * gradient; null where none reaches it. Full-shaped adjoints follow
  // reverse()'s conventions: the caller sums a [D] or [] input's as its gradient is summed.
  std::vector<ir::Expr> inputGrads;
  std::vector<ir::Expr> gradOutGrads;
  // Why the second derivative cannot be derived (the diagnostics of a rule that does not
  // apply to the backward's nodes), or "" when it is.
  std::string failure;
};

SecondOrder differentiateBackward(const ir::Function& fn, const Gradient& grad,
                                  const prims::PrimitiveLibrary& lib, const SourceLoc& where);

} // namespace fusegen::autodiff
