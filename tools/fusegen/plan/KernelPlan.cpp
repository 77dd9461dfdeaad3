// Plan selection, save-vs-recompute, and the staging of programs into passes over rows.
#include "plan/KernelPlan.h"

#include "plan/ColumnPasses.h"

#include "ir/UniformBranches.h"
#include "opt/Moves.h"
#include "opt/Sign.h"
#include "opt/Simplify.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fusegen::plan {

namespace {

// exp(L) is exactly 0 for L at or below this, in float32 and in float64 (whose least
// subnormal is about exp(-744.4)).
constexpr double kExpIsZeroBelow = -746;

constexpr int kMaxStages =
    16; // passes over a row the planner stages (the runtime unrolls any number; each adds code)

bool isReduction(const ir::Node* n) {
  return n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Reduction;
}

// The values the rows compute: not the [] outputs' (the program's finish computes those, from
// the Total outputs, after every row).
std::vector<ir::Expr> values(const std::vector<Program::Output>& outs) {
  std::vector<ir::Expr> v;
  for (const Program::Output& o : outs)
    if (o.value && o.kind != OutKind::Scalar) v.push_back(o.value);
  return v;
}

// Reduction depth: the number of reductions on the longest path to a leaf.
std::unordered_map<const ir::Node*, int> depths(const std::vector<ir::Expr>& roots) {
  std::unordered_map<const ir::Node*, int> depth;
  for (const ir::Node* n : ir::topoOrder(roots)) {
    int d = 0;
    for (const ir::Expr& a : n->args())
      d = std::max(d, depth.at(a.get()));
    depth[n] = d + (isReduction(n) ? 1 : 0);
  }
  return depth;
}

// Stages the reductions of a program and lists its per-row values. Returns false (with a
// diagnostic at `loc`) when the program needs more passes than the runtime unrolls.
bool isCombine(const ir::Node* n, prims::Combine c) {
  return isReduction(n) && n->prim()->combine == c;
}

// Whether n reaches one of `nodes` (memo: the answers so far).
bool reaches(const ir::Node* n, const std::unordered_set<const ir::Node*>& nodes,
             std::unordered_map<const ir::Node*, bool>& memo) {
  if (nodes.count(n)) return true;
  auto it = memo.find(n);
  if (it != memo.end()) return it->second;
  bool r = false;
  for (const ir::Expr& a : n->args())
    r = r || reaches(a.get(), nodes, memo);
  return memo[n] = r;
}

// The index in `maxima` of the maximum m that shifts e (see Program::Stage): e is
// exp(g - m) with g the argument of m (seen through detach); or a product or quotient of a
// shifted value and one free of the maxima's stage; or a sum, difference or negation of
// values shifted by the same m. -1 otherwise (and for values free of that stage).
int shiftOf(const ir::Node* e, const std::vector<ir::Expr>& maxima,
            const std::unordered_set<const ir::Node*>& stageNodes,
            std::unordered_map<const ir::Node*, bool>& memo) {
  auto free = [&](const ir::Expr& a) { return !reaches(a.get(), stageNodes, memo); };
  const std::vector<ir::Expr>& args = e->args();
  // exp(g - m), or exp(where(c, g - m, L)) with exp(L) = 0 (a masked softmax's terms, 0 where
  // c fails at any m); m the maximum of g, or of where(c, g, L') (a masked maximum: the terms
  // it shifts that c keeps are still at most exp(0)).
  const ir::Node* exponent = e->isCall("exp") ? args[0].get() : nullptr;
  const ir::Node* mask = nullptr;
  if (exponent && exponent->isCall("where") && free(exponent->args()[0]) &&
      exponent->args()[2]->kind() == ir::NodeKind::Const &&
      exponent->args()[2]->value() <= kExpIsZeroBelow) {
    mask = exponent->args()[0].get();
    exponent = exponent->args()[1].get();
  }
  if (exponent && exponent->isCall("sub")) {
    const ir::Node* g = exponent->args()[0].get();
    const ir::Node* m = exponent->args()[1].get();
    while (m->isCall("detach"))
      m = m->args()[0].get();
    auto maximumOfG = [&](const ir::Node* a) {
      if (a == g) return true;
      return a->isCall("where") && a->args()[1].get() == g &&
             a->args()[2]->kind() == ir::NodeKind::Const &&
             (mask == nullptr || a->args()[0].get() == mask);
    };
    for (size_t i = 0; i < maxima.size(); ++i)
      if (maxima[i].get() == m && isCombine(m, prims::Combine::Max) &&
          maximumOfG(m->args()[0].get()) && free(exponent->args()[0]))
        return static_cast<int>(i);
    return -1;
  }
  // where(c, e, 0) or where(c, 0, e) of a shifted e: 0 at any m.
  if (e->isCall("where") && free(args[0])) {
    if (args[2]->isConst(0)) return shiftOf(args[1].get(), maxima, stageNodes, memo);
    if (args[1]->isConst(0)) return shiftOf(args[2].get(), maxima, stageNodes, memo);
    return -1;
  }
  if (e->isCall("mul")) {
    if (free(args[0])) return shiftOf(args[1].get(), maxima, stageNodes, memo);
    if (free(args[1])) return shiftOf(args[0].get(), maxima, stageNodes, memo);
    return -1;
  }
  if (e->isCall("div"))
    return free(args[1]) ? shiftOf(args[0].get(), maxima, stageNodes, memo) : -1;
  if (e->isCall("neg")) return shiftOf(args[0].get(), maxima, stageNodes, memo);
  if (e->isCall("add") || e->isCall("sub")) {
    const int a = shiftOf(args[0].get(), maxima, stageNodes, memo);
    return a >= 0 && a == shiftOf(args[1].get(), maxima, stageNodes, memo) ? a : -1;
  }
  return -1;
}

// The column r of a pick's term where(j == r, x, 0) or where(j != r, 0, x) (either operand
// order of the comparison), r one value per row: per row at most one column has the term
// nonzero. Null when e is not one.
ir::Expr pickColumnOf(const ir::Node* e) {
  if (!e->isCall("where")) return nullptr;
  const ir::Node* cond = e->args()[0].get();
  const bool eq = cond->isCall("eq");
  if (!(eq || cond->isCall("ne")) || !e->args()[eq ? 2 : 1]->isConst(0)) return nullptr;
  ir::Expr a = cond->args()[0], b = cond->args()[1];
  if (b->kind() == ir::NodeKind::Column) std::swap(a, b);
  if (a->kind() != ir::NodeKind::Column) return nullptr;
  return b->shape() == ir::ShapeClass::Row || b->shape() == ir::ShapeClass::Scalar ? b : nullptr;
}

// Program::Stage::plain: per reduction, a sum whose terms are never below 0; and Stage::pick,
// Stage::pickColumn: the picks (a sum with no finish: not a mean), which are not summed.
void markPlainSums(Program& p) {
  std::unordered_map<const ir::Node*, bool> memo;
  for (Program::Stage& stage : p.stages) {
    stage.plain.clear();
    stage.pick.clear();
    stage.pickColumn.clear();
    for (const ir::Expr& r : stage.reductions) {
      const bool sum = isCombine(r.get(), prims::Combine::Sum);
      ir::Expr column = sum && !r->prim()->finish ? pickColumnOf(r->args()[0].get()) : nullptr;
      stage.plain.push_back(sum && !column && opt::nonNegative(r->args()[0].get(), memo));
      stage.pick.push_back(column != nullptr);
      stage.pickColumn.push_back(column);
    }
  }
}

// Program::Stage::shift for every stage after one that takes a maximum. A stage is shifted
// only when all its reductions are sums shifted by a maximum of the stage before (which may
// take other reductions too: cross-entropy's pick of the target logit rides with its
// maximum); the others keep -1.
void markShiftedStages(Program& p) {
  for (size_t s = 0; s < p.stages.size(); ++s)
    p.stages[s].shift.assign(p.stages[s].reductions.size(), -1);
  for (size_t s = 1; s < p.stages.size(); ++s) {
    const std::vector<ir::Expr>& maxima = p.stages[s - 1].reductions; // (and other reductions)
    // What the previous stage's results reach: its reductions and the row values after it.
    std::unordered_set<const ir::Node*> stageNodes;
    for (const ir::Expr& m : maxima)
      stageNodes.insert(m.get());
    for (size_t i = 0; i < p.rowValues.size(); ++i)
      if (p.rowValueStage[i] == static_cast<int>(s) - 1) stageNodes.insert(p.rowValues[i].get());
    std::vector<int> shift;
    std::unordered_map<const ir::Node*, bool> memo;
    for (const ir::Expr& r : p.stages[s].reductions) {
      const int i = isCombine(r.get(), prims::Combine::Sum)
                        ? shiftOf(r->args()[0].get(), maxima, stageNodes, memo)
                        : -1;
      if (i < 0) break;
      shift.push_back(i);
    }
    if (shift.size() == p.stages[s].reductions.size()) p.stages[s].shift = shift;
  }
}

// Program::Stage::guard: for each reduction used only inside one branch of a where with a
// uniform condition (ir/UniformBranches.h, the code printer's lazy branches), that condition
// and the branch.
void markGuards(Program& p, const std::vector<ir::Expr>& roots) {
  std::unordered_set<const ir::Node*> external;
  for (const ir::Expr& r : roots)
    external.insert(r.get());
  const auto owners = ir::uniformBranchOwners(ir::topoOrder(roots), external,
                                              [](const ir::Node*) { return false; });
  for (Program::Stage& stage : p.stages) {
    stage.guard.clear();
    stage.guardWhen.clear();
    for (const ir::Expr& r : stage.reductions) {
      auto o = owners.find(r.get());
      stage.guard.push_back(o == owners.end() ? nullptr : o->second.where->args()[0]);
      stage.guardWhen.push_back(o == owners.end() || o->second.arg == 1);
    }
  }
}

// Program::prefix: the values of the region no reduction reaches (elementwise [..., D] calls
// of reduction depth 0, not themselves an input's view) that something outside it reads, in
// topological order; none where an element input is read from outside the region, or where
// the program has no passes (nothing to read them again).
std::vector<ir::Expr> choosePrefix(const Program& p, const std::vector<ir::Expr>& roots,
                                   const std::unordered_map<const ir::Node*, int>& depth) {
  if (p.stages.empty()) return {};
  std::unordered_set<const ir::Node*> leaves;
  for (const Program::Input& in : p.inputs)
    leaves.insert(in.leaf.get());
  auto inRegion = [&](const ir::Node* n) {
    return n->kind() == ir::NodeKind::Call && !leaves.count(n) &&
           n->prim()->kind == prims::PrimKind::Elementwise && n->shape() == ir::ShapeClass::Full &&
           depth.at(n) == 0;
  };
  std::unordered_set<const ir::Node*> read; // the region's values read from outside it
  auto use = [&](const ir::Node* a) {
    if (leaves.count(a) && a->shape() == ir::ShapeClass::Full) return false; // an element input
    if (inRegion(a)) read.insert(a);
    return true;
  };
  for (const ir::Expr& r : roots)
    if (!use(r.get())) return {};
  const std::unordered_map<const ir::Node*, ir::Expr> owned = ir::owners(roots);
  std::vector<ir::Expr> prefix;
  for (const ir::Node* n : ir::topoOrder(roots)) {
    if (inRegion(n) || leaves.count(n)) continue;
    for (const ir::Expr& a : n->args())
      if (!use(a.get())) return {};
  }
  // Of those, the ones that read an element input other than through another one kept (add_
  // rmsnorm's h = x + residual is kept, h * h, which its pass reads, is computed from it).
  std::unordered_set<const ir::Node*> kept;
  auto readsInput = [&](const ir::Node* root) {
    std::vector<const ir::Node*> todo{root};
    std::unordered_set<const ir::Node*> seen{root};
    while (!todo.empty()) {
      const ir::Node* n = todo.back();
      todo.pop_back();
      for (const ir::Expr& a : n->args()) {
        if (kept.count(a.get()) || !seen.insert(a.get()).second) continue;
        if (leaves.count(a.get()) && a->shape() == ir::ShapeClass::Full) return true;
        if (inRegion(a.get())) todo.push_back(a.get());
      }
    }
    return false;
  };
  for (const ir::Node* n : ir::topoOrder(roots))
    if (read.count(n) && readsInput(n)) {
      kept.insert(n);
      prefix.push_back(owned.at(n));
    }
  return prefix;
}

// Program::refreshes: for each pass k after the first and before the last, the element values
// of depth <= k that the later passes' terms and the element outputs read (the frontier of
// that region, reached from them through what is not in it), and the values before it (the
// prefix or the last refresh) that pass k's own terms read besides; where something after
// pass k reads element values, the element inputs are read only through the values before it,
// and they are new values, no more than the prefix's. None where the program has no prefix: the row
// cache holds the inputs then, in their storage type, with no room for computed values.
std::vector<Program::Refresh>
chooseRefreshes(const Program& p, const std::unordered_map<const ir::Node*, int>& depth) {
  std::vector<Program::Refresh> refreshes;
  if (p.prefix.empty()) return refreshes;
  std::unordered_set<const ir::Node*> leaves;
  for (const Program::Input& in : p.inputs)
    leaves.insert(in.leaf.get());
  std::vector<ir::Expr> elementRoots; // the element outputs' values (elem computes them)
  for (const Program::Output& o : p.outputs)
    if (o.value && !o.perRow() && o.kind != OutKind::Scalar) elementRoots.push_back(o.value);
  std::vector<ir::Expr> before = p.prefix;
  const int passes = static_cast<int>(p.stages.size());
  for (int k = 1; k < passes; ++k) {
    auto inRegion = [&](const ir::Node* n) {
      return n->kind() == ir::NodeKind::Call && !leaves.count(n) &&
             n->prim()->kind == prims::PrimKind::Elementwise &&
             n->shape() == ir::ShapeClass::Full && depth.at(n) <= k;
    };
    // Walks from `n` down to `stop`'s nodes (found: collected), failing at an element input;
    // per-row and uniform values are the row's (bound by name), not walked into.
    auto walk = [&](const ir::Node* root, auto&& stop, std::unordered_set<const ir::Node*>& found) {
      std::vector<const ir::Node*> todo{root};
      std::unordered_set<const ir::Node*> seen{root};
      while (!todo.empty()) {
        const ir::Node* n = todo.back();
        todo.pop_back();
        if (stop(n)) {
          found.insert(n);
          continue;
        }
        if (leaves.count(n)) {
          if (n->shape() == ir::ShapeClass::Full) return false; // an element input
          continue;
        }
        if (n->shape() == ir::ShapeClass::Row || n->shape() == ir::ShapeClass::Scalar) continue;
        for (const ir::Expr& a : n->args())
          if (seen.insert(a.get()).second) todo.push_back(a.get());
      }
      return true;
    };
    // What the passes after k read, as high in the DAG as the region goes; then what pass k's
    // own terms read of the values before it that those do not cover (its terms compute the
    // rest from them: a variance pass's square of x - mean from x - mean).
    std::vector<ir::Expr> roots = elementRoots;
    for (int s = k + 1; s < passes; ++s)
      for (const ir::Expr& r : p.stages[s].reductions)
        roots.push_back(r->args()[0]);
    if (roots.empty()) continue; // (nothing after pass k reads element values)
    std::unordered_set<const ir::Node*> frontier;
    bool ok = true;
    for (const ir::Expr& r : roots)
      ok = ok && walk(r.get(), inRegion, frontier);
    std::unordered_set<const ir::Node*> prev, reached;
    for (const ir::Expr& e : before)
      prev.insert(e.get());
    for (const ir::Expr& r : p.stages[k].reductions) {
      roots.push_back(r->args()[0]);
      ok =
          ok && walk(
                    r->args()[0].get(),
                    [&](const ir::Node* n) { return frontier.count(n) || prev.count(n); }, reached);
    }
    for (const ir::Node* n : reached)
      frontier.insert(n);
    reached.clear();
    for (const ir::Node* f : frontier)
      ok = ok && walk(
                     f, [&](const ir::Node* n) { return prev.count(n) > 0; }, reached);
    if (!ok || frontier.empty() || frontier.size() > p.prefix.size() ||
        std::all_of(frontier.begin(), frontier.end(),
                    [&](const ir::Node* n) { return prev.count(n) > 0; }))
      continue;
    Program::Refresh r{k, {}};
    const std::unordered_map<const ir::Node*, ir::Expr> owned = ir::owners(roots);
    for (const ir::Node* n : ir::topoOrder(roots))
      if (frontier.count(n)) r.values.push_back(owned.at(n));
    before = r.values;
    refreshes.push_back(r);
  }
  return refreshes;
}

bool stageProgram(Program& p, const std::string& what, const SourceLoc& loc, Diagnostics& diags) {
  std::vector<ir::Expr> roots = values(p.outputs);
  std::unordered_map<const ir::Node*, int> depth = depths(roots);
  const std::unordered_map<const ir::Node*, ir::Expr> owner = ir::owners(roots);
  int maxDepth = 0;
  for (const auto& [n, d] : depth)
    maxDepth = std::max(maxDepth, d);
  if (maxDepth > kMaxStages) {
    diags.error(loc, "the " + what + " needs " + std::to_string(maxDepth) +
                         " passes over each row (reductions that depend on reductions); the row "
                         "plan supports at most " +
                         std::to_string(kMaxStages));
    return false;
  }
  p.stages.assign(maxDepth, {});
  // Row values in topological order, so each is computed after what it uses. A [] value that
  // depends on a [] input is one too: read once per row by rowPre, it is in scope everywhere
  // (the per-row code has no element inputs).
  for (const ir::Node* n : ir::topoOrder(roots)) {
    const bool perRow = n->shape() == ir::ShapeClass::Row ||
                        (n->shape() == ir::ShapeClass::Scalar && !n->isConstant());
    if (!perRow) continue;
    const int d = depth.at(n);
    if (isReduction(n)) p.stages[d - 1].reductions.push_back(owner.at(n));
    p.rowValues.push_back(owner.at(n));
    p.rowValueStage.push_back(d - 1);
  }
  // Stable partition by stage keeps topological order within a stage.
  std::vector<size_t> order(p.rowValues.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return p.rowValueStage[a] < p.rowValueStage[b]; });
  std::vector<ir::Expr> rv;
  std::vector<int> st;
  for (size_t i : order) {
    rv.push_back(p.rowValues[i]);
    st.push_back(p.rowValueStage[i]);
  }
  p.rowValues = rv;
  p.rowValueStage = st;
  markShiftedStages(p);
  markPlainSums(p);
  markGuards(p, roots);
  p.prefix = choosePrefix(p, roots, depth);
  p.refreshes = chooseRefreshes(p, depth);
  for (const ir::Node* n : ir::topoOrder(roots))
    p.usesColumn = p.usesColumn || n->kind() == ir::NodeKind::Column;
  for (Program::Input& in : p.inputs)
    in.readers = p.outputs.size() > 32 ? ~0u : 0u;
  for (size_t m = 0; m < p.outputs.size() && m < 32; ++m) {
    if (!p.outputs[m].value) continue;
    std::unordered_set<const ir::Node*> reached;
    for (const ir::Node* n : ir::topoOrder({p.outputs[m].value}))
      reached.insert(n);
    if (p.outputs[m].whole) // (a [] output's finish reads its whole-tensor values)
      for (const ir::Node* n : ir::topoOrder({p.outputs[m].whole}))
        reached.insert(n);
    for (Program::Input& in : p.inputs)
      if (reached.count(in.leaf.get())) in.readers |= 1u << m;
  }
  const std::unordered_map<const ir::Node*, LiveWhen> live = liveness(roots);
  for (Program::Input& in : p.inputs) {
    auto w = live.find(in.leaf.get());
    const bool element = in.shape == ir::ShapeClass::Full && !in.random && !in.position &&
                         !in.stat && in.type == spec::InputType::Dtype;
    if (element && w != live.end() && !w->second.never()) in.live = w->second;
  }
  return true;
}

