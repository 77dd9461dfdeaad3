// Second order: reverse() over the backward DAG, seeded by the cotangents of its outputs.
#include "autodiff/SecondOrder.h"

#include "opt/Simplify.h"

#include <sstream>

namespace fusegen::autodiff {

SecondOrder differentiateBackward(const ir::Function& fn, const Gradient& grad,
                                  const prims::PrimitiveLibrary& lib, const SourceLoc& where) {
  SecondOrder out;
  opt::Simplifier simplifier(lib);
  std::vector<ir::Expr> roots, seeds, wrt;
  const int first = static_cast<int>(fn.inputs.size() + fn.outputs.size());
  for (size_t k = 0; k < fn.inputs.size(); ++k) {
    const ir::Expr& g = grad.inputGrads[k];
    if (!g) {
      out.cotangents.push_back(nullptr);
      continue;
    }
    const ir::FunctionInput& in = fn.inputs[k];
    ir::Expr v = ir::Node::makeInput("_gg_" + in.name, first + static_cast<int>(k), in.shape);
    out.cotangents.push_back(v);
    roots.push_back(g);
    // A [D] gradient of a per-row expression is the sum of its rows in every column: the
    // row's adjoint is the sum of the cotangent over the columns.
    seeds.push_back(in.shape == ir::ShapeClass::Col && g->shape() == ir::ShapeClass::Row
                        ? simplifier.call("sum", {v})
                        : v);
  }
  for (const ir::FunctionInput& in : fn.inputs)
    wrt.push_back(in.node);
  wrt.insert(wrt.end(), grad.gradOuts.begin(), grad.gradOuts.end());
  std::ostringstream messages;
  Diagnostics diags(messages);
  std::optional<std::vector<ir::Expr>> adjoints = reverse(roots, seeds, wrt, lib, diags, where);
  if (!adjoints) {
    // The first line: "<rule location>: error: <what>".
    std::string text = messages.str();
    out.failure = text.substr(0, text.find('\n'));
    out.inputGrads.assign(fn.inputs.size(), nullptr);
    out.gradOutGrads.assign(fn.outputs.size(), nullptr);
    return out;
  }
  out.inputGrads.assign(adjoints->begin(),
                        adjoints->begin() + static_cast<std::ptrdiff_t>(fn.inputs.size()));
  out.gradOutGrads.assign(adjoints->begin() + static_cast<std::ptrdiff_t>(fn.inputs.size()),
                          adjoints->end());
  return out;
}

} // namespace fusegen::autodiff
