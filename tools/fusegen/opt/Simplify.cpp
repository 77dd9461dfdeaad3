// Constant folding, algebraic simplification and common-subexpression elimination.
#include "opt/Simplify.h"

#include "ir/Interpreter.h"

#include <cmath>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace fusegen::opt {

ir::Expr Simplifier::call(const char* primName, std::vector<ir::Expr> args) {
  const prims::Primitive* p = lib_.find(primName, args.size());
  if (!p) throw std::logic_error(std::string("the primitive library lacks '") + primName + "'");
  ir::Expr result = rewrite(ir::Node::makeCall(p, std::move(args)));
  remember(result, result);
  return result;
}

void Simplifier::keep(const ir::Expr& e) {
  if (!e) return;
  remember(e, e);
  for (const ir::Node* n : ir::topoOrder({e}))
    for (const ir::Expr& a : n->args())
      remember(a, a);
}

ir::Expr Simplifier::simplified(const ir::Expr& e) const {
  auto it = done_.find(e.get());
  return it == done_.end() ? e : it->second.second;
}

void Simplifier::remember(const ir::Expr& e, const ir::Expr& result) {
  done_.emplace(e.get(), std::make_pair(e, result));
  done_.emplace(result.get(), std::make_pair(result, result)); // results are simplified
}

namespace {
// True when a reduction's finish formula is linear in `acc` (none, acc * c, c * acc, acc / c
// with c free of acc): then the reduction is linear and factors can move out of it.
bool mentionsAcc(const expr::AstPtr& a) {
  if (a->kind == expr::Ast::Kind::Name) return a->name == "acc";
  for (const expr::AstPtr& x : a->args)
    if (mentionsAcc(x)) return true;
  return false;
}

bool linearFinish(const expr::AstPtr& f) {
  if (!f || (f->kind == expr::Ast::Kind::Name && f->name == "acc")) return true;
  if (f->kind != expr::Ast::Kind::Call) return false;
  if (f->name == "mul")
    return (linearFinish(f->args[0]) && !mentionsAcc(f->args[1])) ||
           (linearFinish(f->args[1]) && !mentionsAcc(f->args[0]));
  if (f->name == "div") return linearFinish(f->args[0]) && !mentionsAcc(f->args[1]);
  return false;
}
} // namespace

// Rewrites one Call node whose arguments are already simplified.
ir::Expr Simplifier::rewrite(const ir::Expr& e) {
  if (e->kind() != ir::NodeKind::Call) return e;
  const auto& a = e->args();
  const std::string& p = e->prim()->name;
  bool allConst = !a.empty();
  for (const ir::Expr& x : a)
    allConst = allConst && x->kind() == ir::NodeKind::Const;
  if (allConst && e->prim()->kind == prims::PrimKind::Elementwise && e->prim()->eval) {
    std::vector<double> values;
    for (const ir::Expr& x : a)
      values.push_back(x->value());
    double v = ir::applyPrimitive(*e->prim(), values);
    if (std::isfinite(v) && e->type() == ir::ValueType::Value) return ir::Node::makeConst(v);
  }
  if (p == "add") {
    if (a[0]->isConst(0)) return a[1];
    if (a[1]->isConst(0)) return a[0];
    if (a[1]->isCall("neg")) return call("sub", {a[0], a[1]->args()[0]});
  } else if (p == "sub") {
    if (a[1]->isConst(0)) return a[0];
    if (a[0]->isConst(0)) return call("neg", {a[1]});
    if (a[1]->isCall("neg")) return call("add", {a[0], a[1]->args()[0]});
  } else if (p == "mul") {
    for (int i = 0; i < 2; ++i) {
      const ir::Expr& k = a[i];
      const ir::Expr& other = a[1 - i];
      if (k->isConst(0)) return k;
      if (k->isConst(1)) return other;
      if (k->isConst(-1)) return call("neg", {other});
    }
    if (a[0]->isCall("neg") && a[1]->isCall("neg"))
      return call("mul", {a[0]->args()[0], a[1]->args()[0]});
    if (a[0]->isCall("neg")) return call("neg", {call("mul", {a[0]->args()[0], a[1]})});
    if (a[1]->isCall("neg")) return call("neg", {call("mul", {a[0], a[1]->args()[0]})});
  } else if (p == "div") {
    if (a[1]->isConst(1)) return a[0];
    if (a[0]->isConst(0)) return a[0];
    if (a[0]->isCall("neg")) return call("neg", {call("div", {a[0]->args()[0], a[1]})});
  } else if (p == "neg") {
    if (a[0]->isCall("neg")) return a[0]->args()[0];
  } else if (p == "where") {
    if (a[1].get() == a[2].get()) return a[1];
  } else if (e->prim()->kind == prims::PrimKind::Reduction &&
             e->prim()->combine == prims::Combine::Sum && linearFinish(e->prim()->finish)) {
    // Linearity: pull negation, sums and per-row factors out of sum/mean, so a reduction
    // depends on fewer earlier reductions and the row plan needs fewer passes.
    const ir::Expr& x = a[0];
    auto perRow = [](const ir::Expr& v) {
      return v->shape() == ir::ShapeClass::Row || v->shape() == ir::ShapeClass::Scalar;
    };
    auto full = [](const ir::Expr& v) { return v->shape() == ir::ShapeClass::Full; };
    if (x->isCall("neg")) return call("neg", {call(p.c_str(), {x->args()[0]})});
    if ((x->isCall("add") || x->isCall("sub")) && full(x->args()[0]) && full(x->args()[1]))
      return call(x->prim()->name.c_str(),
                  {call(p.c_str(), {x->args()[0]}), call(p.c_str(), {x->args()[1]})});
    if (x->isCall("mul") && perRow(x->args()[1])) {
      ir::Expr reduced = call(p.c_str(), {x->args()[0]});
      return unlessRowEmpty(reduced, call("mul", {reduced, x->args()[1]}), x->args()[1]);
    }
    if (x->isCall("mul") && perRow(x->args()[0])) {
      ir::Expr reduced = call(p.c_str(), {x->args()[1]});
      return unlessRowEmpty(reduced, call("mul", {x->args()[0], reduced}), x->args()[0]);
    }
    if (x->isCall("div") && perRow(x->args()[1])) {
      ir::Expr reduced = call(p.c_str(), {x->args()[0]});
      return unlessRowEmpty(reduced, call("div", {reduced, x->args()[1]}), x->args()[1]);
    }
  }
  return e;
}

