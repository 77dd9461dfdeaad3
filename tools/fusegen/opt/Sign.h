// Sign analysis: which values are never below 0, from the primitives' `sign` claims
// (prims::Sign in templates/primitives.yaml). The planner adds such sums plainly instead of
// compensated (plan/KernelPlan.cpp), and factorRowExtrema moves such per-row factors out of
// a row's maximum (opt/RowExtrema.h).
#pragma once

#include "ir/Node.h"

#include <unordered_map>

namespace fusegen::opt {

// Whether e is never below 0 (NaN aside, and -0 taken as 0); memo: the answers so far.
bool nonNegative(const ir::Node* e, std::unordered_map<const ir::Node*, bool>& memo);

} // namespace fusegen::opt
