// KernelPlan: how an op's forward and backward map onto the runtime's kernel plans, and the
// checks that decide whether a spec can be planned at all (with a diagnostic saying why not).
#pragma once

#include "autodiff/ReverseMode.h"
#include "ir/Function.h"
#include "spec/SpecModel.h"
#include "support/Diagnostics.h"

#include <optional>
#include <vector>

namespace fusegen::plan {

enum class PlanKind {
  Pointwise, // every output element depends on one element of each input (flat or colwise)
};

struct KernelPlan {
  PlanKind kind = PlanKind::Pointwise;
  int fullInput = -1;            // the first [..., D] input: defines D and the output shape
  bool hasColInputs = false;     // forward keeps [D] inputs in registers (colwise plan)
  std::vector<bool> reducedGrad; // per input: its gradient is a sum over broadcast dims
};

std::optional<KernelPlan> planOp(const spec::OpSpec& spec, const ir::Function& fn,
                                 const autodiff::Gradient& grad, Diagnostics& diags);

} // namespace fusegen::plan