// Forward per-row values the backward reads: computed values (not inputs) of reduction
// depth >= 1 that the backward uses from a full-shaped node or from a node of its own.
std::vector<SavedStat> chooseSaved(const ir::Function& fn, const autodiff::Gradient& grad) {
  std::vector<ir::Expr> fwdRoots;
  for (const ir::FunctionOutput& o : fn.outputs)
    fwdRoots.push_back(o.value);
  std::unordered_set<const ir::Node*> forward;
  for (const ir::Node* n : ir::topoOrder(fwdRoots))
    forward.insert(n);
  std::unordered_map<const ir::Node*, int> depth = depths(fwdRoots);
  std::vector<ir::Expr> bwdRoots;
  for (const ir::Expr& g : grad.inputGrads)
    if (g) bwdRoots.push_back(g);
  std::vector<SavedStat> saved;
  std::unordered_set<const ir::Node*> chosen;
  // [D] values computed from reductions over rows (batch statistics), which the backward would
  // otherwise recompute with passes over the rows of their own.
  const std::unordered_set<const ir::Node*> columnValue = ir::columnReductionUsers(fwdRoots);
  for (const ir::Node* user : ir::topoOrder(bwdRoots)) {
    bool userIsForwardStat =
        forward.count(user) && (user->shape() == ir::ShapeClass::Row ||
                                (user->shape() == ir::ShapeClass::Col && columnValue.count(user)));
    if (userIsForwardStat) continue;
    for (const ir::Expr& a : user->args()) {
      const ir::Node* n = a.get();
      if (!forward.count(n) || n->kind() != ir::NodeKind::Call || chosen.count(n)) continue;
      if (n->shape() == ir::ShapeClass::Row   ? depth.at(n) < 1
          : n->shape() == ir::ShapeClass::Col ? !columnValue.count(n)
                                              : true)
        continue;
      chosen.insert(n);
      std::string name = "stat" + std::to_string(saved.size());
      for (const auto& [letName, e] : fn.lets)
        if (e.get() == n) name = letName;
      saved.push_back({name, a});
    }
  }
  return saved;
}

