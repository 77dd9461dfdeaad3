// Column sums by linearity (see the header).
#include "opt/ColumnSums.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

namespace fusegen::opt {

std::vector<ir::Expr> distributeColumnSums(const std::vector<ir::Expr>& roots,
                                           const std::unordered_set<const ir::Node*>& given,
                                           Simplifier& simplifier) {
  bool any = false;
  for (const ir::Node* n : ir::topoOrder(roots))
    any = any || (ir::isColumnReduction(n) && !given.count(n));
  if (!any) return roots;
  // Column depth of the rebuilt nodes (the given ones and leaves: 0).
  std::unordered_map<const ir::Node*, int> depth;
  std::unordered_map<const ir::Node*, ir::Expr> keepAlive;
  std::function<int(const ir::Expr&)> depthOf = [&](const ir::Expr& e) -> int {
    auto it = depth.find(e.get());
    if (it != depth.end()) return it->second;
    int d = 0;
    if (!given.count(e.get())) {
      for (const ir::Expr& a : e->args())
        d = std::max(d, depthOf(a));
      d += ir::isColumnReduction(e.get()) ? 1 : 0;
    }
    keepAlive[e.get()] = e;
    return depth[e.get()] = d;
  };
  auto rowFree = [](const ir::Expr& e) { return e->shape() != ir::ShapeClass::Full; };
  // colsum(e), distributed over e where e needs an earlier column reduction.
  std::function<ir::Expr(const ir::Expr&)> sumOf = [&](const ir::Expr& e) -> ir::Expr {
    if (depthOf(e) == 0) return simplifier.call("colsum", {e});
    if (rowFree(e)) return simplifier.call("mul", {e, ir::Node::makeRows()});
    const std::vector<ir::Expr>& a = e->args();
    if (e->isCall("add") || e->isCall("sub"))
      return simplifier.call(e->prim()->name.c_str(), {sumOf(a[0]), sumOf(a[1])});
    if (e->isCall("neg")) return simplifier.call("neg", {sumOf(a[0])});
    if (e->isCall("mul") && rowFree(a[0])) return simplifier.call("mul", {a[0], sumOf(a[1])});
    if (e->isCall("mul") && rowFree(a[1])) return simplifier.call("mul", {sumOf(a[0]), a[1]});
    if (e->isCall("div") && rowFree(a[1])) return simplifier.call("div", {sumOf(a[0]), a[1]});
    return simplifier.call("colsum", {e});
  };
  std::unordered_map<const ir::Node*, ir::Expr> rebuilt;
  const std::unordered_map<const ir::Node*, ir::Expr> owner = ir::owners(roots);
  for (const ir::Node* n : ir::topoOrder(roots)) {
    const ir::Expr& self = owner.at(n);
    if (n->isLeaf() || given.count(n)) {
      rebuilt[n] = self;
      continue;
    }
    std::vector<ir::Expr> args;
    bool same = true;
    for (const ir::Expr& a : n->args()) {
      args.push_back(rebuilt.at(a.get()));
      same = same && args.back() == a;
    }
    const ir::Expr node = same ? self : ir::Node::makeCall(n->prim(), args);
    rebuilt[n] = ir::isColumnReduction(n) && n->isCall("colsum") ? sumOf(node->args()[0]) : node;
  }
  std::vector<ir::Expr> out;
  for (const ir::Expr& r : roots)
    out.push_back(r ? rebuilt.at(r.get()) : nullptr);
  return cse(out);
}

} // namespace fusegen::opt
