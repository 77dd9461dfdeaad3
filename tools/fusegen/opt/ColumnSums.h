// Column sums by linearity: colsum(e) rewritten so that factors the same in every row come out
// of it and sums split, where that lets it run in an earlier pass over the rows:
//   colsum(a + b) = colsum(a) + colsum(b)      colsum(-a) = -colsum(a)
//   colsum(k * a) = k * colsum(a)              colsum(a / k) = colsum(a) / k
//   colsum(k) = k * rows                        (k: a [D] or [] value)
// applied only to a colsum whose argument needs an earlier column reduction (plan/ColumnPasses.h
// stages a column reduction after every one its argument reads). Batchnorm's derived backward,
// colsum(g * w * r + c * (x - m)) with c made of colsum(g * w * (x - m)), then needs one pass
// over the rows before its gradient instead of two. Sums of values of no earlier column reduction
// are left as they are: splitting colsum(x - m) into colsum(x) - m * rows would cancel.
#pragma once

#include "ir/Node.h"
#include "opt/Simplify.h"

#include <unordered_set>
#include <vector>

namespace fusegen::opt {

// `roots` with their column sums rewritten as above. `given`: nodes that count as read, not
// computed (the forward's [D] statistics, which the backward reads back).
std::vector<ir::Expr> distributeColumnSums(const std::vector<ir::Expr>& roots,
                                           const std::unordered_set<const ir::Node*>& given,
                                           Simplifier& simplifier);

} // namespace fusegen::opt
