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

bool calls(const ir::Node* n, const char* prim) {
  return n->kind() == ir::NodeKind::Call && n->prim()->name == prim;
}

// e, where n sums over rows the squared deviations of an element value e from its column mean:
// colsum(square(s)), colsum(s * s) or colsum(pow(s, 2)) with s = e - colsum(e) / rows (either
// order of the subtraction); null otherwise.
ir::Expr centeredValue(const ir::Node* n) {
  if (!calls(n, "colsum")) return nullptr;
  const ir::Node* sq = n->args()[0].get();
  ir::Expr s;
  if (calls(sq, "square") || (calls(sq, "mul") && sq->args()[0] == sq->args()[1]))
    s = sq->args()[0];
  else if (calls(sq, "pow") && sq->args()[1]->kind() == ir::NodeKind::Const &&
           sq->args()[1]->value() == 2.0)
    s = sq->args()[0];
  if (!s || !calls(s.get(), "sub")) return nullptr;
  for (int side = 0; side < 2; ++side) {
    const ir::Expr& e = s->args()[side];
    const ir::Node* mean = s->args()[1 - side].get();
    if (calls(mean, "div") && mean->args()[1]->kind() == ir::NodeKind::Rows &&
        calls(mean->args()[0].get(), "colsum") && mean->args()[0]->args()[0] == e &&
        e->shape() == ir::ShapeClass::Full)
      return e;
  }
  return nullptr;
}

// Whether every input of p is one the colwise plan reads (ColM2 outputs run there only):
// element, [D] and [] inputs of all the op's dims, unmoved, unpacked.
bool colwiseInputs(const Program& p) {
  for (const Program::Input& in : p.inputs)
    if (in.random || in.position || in.shape == ir::ShapeClass::Row || in.dims != ~0u ||
        in.move != prims::Move::None || in.chunks > 1)
      return false;
  return true;
}

} // namespace

std::vector<Program> splitColumnPasses(Program& main, const std::vector<ir::Expr>& keep,
                                       const std::string& prefix,
                                       std::unordered_map<const ir::Node*, int>& results) {
  std::vector<ir::Expr> roots = programRoots(main);
  roots.insert(roots.end(), keep.begin(), keep.end());
  // Column depth: the column reductions on the longest path to a leaf. A sum of squared
  // deviations from a column mean (centeredValue) is of its mean's depth: it runs in its
  // mean's pass (OutKind::ColM2), where the colwise plan runs the pass.
  const bool center = colwiseInputs(main);
  std::unordered_map<const ir::Node*, ir::Expr> centered;
  std::unordered_map<const ir::Node*, int> depth;
  int maxDepth = 0;
  const std::vector<const ir::Node*> order = ir::topoOrder(roots);
  for (const ir::Node* n : order) {
    int d = 0;
    const ir::Expr e = center ? centeredValue(n) : nullptr;
    if (e) {
      centered[n] = e;
      d = depth.at(e.get());
    } else {
      for (const ir::Expr& a : n->args())
        d = std::max(d, depth.at(a.get()));
    }
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
        const auto c = centered.find(n);
        const bool m2 = c != centered.end();
        Program::Output o{prefix + (m2 ? "_colm2" : "_colsum") +
                              std::to_string(nextResult + pass.outputs.size()),
                          m2 ? OutKind::ColM2 : OutKind::ColSum,
                          ir::substitute(m2 ? c->second : n->args()[0], replace),
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