ir::Expr Simplifier::unlessRowEmpty(const ir::Expr& empty, const ir::Expr& value,
                                    const ir::Expr& factor) {
  if (factor && factor->kind() == ir::NodeKind::Const && std::isfinite(factor->value()))
    return value; // finite times the empty sum is the empty sum
  return call("where", {call("eq", {ir::Node::makeDim(), ir::Node::makeConst(0)}), empty, value});
}

ir::Expr Simplifier::simplify(const ir::Expr& root) {
  // Post-order with an explicit stack that does not enter nodes simplified before.
  auto pending = [this](const ir::Expr& e) {
    return e->kind() == ir::NodeKind::Call && !done_.count(e.get());
  };
  std::vector<std::pair<ir::Expr, size_t>> stack;
  if (pending(root)) stack.emplace_back(root, 0);
  while (!stack.empty()) {
    const ir::Expr node = stack.back().first;
    size_t& next = stack.back().second;
    if (next < node->args().size()) {
      const ir::Expr& a = node->args()[next++];
      if (pending(a)) stack.emplace_back(a, 0);
      continue;
    }
    stack.pop_back();
    std::vector<ir::Expr> args;
    bool same = true;
    for (const ir::Expr& a : node->args()) {
      args.push_back(simplified(a));
      same = same && args.back().get() == a.get();
    }
    remember(node, rewrite(same ? node : ir::Node::makeCall(node->prim(), std::move(args))));
  }
  return simplified(root);
}

std::vector<ir::Expr> cse(const std::vector<ir::Expr>& roots) {
  // Shared pointers of every node: leaves keep their identity, calls are rebuilt.
  const std::unordered_map<const ir::Node*, ir::Expr> owner = ir::owners(roots);
  std::vector<const ir::Node*> order = ir::topoOrder(roots);

  std::unordered_map<size_t, std::vector<ir::Expr>> table; // hash -> canonical nodes
  std::unordered_map<const ir::Node*, ir::Expr> canon;
  for (const ir::Node* n : order) {
    ir::Expr candidate = owner.at(n);
    if (n->kind() == ir::NodeKind::Call) {
      std::vector<ir::Expr> args;
      bool same = true;
      for (const ir::Expr& a : n->args()) {
        args.push_back(canon.at(a.get()));
        same = same && args.back().get() == a.get();
      }
      // A node whose arguments are already canonical keeps its identity.
      if (!same) candidate = ir::Node::makeCall(n->prim(), std::move(args));
    }
    ir::Expr found;
    for (const ir::Expr& existing : table[candidate->hash()])
      if (existing->shallowEquals(*candidate)) found = existing;
    if (!found) {
      table[candidate->hash()].push_back(candidate);
      found = candidate;
    }
    canon[n] = found;
  }
  std::vector<ir::Expr> out;
  for (const ir::Expr& r : roots)
    out.push_back(r ? canon.at(r.get()) : nullptr);
  return out;
}

