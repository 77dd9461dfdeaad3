// The rewrite of opt/RowExtrema.h.
#include "opt/RowExtrema.h"

#include "opt/Sign.h"

#include <unordered_map>

namespace fusegen::opt {

namespace {

// A per-row value that a reduction computes (a pass over the row): what is worth moving out.
bool fromReduction(const ir::Expr& v) {
  if (v->shape() != ir::ShapeClass::Row) return false;
  for (const ir::Node* n : ir::topoOrder({v}))
    if (n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Reduction)
      return true;
  return false;
}

// The factors of a product (mul nodes flattened), in order.
void factorsOf(const ir::Expr& e, std::vector<ir::Expr>& out) {
  if (e->isCall("mul")) {
    factorsOf(e->args()[0], out);
    factorsOf(e->args()[1], out);
  } else {
    out.push_back(e);
  }
}

} // namespace

std::vector<ir::Expr> factorRowExtrema(const std::vector<ir::Expr>& roots,
                                       const prims::PrimitiveLibrary& lib) {
  const prims::Primitive* mul = lib.find("mul", 2);
  const prims::Primitive* abs = lib.find("abs", 1);
  const prims::Primitive* where = lib.find("where", 3);
  const prims::Primitive* eq = lib.find("eq", 2);
  std::unordered_map<const ir::Node*, ir::Expr> done;
  std::unordered_map<const ir::Node*, bool> signs;
  auto rebuilt = [&](const ir::Expr& e) {
    auto it = done.find(e.get());
    return it == done.end() ? e : it->second;
  };
  const std::unordered_map<const ir::Node*, ir::Expr> owner = ir::owners(roots);
  for (const ir::Node* n : ir::topoOrder(roots)) {
    if (n->kind() != ir::NodeKind::Call) continue;
    std::vector<ir::Expr> args;
    bool same = true;
    for (const ir::Expr& a : n->args()) {
      args.push_back(rebuilt(a));
      same = same && args.back().get() == a.get();
    }
    ir::Expr e = same ? owner.at(n) : ir::Node::makeCall(n->prim(), args);
    const bool extremum = n->prim()->kind == prims::PrimKind::Reduction && !n->prim()->finish &&
                          n->prim()->combine != prims::Combine::Sum;
    if (extremum && mul && abs && where && eq) {
      const ir::Expr& x = e->args()[0];
      const bool absolute = x->isCall("abs");
      std::vector<ir::Expr> factors, out, rest;
      factorsOf(absolute ? x->args()[0] : x, factors);
      for (const ir::Expr& f : factors)
        (fromReduction(f) && nonNegative(f.get(), signs) ? out : rest).push_back(f);
      if (!out.empty() && !rest.empty()) {
        ir::Expr inner = rest[0];
        for (size_t i = 1; i < rest.size(); ++i)
          inner = ir::Node::makeCall(mul, {inner, rest[i]});
        if (absolute) inner = ir::Node::makeCall(abs, {inner});
        const ir::Expr reduced = ir::Node::makeCall(n->prim(), {inner});
        ir::Expr product = reduced;
        for (const ir::Expr& f : out)
          product = ir::Node::makeCall(mul, {f, product});
        const ir::Expr empty =
            ir::Node::makeCall(eq, {ir::Node::makeDim(), ir::Node::makeConst(0)});
        e = ir::Node::makeCall(where, {empty, reduced, product});
      }
    }
    if (e.get() != n) done[n] = e;
  }
  std::vector<ir::Expr> out;
  for (const ir::Expr& r : roots)
    out.push_back(rebuilt(r));
  return out;
}

} // namespace fusegen::opt
