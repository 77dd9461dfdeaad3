// Plan selection, save-vs-recompute, and the staging of row programs.
#include "plan/KernelPlan.h"

#include "opt/Simplify.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fusegen::plan {

namespace {

constexpr int kMaxStages = 4; // the runtime's row plan unrolls at most this many passes

bool isReduction(const ir::Node* n) {
  return n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Reduction;
}

std::vector<ir::Expr> values(const std::vector<RowProgram::Output>& outs) {
  std::vector<ir::Expr> v;
  for (const RowProgram::Output& o : outs)
    if (o.value) v.push_back(o.value);
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
bool stageProgram(RowProgram& p, const std::string& what, const SourceLoc& loc,
                  Diagnostics& diags) {
  std::vector<ir::Expr> roots = values(p.outputs);
  std::unordered_map<const ir::Node*, int> depth = depths(roots);
  std::unordered_map<const ir::Node*, ir::Expr> owner;
  for (const ir::Expr& r : roots)
    owner[r.get()] = r;
  for (const ir::Node* n : ir::topoOrder(roots))
    for (const ir::Expr& a : n->args())
      owner[a.get()] = a;
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
  // Row values in topological order, so each is computed after what it uses.
  for (const ir::Node* n : ir::topoOrder(roots)) {
    if (n->shape() != ir::ShapeClass::Row) continue;
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
  for (const ir::Node* user : ir::topoOrder(bwdRoots)) {
    bool userIsForwardRow = forward.count(user) && user->shape() == ir::ShapeClass::Row;
    if (userIsForwardRow) continue;
    for (const ir::Expr& a : user->args()) {
      const ir::Node* n = a.get();
      if (!forward.count(n) || n->kind() != ir::NodeKind::Call ||
          n->shape() != ir::ShapeClass::Row || depth.at(n) < 1 || chosen.count(n))
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

OutKind gradKind(ir::ShapeClass s) {
  return s == ir::ShapeClass::Full  ? OutKind::Full
         : s == ir::ShapeClass::Row ? OutKind::Row
                                    : OutKind::ColSum;
}

} // namespace

std::optional<KernelPlan> planOp(const spec::OpSpec& spec, const ir::Function& fn,
                                 const autodiff::Gradient& grad, Diagnostics& diags) {
  KernelPlan plan;
  int errorsBefore = diags.errorCount();
  bool rowPlan = false;
  for (const ir::FunctionInput& in : fn.inputs)
    rowPlan = rowPlan || in.shape == ir::ShapeClass::Row;
  std::vector<ir::Expr> all;
  for (const ir::FunctionOutput& o : fn.outputs) {
    all.push_back(o.value);
    rowPlan = rowPlan || o.value->shape() == ir::ShapeClass::Row;
  }
  for (const ir::Expr& g : grad.inputGrads)
    if (g) all.push_back(g);
  for (const ir::Node* n : ir::topoOrder(all))
    rowPlan = rowPlan || isReduction(n);
  plan.kind = rowPlan ? PlanKind::Row : PlanKind::Pointwise;

  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    ir::ShapeClass s = fn.inputs[i].shape;
    if (s == ir::ShapeClass::Full && plan.fullInput < 0) plan.fullInput = static_cast<int>(i);
    plan.hasColInputs = plan.hasColInputs || s == ir::ShapeClass::Col;
    plan.reducedGrad.push_back(s == ir::ShapeClass::Col || s == ir::ShapeClass::Scalar);
    if (rowPlan && s == ir::ShapeClass::Scalar)
      diags.error(spec.inputs[i].loc,
                  "input '" + fn.inputs[i].name +
                      "' is a 0-dim tensor []; ops with reductions or per-row values take "
                      "scalars as attrs (attrs: {" +
                      fn.inputs[i].name + ": {type: float}})");
  }
  if (plan.fullInput < 0)
    diags.error(spec.inputs.front().loc,
                "op '" + spec.name +
                    "' needs at least one input of shape [..., D]: it defines the "
                    "shape of the outputs");
  if (diags.errorCount() != errorsBefore) return std::nullopt;
  if (!rowPlan) return plan;

  // Save-vs-recompute: the backward reads the saved per-row statistics as per-row inputs.
  plan.saved = chooseSaved(fn, grad);
  std::unordered_map<const ir::Node*, ir::Expr> replace;
  const int nIn = static_cast<int>(fn.inputs.size());
  for (size_t j = 0; j < plan.saved.size(); ++j)
    replace[plan.saved[j].value.get()] = ir::Node::makeInput(
        "saved_" + plan.saved[j].name, nIn + static_cast<int>(j), ir::ShapeClass::Row);

  RowProgram& f = plan.forward;
  for (const ir::FunctionInput& in : fn.inputs)
    f.inputs.push_back({in.name, in.shape, in.node});
  for (const ir::FunctionOutput& o : fn.outputs)
    f.outputs.push_back({o.name, gradKind(o.value->shape()), o.value});
  for (const SavedStat& s : plan.saved)
    f.outputs.push_back({"saved_" + s.name, OutKind::Row, s.value});

  RowProgram& b = plan.backward;
  b.inputs = f.inputs;
  for (size_t j = 0; j < plan.saved.size(); ++j)
    b.inputs.push_back({"saved_" + plan.saved[j].name, ir::ShapeClass::Row,
                        replace.at(plan.saved[j].value.get())});
  for (size_t m = 0; m < fn.outputs.size(); ++m)
    b.inputs.push_back({"grad_" + fn.outputs[m].name, grad.gradOuts[m]->shape(), grad.gradOuts[m]});
  std::vector<ir::Expr> grads;
  for (const ir::Expr& g : grad.inputGrads)
    grads.push_back(g ? ir::substitute(g, replace) : nullptr);
  grads = opt::cse(grads);
  for (size_t i = 0; i < fn.inputs.size(); ++i)
    b.outputs.push_back({"grad_" + fn.inputs[i].name, gradKind(fn.inputs[i].shape), grads[i]});

  SourceLoc loc = spec.outputs.front().formulaLoc;
  if (!stageProgram(f, "forward", loc, diags) || !stageProgram(b, "derived backward", loc, diags))
    return std::nullopt;
  return plan;
}

std::string describePlan(const ir::Function& fn, const KernelPlan& plan) {
  std::ostringstream out;
  if (plan.kind == PlanKind::Pointwise) {
    out << "op " << fn.name << ": pointwise plan, "
        << (plan.hasColInputs ? "colwise forward ([D] inputs kept in registers)"
                              : "flat forward (128-bit vectors)")
        << "\n";
    for (size_t i = 0; i < fn.inputs.size(); ++i)
      out << "  input " << fn.inputs[i].name << " " << spec::shapeClassSpelling(fn.inputs[i].shape)
          << (plan.reducedGrad[i] ? ": gradient summed over broadcast dims (partials + finalize)"
                                  : ": gradient elementwise")
          << "\n";
    out << "  saved for backward: inputs only; every intermediate is recomputed\n";
    return out.str();
  }
  out << "op " << fn.name << ": row plan\n";
  auto program = [&](const char* what, const RowProgram& p) {
    out << "  " << what << ": " << p.stages.size() << " reduction pass(es) over each row";
    for (size_t s = 0; s < p.stages.size(); ++s) {
      out << (s ? "; " : " (") << "pass " << s + 1 << ":";
      for (const ir::Expr& r : p.stages[s].reductions)
        out << " " << r->prim()->name;
    }
    out << (p.stages.empty() ? "" : ")") << ", " << p.rowValues.size() << " per-row value(s)\n";
    for (const RowProgram::Output& o : p.outputs)
      out << "    output " << o.name << ": "
          << (o.kind == OutKind::Full  ? "[..., D]"
              : o.kind == OutKind::Row ? "[...]"
                                       : "[D] sum over rows (partials + finalize)")
          << (o.value ? "" : " (zero)") << "\n";
  };
  program("forward", plan.forward);
  program("backward", plan.backward);
  out << "  saved for backward: inputs";
  for (const SavedStat& s : plan.saved)
    out << ", " << s.name << " [...]";
  out << "; every elementwise value is recomputed\n";
  return out.str();
}

} // namespace fusegen::plan