namespace {
// with_grad(value, x, dx, ...) without its stated derivatives. A with_grad is as wide as its
// arguments (the join of their classes, like any elementwise call: docs/spec-language.md), so
// where value is narrower it is broadcast: with_grad(value, w, 0, ...), whose witnesses w are
// the fewest and cheapest nodes (inputs under the arguments first, then the arguments) that
// widen it to the with_grad's class (one, or a [...] and a [D] one for a [] value), and the
// stated derivatives are not computed.
ir::Expr withoutStatedGradients(const ir::Node& n, const ir::Expr& value,
                                const std::unordered_map<const ir::Node*, ir::Expr>& replace) {
  const ir::ShapeClass want = n.shape();
  if (value->shape() == want) return value;
  std::vector<ir::Expr> args(n.args().begin() + 1, n.args().end());
  std::vector<ir::Expr> candidates; // inputs under the arguments, then the arguments
  std::unordered_set<const ir::Node*> seen;
  auto input = [&](const ir::Expr& e) {
    if (e->kind() == ir::NodeKind::Input && seen.insert(e.get()).second) candidates.push_back(e);
  };
  for (const ir::Expr& a : args)
    input(a);
  for (const ir::Node* m : ir::topoOrder(args))
    for (const ir::Expr& a : m->args())
      input(a);
  for (const ir::Expr& a : args)
    candidates.push_back(ir::substitute(a, replace));
  std::vector<ir::Expr> witnesses;
  for (const ir::Expr& c : candidates)
    if (ir::joinShapes(value->shape(), c->shape()) == want) {
      witnesses.push_back(c);
      break;
    }
  if (witnesses.empty()) // value is [], no candidate [..., D]: a [...] and a [D] one make it
    for (ir::ShapeClass part : {ir::ShapeClass::Row, ir::ShapeClass::Col})
      for (const ir::Expr& c : candidates)
        if (c->shape() == part) {
          witnesses.push_back(c);
          break;
        }
  // The same primitive, so the same arity: the witnesses, then zeros (eval reads value only).
  std::vector<ir::Expr> out{value};
  out.insert(out.end(), witnesses.begin(), witnesses.end());
  while (out.size() < n.args().size())
    out.push_back(ir::Node::makeConst(0));
  return ir::Node::makeCall(n.prim(), std::move(out));
}
} // namespace

ir::Function dropStatedGradients(const ir::Function& fn, std::vector<ir::Expr>& backward) {
  std::vector<ir::Expr> roots;
  for (const ir::FunctionOutput& o : fn.outputs)
    roots.push_back(o.value);
  for (const auto& [name, e] : fn.lets)
    roots.push_back(e);
  roots.insert(roots.end(), backward.begin(), backward.end());
  for (const ir::FunctionOutput& o : fn.outputs) // the parts of cat outputs (the planner's values)
    roots.insert(roots.end(), o.parts.begin(), o.parts.end());
  std::unordered_map<const ir::Node*, ir::Expr> replace;
  for (const ir::Node* n : ir::topoOrder(roots)) // inner with_grads first
    if (n->kind() == ir::NodeKind::Call && n->prim()->declaresGradient &&
        !n->prim()->surrogateGradient) // (a surrogate's reference computes its gradient)
      replace[n] = withoutStatedGradients(*n, ir::substitute(n->args().front(), replace), replace);
  if (replace.empty()) return fn;
  for (ir::Expr& r : roots)
    r = ir::substitute(r, replace);
  roots = cse(roots);
  ir::Function out = fn;
  size_t k = 0;
  for (ir::FunctionOutput& o : out.outputs)
    o.value = roots[k++];
  for (auto& [name, e] : out.lets)
    e = roots[k++];
  for (ir::Expr& g : backward)
    g = roots[k++];
  for (ir::FunctionOutput& o : out.outputs)
    for (ir::Expr& part : o.parts)
      part = roots[k++];
  return out;
}

} // namespace fusegen::opt
