// Plan selection for an op.
#include "plan/KernelPlan.h"

namespace fusegen::plan {

std::optional<KernelPlan> planOp(const spec::OpSpec& spec, const ir::Function& fn,
                                 const autodiff::Gradient& /*grad*/, Diagnostics& diags) {
  KernelPlan plan;
  int errorsBefore = diags.errorCount();
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    ir::ShapeClass s = fn.inputs[i].shape;
    if (s == ir::ShapeClass::Full && plan.fullInput < 0)
      plan.fullInput = static_cast<int>(i);
    plan.hasColInputs = plan.hasColInputs || s == ir::ShapeClass::Col;
    plan.reducedGrad.push_back(s == ir::ShapeClass::Col || s == ir::ShapeClass::Scalar);
    if (s == ir::ShapeClass::Row)
      diags.error(spec.inputs[i].loc, "input '" + fn.inputs[i].name +
                                          "' is per-row [...]; per-row inputs need the row plan, "
                                          "which this version of fusegen does not have");
  }
  if (plan.fullInput < 0)
    diags.error(spec.inputs.front().loc,
                "op '" + spec.name + "' needs at least one input of shape [..., D]: it defines the "
                "shape of the outputs");
  for (size_t i = 0; i < fn.outputs.size(); ++i) {
    for (const ir::Node* n : ir::topoOrder({fn.outputs[i].value}))
      if (n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Reduction) {
        diags.error(spec.outputs[i].formulaLoc,
                    "output '" + fn.outputs[i].name + "' uses the reduction '" + n->prim()->name +
                        "'; reductions need the row plan, which this version of fusegen does "
                        "not have");
        break;
      }
  }
  if (diags.errorCount() != errorsBefore)
    return std::nullopt;
  return plan;
}

} // namespace fusegen::plan