// Where each [] input is used, from the forward: reverse mode gives a [] value the sum of its
// uses' adjoints, per element for a use by a [..., D] or [D] value, per row for a use by a
// per-row value. Its gradient is then summed over all elements, or over rows; with uses of
// both kinds reverse mode sums the per-element part over its row (autodiff/ReverseMode.cpp),
// so the adjoint is per row. Uses through which no gradient flows (conditions, detach: a
// derivative rule of 0) do not count.
enum ScalarUse { kUnused = 0, kElementUse = 1, kRowUse = 2, kBothUses = 3 };

bool carriesGradient(const ir::Node* n, size_t arg) {
  const expr::AstPtr& rule = n->prim()->grads[arg];
  return rule && !(rule->kind == expr::Ast::Kind::Number && rule->number == 0);
}

std::vector<int> scalarUses(const ir::Function& fn) {
  std::vector<ir::Expr> roots;
  for (const ir::FunctionOutput& o : fn.outputs)
    roots.push_back(o.value);
  std::vector<int> uses(fn.inputs.size(), kUnused);
  std::unordered_map<const ir::Node*, std::vector<int>> from; // [] node -> its [] inputs
  for (const ir::Node* n : ir::topoOrder(roots)) {
    const bool scalar = n->shape() == ir::ShapeClass::Scalar;
    if (n->kind() == ir::NodeKind::Input && scalar) from[n] = {n->index()};
    for (size_t k = 0; k < n->args().size(); ++k) {
      auto it = from.find(n->args()[k].get());
      if (it == from.end() || !carriesGradient(n, k)) continue;
      for (int i : it->second) {
        if (scalar) {
          std::vector<int>& mine = from[n];
          if (std::find(mine.begin(), mine.end(), i) == mine.end()) mine.push_back(i);
        } else {
          uses[i] |= n->shape() == ir::ShapeClass::Row ? kRowUse : kElementUse;
        }
      }
    }
  }
  return uses;
}

