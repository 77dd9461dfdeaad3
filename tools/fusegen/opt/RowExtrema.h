// factorRowExtrema: a row's maximum or minimum of a product with a per-row factor never below
// 0 takes that factor out, max(abs(x * r * w)) = r * max(abs(x * w)) for r >= 0, so the
// reduction no longer waits for r's pass over the row: RMSNorm's amax (an FP8 scale) is then
// taken in the same pass as mean(x * x) instead of a second one. Linearity does the same for
// sums in reverse mode's adjoints (opt::Simplifier); this runs on the forward as Sema lowers it.
#pragma once

#include "ir/Node.h"
#include "prims/PrimitiveLibrary.h"

#include <vector>

namespace fusegen::opt {

// `roots` with every such max(...) and min(...) rewritten, for factors that a reduction computes
// (the others cost no pass) (a new DAG; nodes nothing changed
// below keep their identity). Over an empty row (D = 0) the result is still the reduction's
// identity, not r times it (r may be NaN there, a mean over nothing).
std::vector<ir::Expr> factorRowExtrema(const std::vector<ir::Expr>& roots,
                                       const prims::PrimitiveLibrary& lib);

} // namespace fusegen::opt
