// Reverse-mode differentiation with rule instantiation, simplification and CSE.
#include "autodiff/ReverseMode.h"

#include "expr/Sema.h"
#include "opt/ColumnSums.h"
#include "opt/Simplify.h"

#include <unordered_map>
#include <unordered_set>

namespace fusegen::autodiff {

std::optional<std::vector<ir::Expr>> reverse(const std::vector<ir::Expr>& roots,
                                             const std::vector<ir::Expr>& seeds,
                                             const std::vector<ir::Expr>& wrt,
                                             const prims::PrimitiveLibrary& lib, Diagnostics& diags,
                                             const SourceLoc& where) {
  opt::Simplifier simplifier(lib);
  for (const ir::Expr& r : roots)
    simplifier.keep(r); // the derivatives read the values of the roots' nodes as they are

  // Shared pointers of every node, so rules can refer to `result` and the arguments.
  const std::unordered_map<const ir::Node*, ir::Expr> owner = ir::owners(roots);
  std::vector<const ir::Node*> order = ir::topoOrder(roots);

  std::unordered_map<const ir::Node*, ir::Expr> adjoint;
  // (the nodes a column reduction reaches)
  const std::unordered_set<const ir::Node*> columnValues = ir::columnReductionUsers(roots);
  auto accumulate = [&](const ir::Node* n, ir::Expr contribution) {
    // A per-row value used by every element of its row gets the sum of their adjoints (a
    // [D] adjoint, which a second-order seed can be, is one per element too). A [D] or []
    // value keeps a full-shaped adjoint: its sum over rows is taken at the input, which is
    // the same by linearity.
    if (n->shape() == ir::ShapeClass::Row && (contribution->shape() == ir::ShapeClass::Full ||
                                              contribution->shape() == ir::ShapeClass::Col))
      contribution = simplifier.call("sum", {contribution});
    // A [D] value computed from a reduction over rows (a batch statistic) is used by every row:
    // its adjoint is the sum over rows of theirs, taken here (colsum), since it flows on into
    // the values it was computed from (they would otherwise see one row's share). A per-row
    // contribution too (the adjoint of mean(x - colmean(w)) reaches colmean(w) as -grad / D,
    // one value per row): its colsum adds it over the rows for every column.
    if (n->shape() == ir::ShapeClass::Col &&
        (contribution->shape() == ir::ShapeClass::Full ||
         contribution->shape() == ir::ShapeClass::Row) &&
        columnValues.count(n))
      contribution = simplifier.call("colsum", {contribution});
    auto it = adjoint.find(n);
    // A [] value used both per row and per element (t in the backward of mean(x * x * t * t),
    // whose second derivatives see both): its adjoint is summed over every element where it
    // is full-shaped and over the rows where it is per row, so the sum of a per-row and a
    // full-shaped one would count the per-row one D times. The full-shaped one is summed over
    // its row instead, and the adjoint is per row (exact at D = 0 too: the empty sum).
    if (n->shape() == ir::ShapeClass::Scalar && it != adjoint.end()) {
      auto perElement = [](const ir::Expr& e) {
        return e->shape() == ir::ShapeClass::Full || e->shape() == ir::ShapeClass::Col;
      };
      if (it->second->shape() == ir::ShapeClass::Row && perElement(contribution))
        contribution = simplifier.call("sum", {contribution});
      else if (perElement(it->second) && contribution->shape() == ir::ShapeClass::Row)
        it->second = simplifier.call("sum", {it->second});
    }
    adjoint[n] =
        it == adjoint.end() ? contribution : simplifier.call("add", {it->second, contribution});
  };
  for (size_t i = 0; i < roots.size(); ++i)
    if (seeds[i]) accumulate(roots[i].get(), seeds[i]);

  expr::Sema sema(lib, diags);
  sema.lowerRules();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::Node* n = *it;
    auto adj = adjoint.find(n);
    if (n->kind() != ir::NodeKind::Call || adj == adjoint.end() || n->isConstant()) continue;
    const prims::Primitive& prim = *n->prim();
    expr::Scope scope;
    // A whole-tensor value (sum_all, max_all) is used by every element it reaches: its adjoint,
    // kept one per element so far (accumulate()), is their sum here, where it flows on into
    // the values it combines (each would otherwise see its own element's share: the second
    // derivatives of 1 / sum_all(x), whose backward uses the total per element). A [D]
    // adjoint is one per element, the same in every row.
    if (prim.kind == prims::PrimKind::Total && adj->second->shape() != ir::ShapeClass::Scalar)
      adj->second = adj->second->shape() == ir::ShapeClass::Col
                        ? simplifier.call(
                              "mul", {simplifier.call("sum", {adj->second}), ir::Node::makeRows()})
                        : simplifier.call("sum_all", {adj->second});
    scope["grad"] = adj->second;
    scope["result"] = owner.at(n);
    scope["D"] = ir::Node::makeDim();
    scope["rows"] = ir::Node::makeRows();
    for (size_t i = 0; i < prim.params.size(); ++i)
      scope[prim.params[i].name] = n->args()[i];
    // The adjoint of a [D] statistic is a total over the rows (accumulate()); that of another
    // [D] or [] value a share of every row, summed over the rows at the input.
    const bool total = n->shape() == ir::ShapeClass::Col && columnValues.count(n);
    for (size_t i = 0; i < prim.params.size(); ++i) {
      const ir::Expr& arg = n->args()[i];
      // Integers and conditions carry no gradient (ir::ValueType).
      if (!prim.grads[i] || arg->isConstant() || arg->type() != ir::ValueType::Value) continue;
      ir::Expr contribution = sema.lower(prim.grads[i], scope);
      if (!contribution) {
        diags.note(where, "in the derivative rule of '" + prim.signature() + "' for '" +
                              prim.params[i].name + "', differentiating this op");
        return std::nullopt;
      }
      contribution = simplifier.simplify(contribution);
      if (contribution->isConst(0)) continue;
      // A per-row argument of a full-shaped node is used by every element of its row. Its
      // contribution is the sum of theirs: accumulate() sums a full-shaped or [D] one; a
      // per-row or [] one (the same for every element of the row) is D of it. (At D = 0 that
      // is the empty sum, 0, whatever the term: a mean over the empty row.)
      if (arg->shape() == ir::ShapeClass::Row && n->shape() == ir::ShapeClass::Full &&
          (contribution->shape() == ir::ShapeClass::Row ||
           contribution->shape() == ir::ShapeClass::Scalar))
        contribution = simplifier.unlessRowEmpty(
            ir::Node::makeConst(0), simplifier.call("mul", {contribution, ir::Node::makeDim()}),
            contribution);
      // A [D] statistic used by a value that varies per row (colsum(x) + x) gets the sum over
      // the rows of that value's adjoint: accumulate() takes the colsum of one that varies per
      // row; one the same in every row ([D] or [], as colsum's rule passes its [D] grad on) sums
      // to rows times it (the empty sum without rows).
      if (arg->shape() == ir::ShapeClass::Col && columnValues.count(arg.get()) &&
          (n->shape() == ir::ShapeClass::Full || n->shape() == ir::ShapeClass::Row) &&
          (contribution->shape() == ir::ShapeClass::Col ||
           contribution->shape() == ir::ShapeClass::Scalar))
        contribution = simplifier.call(
            "where",
            {simplifier.call("eq", {ir::Node::makeRows(), ir::Node::makeConst(0)}),
             ir::Node::makeConst(0), simplifier.call("mul", {contribution, ir::Node::makeRows()})});
      // A statistic's total reaching a [D] or [] value that is not one (colmean(x) * w, w a
      // [D] input): that value's adjoint is summed over the rows at the input, so it gets one
      // row's share of the total (the empty sum without rows).
      if (total && !columnValues.count(arg.get()) &&
          (arg->shape() == ir::ShapeClass::Col || arg->shape() == ir::ShapeClass::Scalar))
        contribution = simplifier.call(
            "where",
            {simplifier.call("eq", {ir::Node::makeRows(), ir::Node::makeConst(0)}),
             ir::Node::makeConst(0), simplifier.call("div", {contribution, ir::Node::makeRows()})});
      accumulate(arg.get(), contribution);
    }
  }