OutKind gradKind(ir::ShapeClass s) {
  switch (s) {
  case ir::ShapeClass::Full:
    return OutKind::Full;
  case ir::ShapeClass::Row:
    return OutKind::Row;
  case ir::ShapeClass::Col:
    return OutKind::ColSum;
  case ir::ShapeClass::Scalar:
    break;
  }
  return OutKind::Total;
}

// The runtime kernel for a staged program: the flat and colwise kernels run programs without
// passes over rows or per-row tensors, whose sums are all of element values.
// Whether the groups plan runs p: no reductions, element outputs of their own tensors, and
// inputs that omit the op's innermost named dim (all that omit any: a group's rows share their
// rows), element or [D] inputs, positions and attrs otherwise.
bool groupsPlanRuns(const Program& p) {
  if (!p.stages.empty() || p.namedDims == 0 || p.columns) return false;
  bool mapped = false;
  for (const Program::Input& in : p.inputs) {
    if (in.random || in.chunks > 1 || in.stat || (in.shape == ir::ShapeClass::Row && !in.position))
      return false;
    if (in.dims == ~0u || in.position || !in.read) continue;
    if ((in.dims >> (p.namedDims - 1)) & 1u) return false; // (it has the innermost dim)
    mapped = true;
  }
  for (const Program::Output& o : p.outputs)
    if (o.kind != OutKind::Full || o.chunks > 1) return false;
  return mapped;
}

RuntimePlan runtimePlanOf(const Program& p) {
  if (groupsPlanRuns(p)) return RuntimePlan::Groups;
  bool colwise = false;
  for (const Program::Input& in : p.inputs) {
    // (A mapped input is read at its own row, found once per row, a moved one at other
    // columns of the row: the row plan's.)
    if (in.shape == ir::ShapeClass::Row || in.position || in.dims != ~0u ||
        in.move != prims::Move::None || in.chunks > 1)
      return RuntimePlan::Row;
    colwise = colwise || in.shape == ir::ShapeClass::Col;
  }
  for (const Program::Output& o : p.outputs) {
    // (Whole-tensor maxima and minima and the [] outputs computed from them: the row plan's
    // finish.)
    if (o.kind == OutKind::Row || o.kind == OutKind::Stat || o.kind == OutKind::Scalar ||
        o.keepDims != ~0u || o.chunks > 1 ||
        (o.kind == OutKind::Total &&
         (o.totalOf != Program::TotalOf::Elements || o.combine != prims::Combine::Sum)))
      return RuntimePlan::Row;
    colwise = colwise || o.kind == OutKind::ColSum || o.kind == OutKind::ColM2 ||
              o.kind == OutKind::Total;
  }
  if (!p.stages.empty()) return RuntimePlan::Row;
  return colwise || p.usesColumn ? RuntimePlan::Colwise : RuntimePlan::Flat;
}

// Moves pushed down to the program's leaves (opt/Moves.h), its outputs' values (and the
// whole-tensor nodes its [] outputs name) rewritten to match. False, with a diagnostic at
// `loc`, where they cannot be.
bool pushProgramMoves(Program& p, const std::string& what, const SourceLoc& loc,
                      const prims::PrimitiveLibrary& lib, Diagnostics& diags,
                      std::vector<ir::Expr>* extra = nullptr) {
  std::vector<ir::Expr> roots;
  for (const Program::Output& o : p.outputs)
    if (o.value) roots.push_back(o.value);
  if (extra) roots.insert(roots.end(), extra->begin(), extra->end());
  bool any = false;
  for (const ir::Node* n : ir::topoOrder(roots))
    any = any || (n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Move);
  if (!any) return true;
  const opt::PushedMoves pushed = opt::pushMoves(roots, lib);
  if (!pushed.failure.empty()) {
    diags.error(loc, "the " + what + " needs " + pushed.failure +
                         ": moves that do not compose into one cannot be nested");
    return false;
  }
  for (Program::Output& o : p.outputs) {
    if (o.value) o.value = pushed.rebuilt.at(o.value.get());
    if (o.whole) o.whole = pushed.rebuilt.at(o.whole.get());
  }
  if (extra)
    for (ir::Expr& e : *extra)
      e = pushed.rebuilt.at(e.get());
  return true;
}

