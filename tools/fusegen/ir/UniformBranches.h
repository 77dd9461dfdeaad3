// UniformBranches: which nodes of an expression DAG only one branch of a `where` needs, when
// the where's condition is the same for every element of the op (attrs, literals and D:
// `softcap > 0`). The code printer computes such nodes inside an `if` on the condition (lazy
// branches) and the planner skips the reductions among them when their branch is not taken
// (Program::Stage::guard): an option that is off costs nothing per element. One analysis, so
// the two always agree on what a branch owns.
#pragma once

#include "ir/Node.h"

#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fusegen::ir {

// A where (a primitive whose eval is select(cond, a, b) of its parameters) on a condition
// uniform over the op: one free of inputs and gradients that is not itself a literal.
bool isUniformWhere(const Node* n);

struct BranchOwner {
  const Node* where;
  int arg; // 1: the branch taken when the condition holds; 2: the other
};

// For every node of `order` (a topological order, as topoOrder gives) that is computed only for
// one branch of a uniform where, that where and branch: the nodes of the branch's subtree that
// nothing outside it uses, the branch itself included (a leaf branch owns nothing). `external`
// nodes are used outside the DAG (its roots); `opaque` ones are not looked into (the printer's
// bound values). Outer wheres are taken first, so a node gets its innermost where.
std::unordered_map<const Node*, BranchOwner>
uniformBranchOwners(const std::vector<const Node*>& order,
                    const std::unordered_set<const Node*>& external,
                    const std::function<bool(const Node*)>& opaque);

} // namespace fusegen::ir