  // CSE with the roots first, so the adjoints share the roots' nodes (the planner
  // recognizes forward values in the backward by identity).
  std::vector<ir::Expr> all = roots;
  for (const ir::Expr& w : wrt) {
    auto it = adjoint.find(w.get());
    all.push_back(it == adjoint.end() ? nullptr : it->second);
  }
  all = opt::cse(all);
  return std::vector<ir::Expr>(all.begin() + static_cast<std::ptrdiff_t>(roots.size()), all.end());
}

std::optional<Gradient> differentiate(const ir::Function& fn, const prims::PrimitiveLibrary& lib,
                                      Diagnostics& diags, const SourceLoc& where) {
  Gradient g;
  std::vector<ir::Expr> roots, wrt;
  for (size_t i = 0; i < fn.outputs.size(); ++i) {
    roots.push_back(fn.outputs[i].value);
    // An output of its own type (FP8, a float32 statistic) has no gradient: no seed.
    g.gradOuts.push_back(fn.outputs[i].differentiable()
                             ? ir::Node::makeGradOut(fn.outputs[i].name, static_cast<int>(i),
                                                     fn.outputs[i].value->shape())
                             : nullptr);
  }
  for (const ir::FunctionInput& in : fn.inputs)
    wrt.push_back(in.node);
  std::optional<std::vector<ir::Expr>> grads = reverse(roots, g.gradOuts, wrt, lib, diags, where);
  if (!grads) return std::nullopt;
  g.inputGrads = std::move(*grads);
  // Column sums by linearity, the forward's [D] statistics read back (opt/ColumnSums.h).
  {
    const std::unordered_set<const ir::Node*> statistics = ir::columnReductionUsers(roots);
    opt::Simplifier simplifier(lib);
    for (const ir::Expr& r : roots)
      simplifier.keep(r);
    g.inputGrads = opt::distributeColumnSums(g.inputGrads, statistics, simplifier);
  }
  // A packed input's gradient, chunk by chunk: place(h, c', n) is h in chunk c' and 0 in the
  // others.
  opt::Simplifier simplifier(lib);
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    g.chunkGrads.emplace_back();
    const ir::Expr& grad = g.inputGrads[i];
    if (fn.inputs[i].chunks == 1 || !grad) continue;
    for (int c = 0; c < fn.inputs[i].chunks; ++c) {
      std::unordered_map<const ir::Node*, ir::Expr> replace;
      for (const ir::Node* n : ir::topoOrder({grad}))
        if (n->isCall("place"))
          replace[n] = n->args()[1]->value() == c ? n->args()[0] : ir::Node::makeConst(0);
      g.chunkGrads.back().push_back(simplifier.simplify(ir::substitute(grad, replace)));
    }
  }
  return g;
}

} // namespace fusegen::autodiff