// The nodes a program's code reads as they are: its roots and the arguments of every node but
// a view's (a chunk of a packed input, a move of a leaf or of a chunk: each an input of its
// own, whose leaf is not read by itself).
std::unordered_set<const ir::Node*> readDirectly(const std::vector<ir::Expr>& roots) {
  std::unordered_set<const ir::Node*> out;
  for (const ir::Expr& r : roots)
    out.insert(r.get());
  for (const ir::Node* n : ir::topoOrder(roots)) {
    const bool view = opt::isMovedLeaf(n) || (n->isCall("chunk") && opt::isLeafView(n));
    if (!view)
      for (const ir::Expr& a : n->args())
        out.insert(a.get());
  }
  return out;
}

// The program's views of its leaves, each an input of its own: a chunk of a packed input
// (read at the chunk's columns of its rows of chunks*D) and a move of an input, an output
// gradient or a chunk (read at the moved columns, fg::Move). (A moved j is computed by the
// generated code.)
void addViewInputs(Program& p, const std::vector<ir::Expr>& extra = {}) {
  std::vector<ir::Expr> roots = values(p.outputs);
  roots.insert(roots.end(), extra.begin(), extra.end());
  const std::unordered_map<const ir::Node*, ir::Expr> owned = ir::owners(roots);
  const std::unordered_set<const ir::Node*> read = readDirectly(roots);
  for (const ir::Node* n : ir::topoOrder(roots)) {
    const bool moved = opt::isMovedLeaf(n);
    const bool chunk = n->isCall("chunk") && opt::isLeafView(n);
    if ((!moved && !chunk) || !read.count(n)) continue;
    const ir::Node* inner = moved ? n->args()[0].get() : n;
    const ir::Node* leaf = inner->isCall("chunk") ? inner->args()[0].get() : inner;
    if (leaf->kind() == ir::NodeKind::Column) continue;
    bool known = false; // (the backward starts from the forward's inputs, views too)
    for (const Program::Input& in : p.inputs)
      known = known || in.leaf.get() == n;
    if (known) continue;
    const size_t count = p.inputs.size();
    for (size_t k = 0; k < count; ++k) {
      if (p.inputs[k].leaf.get() != leaf) continue;
      Program::Input in = p.inputs[k];
      in.arg = p.inputs[k].arg.empty() ? p.inputs[k].name : p.inputs[k].arg;
      if (inner->isCall("chunk")) {
        in.chunk = static_cast<int>(inner->args()[1]->value());
        in.chunks = static_cast<int>(inner->args()[2]->value());
        in.name += "_c" + std::to_string(in.chunk);
      }
      if (moved) {
        in.move = n->prim()->move;
        in.name += std::string("_") + prims::moveName(in.move);
        if (const ir::Expr shift = opt::rollShift(n)) in.shift = owned.at(shift.get());
      }
      // (Rolls of one input by several shifts: x_roll, x_roll2, ...)
      const std::string base = in.name;
      for (int i = 2;; ++i) {
        bool taken = false;
        for (const Program::Input& o : p.inputs)
          taken = taken || o.name == in.name;
        if (!taken) break;
        in.name = base + std::to_string(i);
      }
      in.leaf = owned.at(n);
      p.inputs.push_back(in);
      break;
    }
  }
}

// The program's rolls (Program::rolls): the distinct shifts of its rolled inputs and of its
// rolled j, each input's index among them.
void numberRolls(Program& p) {
  auto indexOf = [&](const ir::Expr& shift) {
    for (size_t i = 0; i < p.rolls.size(); ++i)
      if (ir::sameValue(p.rolls[i].get(), shift.get())) return static_cast<int>(i);
    p.rolls.push_back(shift);
    return static_cast<int>(p.rolls.size() - 1);
  };
  for (Program::Input& in : p.inputs)
    if (in.shift) in.roll = indexOf(in.shift);
  for (const ir::Node* n : ir::topoOrder(values(p.outputs)))
    if (n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Move &&
        n->args()[0]->kind() == ir::NodeKind::Column)
      if (const ir::Expr shift = opt::rollShift(n)) indexOf(shift);
}

} // namespace

