// Reverse-mode differentiation with rule instantiation, simplification and CSE.
#include "autodiff/ReverseMode.h"

#include "expr/Sema.h"
#include "opt/Simplify.h"

#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace fusegen::autodiff {

Gradient differentiate(const ir::Function& fn, const prims::PrimitiveLibrary& lib) {
  opt::Simplifier simplifier(lib);
  std::vector<ir::Expr> roots;
  for (const ir::FunctionOutput& o : fn.outputs)
    roots.push_back(o.value);

  // Shared pointers of every node, so rules can refer to `result` and the arguments.
  std::unordered_map<const ir::Node*, ir::Expr> owner;
  for (const ir::Expr& r : roots)
    owner[r.get()] = r;
  std::vector<const ir::Node*> order = ir::topoOrder(roots);
  for (const ir::Node* n : order)
    for (const ir::Expr& a : n->args())
      owner[a.get()] = a;

  std::unordered_map<const ir::Node*, ir::Expr> adjoint;
  auto accumulate = [&](const ir::Node* n, const ir::Expr& contribution) {
    auto it = adjoint.find(n);
    adjoint[n] = it == adjoint.end() ? contribution
                                     : simplifier.call("add", {it->second, contribution});
  };

  Gradient g;
  for (size_t i = 0; i < fn.outputs.size(); ++i) {
    ir::Expr seed = ir::Node::makeGradOut(fn.outputs[i].name, static_cast<int>(i),
                                          fn.outputs[i].value->shape());
    g.gradOuts.push_back(seed);
    accumulate(roots[i].get(), seed);
  }

  std::ostringstream ruleErrors;
  Diagnostics ruleDiags(ruleErrors);
  expr::Sema sema(lib, ruleDiags);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::Node* n = *it;
    auto adj = adjoint.find(n);
    if (n->kind() != ir::NodeKind::Call || adj == adjoint.end() || n->isConstant())
      continue;
    const prims::Primitive& prim = *n->prim();
    expr::Scope scope;
    scope["grad"] = adj->second;
    scope["result"] = owner.at(n);
    for (size_t i = 0; i < prim.params.size(); ++i)
      scope[prim.params[i].name] = n->args()[i];
    for (size_t i = 0; i < prim.params.size(); ++i) {
      const ir::Expr& arg = n->args()[i];
      if (!prim.grads[i] || arg->isConstant())
        continue;
      ir::Expr contribution = sema.lower(prim.grads[i], scope);
      if (!contribution)
        throw std::logic_error("derivative rule of '" + prim.name + "' failed: " + ruleErrors.str());
      contribution = simplifier.simplify(contribution);
      if (contribution->isConst(0))
        continue;
      accumulate(arg.get(), contribution);
    }
  }

  std::vector<ir::Expr> grads;
  for (const ir::FunctionInput& in : fn.inputs) {
    auto it = adjoint.find(in.node.get());
    grads.push_back(it == adjoint.end() ? nullptr : it->second);
  }
  g.inputGrads = opt::cse(grads);
  return g;
}

} // namespace fusegen::autodiff
