// The analysis of UniformBranches.h.
#include "ir/UniformBranches.h"

#include "prims/PrimitiveLibrary.h"

#include <algorithm>

namespace fusegen::ir {

bool isUniformWhere(const Node* n) {
  if (n->kind() != NodeKind::Call || !n->prim()->eval || n->prim()->params.size() != 3)
    return false;
  const expr::AstPtr& e = n->prim()->eval;
  if (e->kind != expr::Ast::Kind::Call || e->name != "select") return false;
  for (size_t i = 0; i < 3; ++i)
    if (e->args[i]->kind != expr::Ast::Kind::Name || e->args[i]->name != n->prim()->params[i].name)
      return false;
  const Node& cond = *n->args()[0];
  return cond.isConstant() && cond.kind() != NodeKind::Const;
}

std::unordered_map<const Node*, BranchOwner>
uniformBranchOwners(const std::vector<const Node*>& order,
                    const std::unordered_set<const Node*>& external,
                    const std::function<bool(const Node*)>& opaque) {
  std::unordered_map<const Node*, std::vector<const Node*>> users;
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) {
    position[order[i]] = i;
    if (!opaque(order[i]))
      for (const Expr& a : order[i]->args())
        users[a.get()].push_back(order[i]);
  }
  std::unordered_map<const Node*, BranchOwner> owners;
  for (size_t w = order.size(); w-- > 0;) {
    const Node* where = order[w];
    if (opaque(where) || !isUniformWhere(where)) continue;
    for (int k = 1; k <= 2; ++k) {
      const Node* branch = where->args()[k].get();
      if (branch->isLeaf() || branch == where->args()[3 - k].get() || external.count(branch))
        continue;
      // The branch's subtree, then its nodes used only inside it, users before arguments.
      std::unordered_set<const Node*> subtree{branch};
      std::vector<const Node*> stack{branch};
      while (!stack.empty()) {
        const Node* n = stack.back();
        stack.pop_back();
        if (opaque(n)) continue;
        for (const Expr& a : n->args())
          if (subtree.insert(a.get()).second) stack.push_back(a.get());
      }
      std::vector<const Node*> usersFirst(subtree.begin(), subtree.end());
      std::sort(usersFirst.begin(), usersFirst.end(),
                [&](const Node* a, const Node* b) { return position.at(a) > position.at(b); });
      std::unordered_set<const Node*> mine;
      for (const Node* n : usersFirst) {
        bool only = !external.count(n);
        for (const Node* u : users[n])
          only = only && (mine.count(u) || (n == branch && u == where));
        if (only) mine.insert(n);
      }
      for (const Node* n : mine)
        owners[n] = BranchOwner{where, k};
    }
  }
  return owners;
}

} // namespace fusegen::ir