std::optional<KernelPlan> planOp(const spec::OpSpec& spec, const ir::Function& fn,
                                 const autodiff::Gradient& grad, const prims::PrimitiveLibrary& lib,
                                 Diagnostics& diags) {
  KernelPlan plan;
  int errorsBefore = diags.errorCount();
  // The input whose shape the outputs take: the first float [..., D] one, else the first
  // [..., D] one (int8 values with a per-row float scale); one that omits a leading dim
  // (`cos: [S, D]`, mapped) only where no input has them all. The input whose dtype is the
  // op's: that one where it is float, else the first float input of any shape.
  auto first = [&](auto&& wanted) {
    for (size_t i = 0; i < fn.inputs.size(); ++i)
      if (wanted(fn.inputs[i])) return static_cast<int>(i);
    return -1;
  };
  const auto isFloat = [](const ir::FunctionInput& in) {
    return in.type == spec::InputType::Dtype;
  };
  const auto isFull = [](const ir::FunctionInput& in) { return in.shape == ir::ShapeClass::Full; };
  // (preference: whole and float, whole, mapped and float, mapped; the first of the best)
  auto preference = [&](size_t i) {
    const bool mapped = spec::isMapped(spec, spec.inputs[i]);
    return (mapped ? 2 : 0) + (isFloat(fn.inputs[i]) ? 0 : 1);
  };
  for (size_t i = 0; i < fn.inputs.size(); ++i)
    if (isFull(fn.inputs[i]) &&
        (plan.fullInput < 0 || preference(i) < preference(static_cast<size_t>(plan.fullInput))))
      plan.fullInput = static_cast<int>(i);
  plan.dtypeInput =
      plan.fullInput >= 0 && isFloat(fn.inputs[plan.fullInput]) ? plan.fullInput : first(isFloat);
  if (plan.fullInput < 0)
    diags.error(spec.inputs.front().loc,
                "op '" + spec.name +
                    "' needs at least one input of shape [..., D]: it defines the shape of the "
                    "outputs");
  else if (plan.dtypeInput < 0)
    diags.error(spec.inputs.front().loc,
                "op '" + spec.name +
                    "' needs at least one float input: its dtype (the call's) is the outputs'");
  const std::vector<int> uses = scalarUses(fn);
  if (diags.errorCount() != errorsBefore) return std::nullopt;

  // Save-vs-recompute: the backward reads the saved per-row statistics as per-row inputs, and
  // the saved [D] ones as [D] inputs.
  for (SavedStat& s : chooseSaved(fn, grad))
    (s.value->shape() == ir::ShapeClass::Row ? plan.saved : plan.savedColumns).push_back(s);
  std::unordered_map<const ir::Node*, ir::Expr> replace;
  const int nIn = static_cast<int>(fn.inputs.size());
  for (size_t j = 0; j < plan.saved.size(); ++j)
    replace[plan.saved[j].value.get()] = ir::Node::makeInput(
        savedArgName(plan.saved[j].name), nIn + static_cast<int>(j), ir::ShapeClass::Row);

  plan.namedDims = static_cast<int>(spec.dims.size());
  // Each input's dims: ~0u (all) unless it omits some, so programs of [rows, D] classes alone
  // keep the plain row * D offsets.
  auto dimsOf = [&](size_t i) {
    return spec::isMapped(spec, spec.inputs[i]) ? spec::inputDimMask(spec, spec.inputs[i]) : ~0u;
  };
  Program& f = plan.forward;
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    const ir::FunctionInput& in = fn.inputs[i];
    Program::Input pin{in.name, in.shape, in.node, false, in.type};
    pin.dims = dimsOf(i);
    pin.chunks = in.chunks; // (a packed input is read through its chunks' inputs)
    f.inputs.push_back(pin);
  }
  // Each stream is one node (Sema makes it once per call; the derivative rules share it), which
  // the programs bind as an input. A stream no output reads (an unused let's) keeps its slot.
  plan.randomStreams = static_cast<int>(fn.randomStreams.size());
  for (const ir::Expr& stream : fn.randomStreams) {
    Program::Input in{stream->name(), ir::ShapeClass::Full, stream};
    in.random = true;
    f.inputs.push_back(in);
  }
  // Each pos(S) the formulas read: an input of its own, computed by the runtime per row. The
  // backward starts from the forward's inputs, so those its gradients alone read are found
  // here too (a with_grad's stated derivative, which the forward drops: y = with_grad(x, x,
  // pos(S) * w)).
  {
    std::vector<ir::Expr> roots;
    for (const ir::FunctionOutput& o : fn.outputs)
      roots.push_back(o.value);
    for (const ir::Expr& g : grad.inputGrads)
      if (g) roots.push_back(g);
    const std::unordered_map<const ir::Node*, ir::Expr> owned = ir::owners(roots);
    for (const ir::Node* n : ir::topoOrder(roots)) {
      if (n->kind() != ir::NodeKind::Position) continue;
      Program::Input in{"_pos_" + n->name(), ir::ShapeClass::Row, owned.at(n)};
      in.position = true;
      in.dims = 1u << n->index();
      f.inputs.push_back(in);
    }
  }
  for (const ir::FunctionOutput& o : fn.outputs)
    f.outputs.push_back(
        {o.name,
         o.value->shape() == ir::ShapeClass::Scalar ? OutKind::Scalar : gradKind(o.value->shape()),
         o.value, Program::TotalOf::Elements, o.type});
  for (const SavedStat& s : plan.saved)
    f.outputs.push_back({savedArgName(s.name), OutKind::Stat, s.value});
  // The whole-tensor values of the [] outputs: Total outputs of their argument (an element or
  // per-row value), combined over every row and saved in the compute type.
  std::vector<ir::Expr> outputValues;
  for (const ir::FunctionOutput& o : fn.outputs)
    outputValues.push_back(o.value);
  const std::unordered_map<const ir::Node*, ir::Expr> owner = ir::owners(outputValues);
  for (const ir::Node* n : ir::topoOrder(outputValues)) {
    if (!ir::isWholeTensorValue(n)) continue;
    std::string name = "total" + std::to_string(plan.savedTotals.size());
    for (const auto& [letName, e] : fn.lets)
      if (e.get() == n) name = letName;
    const ir::Expr& node = owner.at(n);
    plan.savedTotals.push_back({name, node});
    const ir::Expr& arg = n->args()[0];
    Program::Output total{savedArgName(name), OutKind::Total, arg,
                          arg->shape() == ir::ShapeClass::Full ? Program::TotalOf::Elements
                                                               : Program::TotalOf::Rows,
                          spec::OutputType::Compute};
    total.combine = n->prim()->combine;
    total.whole = node;
    f.outputs.push_back(total);
  }
  for (size_t k = 0; k < plan.savedTotals.size(); ++k)
    replace[plan.savedTotals[k].value.get()] =
        ir::Node::makeInput(savedArgName(plan.savedTotals[k].name),
                            nIn + static_cast<int>(plan.saved.size() + k), ir::ShapeClass::Scalar);
  for (size_t k = 0; k < plan.savedColumns.size(); ++k)
    replace[plan.savedColumns[k].value.get()] =
        ir::Node::makeInput(savedArgName(plan.savedColumns[k].name),
                            nIn + static_cast<int>(plan.saved.size() + plan.savedTotals.size() + k),
                            ir::ShapeClass::Col);

  // The parts of cat outputs past the first, stored into the first's packed tensor.
  for (size_t m = 0; m < fn.outputs.size(); ++m) {
    const std::vector<ir::Expr>& parts = fn.outputs[m].parts;
    if (parts.empty()) continue;
    f.outputs[m].value = parts[0];
    f.outputs[m].chunks = static_cast<int>(parts.size());
    for (size_t c = 1; c < parts.size(); ++c) {
      Program::Output o = f.outputs[m];
      o.name += "_c" + std::to_string(c);
      o.value = parts[c];
      o.chunk = static_cast<int>(c);
      o.result = static_cast<int>(m);
      f.outputs.push_back(o);
    }
  }
  Program& b = plan.backward;
  b.inputs = f.inputs;
  for (size_t j = 0; j < plan.saved.size(); ++j)
    b.inputs.push_back({savedArgName(plan.saved[j].name), ir::ShapeClass::Row,
                        replace.at(plan.saved[j].value.get()), /*stat=*/true});
  for (const SavedStat& t : plan.savedTotals)
    b.inputs.push_back({savedArgName(t.name), ir::ShapeClass::Scalar, replace.at(t.value.get()),
                        /*stat=*/true});
  for (const SavedStat& c : plan.savedColumns)
    b.inputs.push_back({savedArgName(c.name), ir::ShapeClass::Col, replace.at(c.value.get()),
                        /*stat=*/true});
  for (size_t m = 0; m < fn.outputs.size(); ++m)
    if (grad.gradOuts[m]) { // (an output of its own type has none)
      Program::Input in{gradArgName(fn.outputs[m].name), grad.gradOuts[m]->shape(),
                        grad.gradOuts[m]};
      if (!fn.outputs[m].parts.empty()) // a cat output's: read in chunks
        in.chunks = static_cast<int>(fn.outputs[m].parts.size());
      b.inputs.push_back(in);
    }
  std::vector<ir::Expr> grads;
  for (size_t i = 0; i < grad.inputGrads.size(); ++i) {
    const ir::Expr& g = grad.inputGrads[i];
    grads.push_back(g && fn.inputs[i].type == spec::InputType::Dtype ? ir::substitute(g, replace)
                                                                     : nullptr);
  }
  grads = opt::cse(grads);
  std::vector<Program::Output> chunkOutputs; // chunks 1... of packed inputs' gradients
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    Program::Output o{"grad_" + fn.inputs[i].name, gradKind(fn.inputs[i].shape), grads[i]};
    if (fn.inputs[i].chunks > 1) { // stored chunk by chunk into one packed gradient
      o.chunks = fn.inputs[i].chunks;
      for (int c = 0; c < o.chunks; ++c) {
        const ir::Expr& gc = grad.chunkGrads[i].empty() ? nullptr : grad.chunkGrads[i][c];
        Program::Output oc = o;
        oc.value = gc ? ir::substitute(gc, replace) : nullptr;
        oc.chunk = c;
        if (c == 0) {
          o = oc;
        } else {
          oc.name += "_c" + std::to_string(c);
          oc.result = static_cast<int>(i);
          chunkOutputs.push_back(oc);
        }
      }
    }
    // A [] input's adjoint is per row where (some of) its uses are, else per element; a
    // per-element adjoint of one value per row is summed as D times that value, not D
    // additions. (One that varies per column, from a use in a [D] value such as
    // colmean(x) * s, is summed over the elements.)
    // An input the forward does not read (only a with_grad's stated derivative reaches it, and
    // those are gone from `fn`) has no uses to tell: its adjoint's own shape does.
    if (o.kind == OutKind::Total && o.value && o.value->shape() != ir::ShapeClass::Full &&
        o.value->shape() != ir::ShapeClass::Col) {
      const bool perRow = uses[i] == kRowUse || uses[i] == kBothUses ||
                          (uses[i] == kUnused && o.value->shape() == ir::ShapeClass::Row);
      o.totalOf = perRow ? Program::TotalOf::Rows : Program::TotalOf::RowsTimesD;
    }
    if (dimsOf(i) != ~0u) { // summed over the dims the input omits, by the glue
      o.keepDims = dimsOf(i);
      o.type = spec::OutputType::Compute;
    }
    b.outputs.push_back(o);
  }
  b.outputs.insert(b.outputs.end(), chunkOutputs.begin(), chunkOutputs.end());

  SourceLoc loc = spec.outputs.front().formulaLoc;
  // The saved [D] statistics are computed by the forward's column programs (below), from the
  // forward's values: their moves are pushed with the forward's, and the leaves they read moved
  // are inputs of the forward too (the backward reads each statistic as it is).
  std::vector<ir::Expr> savedColumnValues;
  for (const SavedStat& c : plan.savedColumns)
    savedColumnValues.push_back(c.value);
  if (!pushProgramMoves(f, "forward", loc, lib, diags, &savedColumnValues) ||
      !pushProgramMoves(b, "derived backward", loc, lib, diags))
    return std::nullopt;
  for (size_t k = 0; k < plan.savedColumns.size(); ++k)
    plan.savedColumns[k].value = savedColumnValues[k];
  addViewInputs(f, savedColumnValues);
  addViewInputs(b);
  // Reductions over rows: programs of their own before each direction's main one. The [D]
  // outputs and the saved [D] statistics are results of those; the main program passes them on.
  {
    std::vector<ir::Expr> keep;
    std::vector<int> columnOutputs;
    for (size_t m = 0; m < f.outputs.size(); ++m)
      if (f.outputs[m].value && f.outputs[m].value->shape() == ir::ShapeClass::Col &&
          ir::usesColumnReduction(f.outputs[m].value)) {
        columnOutputs.push_back(static_cast<int>(m));
        keep.push_back(f.outputs[m].value);
      }
    for (const SavedStat& c : plan.savedColumns)
      keep.push_back(c.value);
    std::unordered_map<const ir::Node*, int> results;
    plan.forwardBefore = splitColumnPasses(f, keep, "", results);
    for (size_t i = 0; i < columnOutputs.size(); ++i) {
      const int m = columnOutputs[i];
      f.outputs[m].passed = results.at(keep[i].get());
      f.outputs[m].kind = OutKind::Passed;
      f.outputs[m].value = nullptr;
    }
    for (const SavedStat& c : plan.savedColumns) {
      Program::Output o{savedArgName(c.name), OutKind::Passed, nullptr};
      o.type = spec::OutputType::Compute;
      o.passed = results.at(c.value.get());
      f.outputs.push_back(o);
    }
    std::unordered_map<const ir::Node*, int> none;
    plan.backwardBefore = splitColumnPasses(b, {}, "", none);
  }
  // The chunks past the first of a cat output or a packed gradient write into their chunk 0's
  // tensor, so they come after every output with a tensor of its own (fusegen_glue.h's
  // ownResults), the saved [D] statistics just appended included.
  for (Program* p : {&f, &b})
    std::stable_partition(p->outputs.begin(), p->outputs.end(),
                          [](const Program::Output& o) { return o.result < 0; });
  if (plan.randomStreams > 0 && (!plan.forwardBefore.empty() || !plan.backwardBefore.empty())) {
    diags.error(loc, "op '" + spec.name +
                         "' draws random numbers and reduces over the rows (colsum, colmean): "
                         "each pass over the rows would draw numbers of its own; draw them in an "
                         "op of their own");
    return std::nullopt;
  }
  std::vector<Program*> programs{&f, &b};
  for (Program& p : plan.forwardBefore)
    programs.push_back(&p);
  for (Program& p : plan.backwardBefore)
    programs.push_back(&p);
  for (Program* p : programs) {
    if (!stageProgram(*p, p == &b ? "derived backward" : "forward", loc, diags))
      return std::nullopt;
    p->namedDims = plan.namedDims;
    p->plan = runtimePlanOf(*p);
    numberRolls(*p);
    // Inputs a program does not read as they are (a packed input, read in chunks; an input
    // read only at moved columns) are not loaded (fg::Bcast::Unread).
    const std::unordered_set<const ir::Node*> read = readDirectly(values(p->outputs));
    for (Program::Input& in : p->inputs)
      if (!in.random && !in.position) in.read = read.count(in.leaf.get()) > 0;
  }
  // The backward's tensors, directly or through their views, in any of its programs.
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    bool save = false;
    std::vector<const Program*> backward{&b};
    for (const Program& p : plan.backwardBefore)
      backward.push_back(&p);
    for (const Program* p : backward) {
      save = save || p->inputs[i].read;
      for (const Program::Input& in : p->inputs)
        save = save || (in.read && in.arg == fn.inputs[i].name);
    }
    plan.saveInputs.push_back(save);
  }
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    const ir::Expr& g = b.outputs[i].value;
    const bool same = g && g->kind() == ir::NodeKind::GradOut && dimsOf(i) == ~0u &&
                      fn.inputs[i].chunks == 1 &&
                      fn.outputs[g->index()].value->shape() == fn.inputs[i].shape;
    int differentiable = 0; // g's output among the differentiable ones
    for (int m = 0; same && m < g->index(); ++m)
      differentiable += fn.outputs[m].differentiable();
    plan.passthrough.push_back(same ? differentiable : -1);
  }
  return plan;
}

