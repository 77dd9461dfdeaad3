// Reverse-mode AD over an op's expression DAG. Walks the nodes once in reverse topological
// order, instantiates each primitive's derivative rule (from the primitive library) with
// the node's arguments, its result and its accumulated adjoint, and sums the contributions
// per node. The gradient of a broadcast input ([D] or []) is returned full-shaped: by
// linearity it is the sum over rows of this expression, which the kernels compute. The
// adjoint of a per-row value is a per-row sum (a reduction in the backward).
#pragma once

#include "ir/Function.h"
#include "prims/PrimitiveLibrary.h"
#include "support/Diagnostics.h"

#include <optional>
#include <vector>

namespace fusegen::autodiff {

struct Gradient {
  std::vector<ir::Expr> gradOuts;   // the GradOut leaf of each output; null: not differentiable
  std::vector<ir::Expr> inputGrads; // per input; null when no output depends on it
  // Per input, for a packed one (FunctionInput::chunks > 1): its gradient in each chunk, the
  // places of the other chunks taken as 0 (what the kernels store at each chunk's offset);
  // empty for the others.
  std::vector<std::vector<ir::Expr>> chunkGrads;
};

// Adjoints of the nodes `wrt` (null where none reaches it) given the adjoint `seeds[i]` of each
// of `roots` (null: none). Adjoints follow the conventions above: per element of a full or
// per-row node, full-shaped (per element) for a [D] or [] node. A library rule that does
// not type-check for the arguments at hand is reported at the rule (with a note at
// `where`) and yields nothing.
std::optional<std::vector<ir::Expr>> reverse(const std::vector<ir::Expr>& roots,
                                             const std::vector<ir::Expr>& seeds,
                                             const std::vector<ir::Expr>& wrt,
                                             const prims::PrimitiveLibrary& lib, Diagnostics& diags,
                                             const SourceLoc& where);

// The input gradients of `fn`'s outputs, by reverse() seeded with each output's GradOut.
// A library rule that does not type-check for the arguments at hand is reported at the
// rule (with a note at `where`) and yields nothing.
std::optional<Gradient> differentiate(const ir::Function& fn, const prims::PrimitiveLibrary& lib,
                                      Diagnostics& diags, const SourceLoc& where);

} // namespace fusegen::autodiff
