// Name resolution, type and shape checks, and lowering of formulas to IR.
#include "expr/Sema.h"

#include "expr/Parser.h"
#include "opt/Simplify.h"

#include <algorithm>
#include <set>

namespace fusegen::expr {

namespace {
std::string describe(const AstPtr& ast) {
  return ast->op.empty() ? "'" + ast->name + "'" : "operator '" + ast->op + "'";
}
} // namespace

ir::Expr Sema::lower(const AstPtr& ast, const Scope& scope) {
  switch (ast->kind) {
  case Ast::Kind::Number:
    return ir::Node::makeConst(ast->number);
  case Ast::Kind::Name: {
    auto it = scope.find(ast->name);
    if (it != scope.end()) return it->second;
    std::string msg = "unknown name '" + ast->name + "'";
    if (lib_.find(ast->name))
      msg += "; '" + ast->name + "' is a function, call it as " + ast->name + "(...)";
    diags_.error(ast->loc, msg);
    std::vector<std::string> candidates;
    for (const auto& [n, e] : scope)
      candidates.push_back(n);
    std::string guess = closestMatch(ast->name, candidates);
    if (!guess.empty()) diags_.note(ast->loc, "did you mean '" + guess + "'?");
    return nullptr;
  }
  case Ast::Kind::Call:
    return lowerCall(ast, scope);
  }
  return nullptr;
}

ir::Expr Sema::inlineFunction(const cxx::UserFunction& f, const AstPtr& call, const Scope& scope) {
  if (call->args.size() != f.params.size()) {
    diags_.error(call->loc, "'" + f.name + "' takes " + std::to_string(f.params.size()) +
                                " argument(s), got " + std::to_string(call->args.size()));
    diags_.note(f.loc, "'" + f.name + "' is defined here");
    return nullptr;
  }
  if (inlineDepth_ > 32) {
    diags_.error(call->loc, "'" + f.name + "' calls itself; recursion cannot be inlined");
    return nullptr;
  }
  Scope inner;
  for (size_t i = 0; i < f.params.size(); ++i) {
    ir::Expr a = lower(call->args[i], scope);
    if (!a) return nullptr;
    if (a->type() == ir::ValueType::Bool) {
      diags_.error(call->args[i]->loc, "a condition cannot be passed to '" + f.name + "'");
      return nullptr;
    }
    inner[f.params[i]] = a;
  }
  ++inlineDepth_;
  ir::Expr out = lower(f.body, inner);
  // Stated derivatives (FUSEGEN_DERIVATIVE): with_grad(body, arg, derivative(args), ...).
  std::vector<ir::Expr> withGrad{out};
  for (size_t i = 0; out && i < f.derivatives.size(); ++i) {
    const cxx::UserFunction& d = functions_->at(f.derivatives[i]);
    ir::Expr di = lower(d.body, inner);
    if (!di) {
      out = nullptr;
      break;
    }
    withGrad.push_back(inner[f.params[i]]);
    withGrad.push_back(di);
  }
  --inlineDepth_;
  if (out && !f.derivatives.empty()) {
    const prims::Primitive* prim = lib_.find("with_grad", withGrad.size());
    if (!prim) {
      diags_.error(call->loc, "'" + f.name +
                                  "' states its derivatives, but the primitive "
                                  "library has no with_grad of " +
                                  std::to_string(withGrad.size()) +
                                  " arguments (value, then each parameter and its derivative)");
      diags_.note(f.loc, "'" + f.name + "' is defined here");
      return nullptr;
    }
    out = ir::Node::makeCall(prim, std::move(withGrad));
  }
  if (!out) diags_.note(call->loc, "in the call of '" + f.name + "' here");
  return out;
}

ir::Expr Sema::lowerCall(const AstPtr& ast, const Scope& scope) {
  if (functions_ && ast->op.empty()) {
    auto f = functions_->find(ast->name);
    if (f != functions_->end()) return inlineFunction(f->second, ast, scope);
  }
  std::vector<const prims::Primitive*> overloads = lib_.overloads(ast->name);
  if (overloads.empty()) {
    diags_.error(ast->loc, "unknown function '" + ast->name + "'");
    std::string guess = closestMatch(ast->name, lib_.names());
    if (!guess.empty()) diags_.note(ast->loc, "did you mean '" + guess + "'?");
    return nullptr;
  }
  const prims::Primitive* prim = lib_.find(ast->name, ast->args.size());
  std::sort(overloads.begin(), overloads.end(),
            [](const prims::Primitive* a, const prims::Primitive* b) {
              return a->params.size() < b->params.size();
            });
  if (!prim) {
    std::string counts, signatures;
    for (size_t i = 0; i < overloads.size(); ++i) {
      const char* sep = i == 0 ? "" : i + 1 == overloads.size() ? " or " : ", ";
      counts += sep + std::to_string(overloads[i]->params.size());
      signatures += (i ? ", " : "") + overloads[i]->signature();
    }
    bool one = overloads.size() == 1 && overloads[0]->params.size() == 1;
    diags_.error(ast->loc, "'" + ast->name + "' takes " + counts + " argument" + (one ? "" : "s") +
                               ", got " + std::to_string(ast->args.size()) + "; " +
                               (overloads.size() == 1 ? "signature is " : "signatures are ") +
                               signatures);
    return nullptr;
  }
  std::vector<ir::Expr> args;
  bool ok = true;
  for (size_t i = 0; i < ast->args.size(); ++i) {
    ir::Expr a = lower(ast->args[i], scope);
    if (!a) {
      ok = false;
      continue;
    }
    const prims::Param& param = prim->params[i];
    const SourceLoc& loc = ast->args[i]->loc;
    if (param.kind == prims::ParamKind::Bool && a->type() != ir::ValueType::Bool) {
      diags_.error(loc, "argument '" + param.name + "' of " + describe(ast) +
                            " must be a condition (a comparison such as x > 0)");
      ok = false;
    } else if (param.kind != prims::ParamKind::Bool && a->type() == ir::ValueType::Bool) {
      diags_.error(loc, "a condition cannot be used as a value (argument '" + param.name + "' of " +
                            describe(ast) + "); use where(cond, a, b)");
      ok = false;
    } else if (param.kind == prims::ParamKind::Const && !a->isConstant()) {
      diags_.error(loc, "argument '" + param.name + "' of '" + prim->name +
                            "' must be a constant or an attr, not a tensor expression");
      ok = false;
    }
    if (ok && prim->kind == prims::PrimKind::Reduction &&
        (a->shape() == ir::ShapeClass::Row || a->shape() == ir::ShapeClass::Scalar)) {
      diags_.error(loc, "'" + prim->name +
                            "' reduces over the last dim, but its argument has shape " +
                            spec::shapeClassSpelling(a->shape()) + " (one value per row or less)");
      ok = false;
    }
    args.push_back(a);
  }
  if (!ok) return nullptr;
  return ir::Node::makeCall(prim, std::move(args));
}

namespace {

void collectLeaves(const ir::Expr& e, std::set<std::string>& used) {
  for (const ir::Node* n : ir::topoOrder({e}))
    if (n->kind() == ir::NodeKind::Input) used.insert(n->name());
}

} // namespace

std::optional<ir::Function> lowerOp(const spec::OpSpec& spec, const prims::PrimitiveLibrary& lib,
                                    Diagnostics& diags, const cxx::UserFunctions* functions) {
  int errorsBefore = diags.errorCount();
  ir::Function fn;
  fn.name = spec.name;
  Scope scope;
  scope["D"] = ir::Node::makeDim(); // the length of the last dim
  auto checkClash = [&](const std::string& name, const SourceLoc& loc) {
    if (lib.find(name))
      diags.error(loc, "name '" + name + "' clashes with the primitive function '" + name + "'");
  };
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const spec::Input& in = spec.inputs[i];
    checkClash(in.name, in.loc);
    ir::Expr node = ir::Node::makeInput(in.name, static_cast<int>(i), in.shape);
    fn.inputs.push_back({in.name, in.shape, node});
    scope[in.name] = node;
  }
  for (size_t i = 0; i < spec.attrs.size(); ++i) {
    const spec::Attr& a = spec.attrs[i];
    checkClash(a.name, a.loc);
    ir::Expr node = ir::Node::makeAttr(a.name, static_cast<int>(i));
    fn.attrs.push_back({a, node});
    scope[a.name] = node;
  }
  if (functions)
    for (const auto& [name, f] : *functions)
      if (lib.find(name))
        diags.error(f.loc, "function '" + name + "' has the name of a primitive; rename it");
  Sema sema(lib, diags, functions);
  auto lowerBinding = [&](const spec::Binding& b) -> ir::Expr {
    checkClash(b.name, b.loc);
    AstPtr ast = parseFormula(b.formula, b.charLocs, diags);
    if (!ast) return nullptr;
    return sema.lower(ast, scope);
  };
  std::vector<std::pair<const spec::Binding*, ir::Expr>> lets;
  for (const spec::Binding& b : spec.lets) {
    ir::Expr e = lowerBinding(b);
    if (!e) continue;
    scope[b.name] = e;
    lets.emplace_back(&b, e);
  }
  std::set<std::string> usedInputs;
  for (const spec::Binding& b : spec.outputs) {
    ir::Expr e = lowerBinding(b);
    if (!e) continue;
    if (e->type() == ir::ValueType::Bool) {
      diags.error(b.formulaLoc,
                  "output '" + b.name + "' is a condition; outputs must be values (use where())");
      continue;
    }
    if (e->isConstant()) {
      diags.error(b.formulaLoc, "output '" + b.name + "' does not depend on any input tensor");
      continue;
    }
    if (e->shape() == ir::ShapeClass::Col || e->shape() == ir::ShapeClass::Scalar) {
      diags.error(b.formulaLoc, "output '" + b.name + "' has shape " +
                                    spec::shapeClassSpelling(e->shape()) +
                                    "; outputs must be [..., D] or per-row [...]");
      continue;
    }
    collectLeaves(e, usedInputs);
    fn.outputs.push_back({b.name, e});
  }
  if (diags.errorCount() != errorsBefore) return std::nullopt;
  for (const spec::Input& in : spec.inputs)
    if (!usedInputs.count(in.name))
      diags.error(in.loc, "input '" + in.name + "' is not used by any output");
  for (const auto& [binding, e] : lets) {
    bool used = false;
    for (const ir::FunctionOutput& o : fn.outputs)
      for (const ir::Node* n : ir::topoOrder({o.value}))
        used |= n == e.get();
    if (!used) diags.warning(binding->loc, "let '" + binding->name + "' is not used by any output");
  }
  if (diags.errorCount() != errorsBefore) return std::nullopt;
  // Share equal subexpressions across outputs, so each value is computed once (the lets
  // go through the same pass so they keep naming the nodes the outputs use).
  std::vector<ir::Expr> values;
  for (const ir::FunctionOutput& o : fn.outputs)
    values.push_back(o.value);
  for (const auto& [binding, e] : lets)
    values.push_back(e);
  values = opt::cse(values);
  for (size_t i = 0; i < fn.outputs.size(); ++i)
    fn.outputs[i].value = values[i];
  for (size_t i = 0; i < lets.size(); ++i)
    fn.lets.emplace_back(lets[i].first->name, values[fn.outputs.size() + i]);
  return fn;
}

} // namespace fusegen::expr