void saveSecondOrderInputs(KernelPlan& plan, const ir::Function& fn,
                           const autodiff::SecondOrder& grad2) {
  if (!grad2.failure.empty()) return; // (no second derivatives: the glue refuses them)
  std::vector<ir::Expr> roots;
  for (const std::vector<ir::Expr>* grads : {&grad2.inputGrads, &grad2.gradOutGrads})
    for (const ir::Expr& g : *grads)
      if (g) roots.push_back(g);
  for (const ir::Node* n : ir::topoOrder(roots)) {
    if (n->kind() != ir::NodeKind::Input) continue;
    for (size_t i = 0; i < fn.inputs.size() && i < plan.saveInputs.size(); ++i)
      if (fn.inputs[i].name == n->name()) plan.saveInputs[i] = true;
  }
}

std::string describePlan(const ir::Function& fn, const KernelPlan& plan) {
  std::ostringstream out;
  out << "op " << fn.name << "\n";
  auto program = [&](const std::string& what, const Program& p) {
    out << "  " << what << ": " << (p.columns ? "[D] values over one row of D, " : "")
        << (p.plan == RuntimePlan::Flat      ? "flat plan (128-bit vectors over all elements)"
            : p.plan == RuntimePlan::Colwise ? "colwise plan ([D] values in registers, rows "
                                               "walked per column)"
            : p.plan == RuntimePlan::Groups
                ? "groups plan (the rows that read the same rows of the inputs omitting the "
                  "innermost named dims, in one thread)"
                : "row plan (each row kept on chip)")
        << ", " << p.stages.size() << " reduction pass(es) over each row";
    for (size_t s = 0; s < p.stages.size(); ++s) {
      out << (s ? "; " : " (") << "pass " << s + 1 << ":";
      for (size_t j = 0; j < p.stages[s].reductions.size(); ++j)
        out << " " << p.stages[s].reductions[j]->prim()->name
            << (p.stages[s].pick[j]    ? " (a pick: the element at one column, loaded)"
                : p.stages[s].plain[j] ? " (of terms >= 0)"
                                       : "")
            << (!p.stages[s].guard[j]      ? ""
                : p.stages[s].guardWhen[j] ? " (only when a uniform condition holds)"
                                           : " (only when a uniform condition fails)");
      if (!p.stages[s].shift.empty() && p.stages[s].shift[0] >= 0)
        out << ", shifted by pass " << s << "'s maxima (one combination with it)";
    }
    out << (p.stages.empty() ? "" : ")") << ", " << p.rowValues.size() << " per-row value(s)\n";
    if (!p.prefix.empty())
      out << "    prefix: " << p.prefix.size()
          << " value(s) per element that the passes read, computed once per element\n";
    for (const Program::Refresh& r : p.refreshes)
      out << "    refreshed in pass " << r.pass + 1 << ": " << r.values.size()
          << " value(s) per element in the prefix's place, which the passes after it read\n";
    for (const Program::Input& in : p.inputs)
      if (!in.live.always)
        out << "    input " << in.name << ": read only under " << in.live.any.size()
            << " condition(s) on the column and the row; the row plan skips vectors where none "
               "holds\n";
    for (const Program::Output& o : p.outputs)
      out << "    output " << o.name << ": "
          << (o.kind == OutKind::Passed
                  ? "[D], result " + std::to_string(o.passed) + " of the programs before"
              : o.kind == OutKind::Full && p.columns ? std::string("[D]")
              : o.kind == OutKind::Full              ? std::string("[..., D]")
              : o.kind == OutKind::Row               ? "[...]"
              : o.kind == OutKind::Stat              ? "[...] in the compute type, for the backward"
              : o.kind == OutKind::ColSum            ? "[D] sum over rows (partials + finalize)"
              : o.kind == OutKind::ColM2
                  ? "[D] sum over rows of squared deviations from the column mean, one pass "
                    "(Welford partials + Chan's merge)"
              : o.kind == OutKind::Scalar
                  ? "[] computed once from the whole-tensor values, after every row (finish)"
              : o.totalOf == Program::TotalOf::Rows
                  ? std::string("[] ") + prims::combineName(o.combine) +
                        " over rows of a per-row value (partials + finalize)"
              : o.totalOf == Program::TotalOf::RowsTimesD
                  ? "[] sum over rows of D times a per-row value (partials + finalize)"
                  : std::string("[] ") + prims::combineName(o.combine) +
                        " over rows and columns (partials + finalize)")
          << (o.value || o.kind == OutKind::Passed ? "" : " (zero)")
          << (o.chunks > 1
                  ? ", chunk " + std::to_string(o.chunk) + " of " + std::to_string(o.chunks) +
                        " of a packed [..., " + std::to_string(o.chunks) + "*D] tensor"
                  : std::string())
          << (o.keepDims != ~0u ? " in the compute type, summed by the glue over the leading "
                                  "dims its input omits"
              : o.type == spec::OutputType::Dtype ? ""
              : o.type == spec::OutputType::Compute
                  ? " in the compute type, for the backward"
                  : std::string(" stored as ") + spec::outputTypeName(o.type) + ", no gradient")
          << "\n";
  };
  int result = 0;
  auto before = [&](const char* what, const std::vector<Program>& programs) {
    for (size_t k = 0; k < programs.size(); ++k) {
      program(std::string(what) + " program " + std::to_string(k) + " (results " +
                  std::to_string(result) + "..." +
                  std::to_string(result + programs[k].outputs.size() - 1) + ")",
              programs[k]);
      result += static_cast<int>(programs[k].outputs.size());
    }
    result = 0;
  };
  before("forward", plan.forwardBefore);
  program("forward", plan.forward);
  before("backward", plan.backwardBefore);
  program("backward", plan.backward);
  if (plan.randomStreams)
    out << "  random streams: " << plan.randomStreams
        << " (Philox; the forward returns its seed and offset, the backward redraws)\n";
  std::string unread;
  for (size_t i = 0; i < fn.inputs.size(); ++i)
    if (!plan.saveInputs[i]) unread += (unread.empty() ? "" : ", ") + fn.inputs[i].name;
  out << "  saved for backward: inputs" << (unread.empty() ? "" : " but " + unread);
  for (const SavedStat& s : plan.saved)
    out << ", " << s.name << " [...]";
  for (const SavedStat& s : plan.savedTotals)
    out << ", " << s.name << " []";
  for (const SavedStat& s : plan.savedColumns)
    out << ", " << s.name << " [D]";
  out << "; every elementwise value is recomputed\n";
  std::vector<std::string> differentiable; // (passthrough indexes these)
  for (const ir::FunctionOutput& o : fn.outputs)
    if (o.differentiable()) differentiable.push_back(o.name);
  for (size_t i = 0; i < plan.passthrough.size(); ++i)
    if (plan.passthrough[i] >= 0)
      out << "  gradient of " << fn.inputs[i].name << ": the gradient of "
          << differentiable[plan.passthrough[i]] << ", passed on\n";
  return out.str();
}

} // namespace fusegen::plan
