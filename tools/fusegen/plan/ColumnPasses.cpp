// Staging of column reductions into programs run before a direction's main one (see the header).
#include "plan/ColumnPasses.h"

#include <algorithm>
#include <unordered_set>

namespace fusegen::plan {

namespace {

// The values a program computes (its outputs' and the whole-tensor nodes its [] outputs read).
std::vector<ir::Expr> programRoots(const Program& p) {
  std::vector<ir::Expr> roots;
  for (const Program::Output& o : p.outputs) {
    if (o.value) roots.push_back(o.value);
    if (o.whole) roots.push_back(o.whole);
  }
  return roots;
}

} // namespace

std::vector<Program> splitColumnPasses(Program& main, const std::vector<ir::Expr>& keep,
                                       const std::string& prefix,
                                       std::unordered_map<const ir::Node*, int>& results) {
  std::vector<ir::Expr> roots = programRoots(main);
  roots.insert(roots.end(), keep.begin(), keep.end());
  // Column depth: the column reductions on the longest path to a leaf.
  std::unordered_map<const ir::Node*, int> depth;
  int maxDepth = 0;
  const std::vector<const ir::Node*> order = ir::topoOrder(roots);
  for (const ir::Node* n : order) {
    int d = 0;
    for (const ir::Expr& a : n->args())
      d = std::max(d, depth.at(a.get()));
    depth[n] = d + (ir::isColumnReduction(n) ? 1 : 0);
    maxDepth = std::max(maxDepth, depth[n]);
  }
  if (maxDepth == 0) return {};
  const std::unordered_map<const ir::Node*, ir::Expr> owner = ir::owners(roots);
  // The [D] values of depth >= 1 a program after theirs reads: those a root or kept, and those
  // used by a value of another shape or depth (a per-element value, a later column value).
  std::unordered_set<const ir::Node*> frontier;
  for (const ir::Expr& r : roots)
    if (depth.at(r.get()) > 0 && r->shape() == ir::ShapeClass::Col) frontier.insert(r.get());
  for (const ir::Node* n : order)
    for (const ir::Expr& a : n->args())
      if (depth.at(a.get()) > 0 && a->shape() == ir::ShapeClass::Col &&
          (n->shape() != ir::ShapeClass::Col || depth.at(n) != depth.at(a.get())))
        frontier.insert(a.get());

  const std::vector<Program::Input> base = main.inputs;
  std::vector<Program> before;
  std::unordered_map<const ir::Node*, ir::Expr> replace; // computed value -> its input node
  std::vector<Program::Input> bound;                     // ... as the later programs' inputs
  int nextResult = 0;
  auto bind = [&](const ir::Node* n, const std::string& name) {
    ir::Expr leaf = ir::Node::makeInput(name, 10000 + nextResult, ir::ShapeClass::Col);
    Program::Input in{name, ir::ShapeClass::Col, leaf, /*stat=*/true};
    in.passed = nextResult;
    results[n] = nextResult++;
    replace[n] = leaf;
    bound.push_back(in);
  };
  auto withInputs = [&](Program& p) {
    p.inputs = base;
    p.inputs.insert(p.inputs.end(), bound.begin(), bound.end());
  };
  for (int k = 0; k < maxDepth; ++k) {
    // Pass k: the sums of the column reductions of depth k + 1.
    Program pass;
    withInputs(pass);
    std::vector<const ir::Node*> sums;
    for (const ir::Node* n : order)
      if (ir::isColumnReduction(n) && depth.at(n) == k + 1) {
        sums.push_back(n);
        Program::Output o{prefix + "_colsum" + std::to_string(nextResult + pass.outputs.size()),
                          OutKind::ColSum, ir::substitute(n->args()[0], replace),
                          Program::TotalOf::Elements, spec::OutputType::Compute};
        pass.outputs.push_back(o);
      }
    for (size_t i = 0; i < sums.size(); ++i)
      bind(sums[i], pass.outputs[i].name);
    before.push_back(std::move(pass));
    // Columns k + 1: the [D] values of depth k + 1 read later, once per column.
    Program columns;
    columns.columns = true;
    std::vector<const ir::Node*> values;
    for (const ir::Node* n : order)
      if (frontier.count(n) && depth.at(n) == k + 1 && !replace.count(n)) values.push_back(n);
    if (values.empty()) continue;
    withInputs(columns);
    for (const ir::Node* n : values)
      columns.outputs.push_back(
          {prefix + "_col" + std::to_string(nextResult + columns.outputs.size()), OutKind::Full,
           ir::substitute(owner.at(n), replace), Program::TotalOf::Elements,
           spec::OutputType::Compute});
    for (size_t i = 0; i < values.size(); ++i)
      bind(values[i], columns.outputs[i].name);
    before.push_back(std::move(columns));
  }
  // The main program reads every value computed before it.
  for (Program::Output& o : main.outputs) {
    if (o.value) o.value = ir::substitute(o.value, replace);
    if (o.whole) o.whole = ir::substitute(o.whole, replace);
  }
  main.inputs.insert(main.inputs.end(), bound.begin(), bound.end());
  return before;
}

} // namespace fusegen::plan
