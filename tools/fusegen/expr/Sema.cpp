// Name resolution, type and shape checks, and lowering of formulas to IR.
#include "expr/Sema.h"

#include "expr/Parser.h"
#include "opt/RowExtrema.h"
#include "opt/Simplify.h"

#include <algorithm>
#include <limits>
#include <set>
#include <unordered_map>

namespace fusegen::expr {

namespace {
std::string describe(const AstPtr& ast) {
  return ast->op.empty() ? "'" + ast->name + "'" : "operator '" + ast->op + "'";
}

// Whether a constant is a whole number of columns (a move's shift): integer literals, int attrs
// and D, combined by primitives closed over integers (+ - * unary -, abs, min, max, where on a
// constant condition). A division, a float literal or attr, or rows is not.
bool countsColumns(const ir::Expr& e) {
  switch (e->kind()) {
  case ir::NodeKind::Const:
  case ir::NodeKind::Attr:
    return e->type() == ir::ValueType::Int;
  case ir::NodeKind::Dim:
    return true;
  case ir::NodeKind::Call: {
    const prims::Primitive& p = *e->prim();
    if (p.kind != prims::PrimKind::Elementwise || !p.integerClosed) return false;
    for (size_t i = 0; i < e->args().size(); ++i)
      if (p.params[i].kind == prims::ParamKind::Value && !countsColumns(e->args()[i])) return false;
    return true;
  }
  default:
    return false;
  }
}
} // namespace

struct Sema::CallFrame {
  const AstPtr& ast;
  const cxx::UserFunction* function = nullptr; // a user function to inline, or
  const prims::Primitive* prim = nullptr;      // the primitive called
  std::vector<ir::Expr> args;                  // lowered so far
  bool ok = true;
  ir::Expr position = nullptr; // pos(S): its value (the argument names a dim, not a value)
};

ir::Expr Sema::lower(const AstPtr& root, const Scope& scope) {
  auto leaf = [&](const AstPtr& a) {
    return a->kind == Ast::Kind::Number
               ? ir::Node::makeConst(a->number,
                                     a->integer ? ir::ValueType::Int : ir::ValueType::Value)
               : lowerName(a, scope);
  };
  if (root->kind != Ast::Kind::Call) return leaf(root);
  std::vector<CallFrame> stack;
  if (!enterCall(root, stack)) return nullptr;
  for (;;) {
    CallFrame& top = stack.back();
    // A user function stops at its first bad argument; a primitive lowers (and checks) them
    // all, so every independent mistake is reported.
    if (!top.position && top.args.size() < top.ast->args.size() && (top.ok || !top.function)) {
      const AstPtr& arg = top.ast->args[top.args.size()];
      if (arg->kind != Ast::Kind::Call)
        acceptArg(top, leaf(arg));
      else if (!enterCall(arg, stack))
        acceptArg(stack.back(), nullptr);
      continue;
    }
    ir::Expr value = top.ok ? finishCall(top) : nullptr;
    stack.pop_back();
    if (stack.empty()) return value;
    acceptArg(stack.back(), value);
  }
}

ir::Expr Sema::lowerName(const AstPtr& ast, const Scope& scope) {
  auto it = scope.find(ast->name);
  if (it != scope.end()) return it->second; // (null: a let whose formula failed, reported)
  auto later = later_.find(ast->name);
  if (later != later_.end()) {
    const auto& [where, output] = later->second;
    diags_.error(ast->loc, output ? "'" + ast->name +
                                        "' is an output: formulas read the inputs, "
                                        "attrs and lets (compute it in a let, and output the let)"
                                  : "'" + ast->name +
                                        "' is a let defined below this formula: "
                                        "a formula reads the lets above it");
    diags_.note(where, "'" + ast->name + "' is defined here");
    return nullptr;
  }
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

bool Sema::enterCall(const AstPtr& ast, std::vector<CallFrame>& stack) {
  if (ast->op.empty() && (ast->name == "pos" || (ast->name == "chunk" && !rules_))) {
    ir::Expr p = ast->name == "pos" ? position(ast) : chunk(ast);
    if (!p) return false;
    stack.push_back(CallFrame{ast, nullptr, nullptr, {}, true, p});
    return true;
  }
  if (ast->op.empty() && ast->name == "cat") {
    diags_.error(ast->loc, "cat(...) assembles a whole output of parts side by side: write it as "
                           "an output's formula, y: cat(a, b)");
    return false;
  }
  if (ast->op.empty() && ast->name == "place" && !rules_) {
    diags_.error(ast->loc, "'place' is the adjoint of chunk, which fusegen derives; a formula "
                           "reads a packed input's chunks with chunk(gu, c)");
    return false;
  }
  if (functions_ && ast->op.empty()) {
    auto f = functions_->find(ast->name);
    if (f != functions_->end()) {
      const cxx::UserFunction& fn = f->second;
      if (ast->args.size() != fn.params.size()) {
        diags_.error(ast->loc, "'" + fn.name + "' takes " + std::to_string(fn.params.size()) +
                                   " argument(s), got " + std::to_string(ast->args.size()));
        diags_.note(fn.loc, "'" + fn.name + "' is defined here");
        return false;
      }
      if (inlineDepth_ > 32) {
        diags_.error(ast->loc, "'" + fn.name + "' calls itself; recursion cannot be inlined");
        return false;
      }
      stack.push_back(CallFrame{ast, &fn, nullptr, {}, true});
      return true;
    }
  }
  std::vector<const prims::Primitive*> overloads = lib_.overloads(ast->name);
  if (overloads.empty()) {
    diags_.error(ast->loc, "unknown function '" + ast->name + "'");
    // (a mean over the whole tensor is a total over a count, which depends on the argument's
    // shape: no primitive, but the spelling is the first a newcomer tries)
    if (ast->name == "mean_all") {
      diags_.note(ast->loc, "a mean over the whole tensor is sum_all(x) / (rows * D), or "
                            "sum_all(x) / rows of a per-row value");
      return false;
    }
    std::string guess = closestMatch(ast->name, lib_.names());
    if (!guess.empty()) diags_.note(ast->loc, "did you mean '" + guess + "'?");
    return false;
  }
  const prims::Primitive* prim = lib_.find(ast->name, ast->args.size());
  std::sort(
      overloads.begin(), overloads.end(),
      [](const prims::Primitive* a, const prims::Primitive* b) { return a->arity() < b->arity(); });
  if (!prim) {
    std::string counts, signatures;
    for (size_t i = 0; i < overloads.size(); ++i) {
      const char* sep = i == 0 ? "" : i + 1 == overloads.size() ? " or " : ", ";
      counts += sep + std::to_string(overloads[i]->arity());
      signatures += (i ? ", " : "") + overloads[i]->signature();
    }
    bool one = overloads.size() == 1 && overloads[0]->arity() == 1;
    diags_.error(ast->loc, "'" + ast->name + "' takes " + counts + " argument" + (one ? "" : "s") +
                               ", got " + std::to_string(ast->args.size()) + "; " +
                               (overloads.size() == 1 ? "signature is " : "signatures are ") +
                               signatures);
    return false;
  }
  stack.push_back(CallFrame{ast, nullptr, prim, {}, true});
  return true;
}

ir::Expr Sema::position(const AstPtr& ast) {
  std::string dims;
  for (const std::string& d : dims_)
    dims += (dims.empty() ? "" : ", ") + d;
  const std::string known = dims_.empty() ? "the op names no dims (name them in the shape of "
                                            "its full input, e.g. x: [..., S, D])"
                                          : "the op's dims are [" + dims + "]";
  if (ast->args.size() != 1 || ast->args[0]->kind != Ast::Kind::Name) {
    diags_.error(ast->loc, "'pos' takes one dim name, as in pos(S); " + known);
    return nullptr;
  }
  const AstPtr& dim = ast->args[0];
  for (size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i] == dim->name) return ir::Node::makePosition(static_cast<int>(i), dim->name);
  diags_.error(dim->loc,
               "pos(" + dim->name + "): '" + dim->name + "' is not a dim of the op; " + known);
  return nullptr;
}

ir::Expr Sema::chunk(const AstPtr& ast) {
  std::string packed;
  for (const auto& [name, p] : packed_)
    packed += (packed.empty() ? "" : ", ") + name;
  if (ast->args.size() != 2 || ast->args[0]->kind != Ast::Kind::Name ||
      !packed_.count(ast->args[0]->name)) {
    diags_.error(ast->loc, "'chunk' takes a packed input and a chunk index, as in chunk(gu, 0); " +
                               (packed.empty() ? std::string("the op has no packed input (declare "
                                                             "one as gu: [..., 2*D])")
                                               : "the op's packed inputs are " + packed));
    return nullptr;
  }
  const auto& [leaf, n] = packed_.at(ast->args[0]->name);
  const AstPtr& c = ast->args[1];
  if (c->kind != Ast::Kind::Number || !c->integer || c->number < 0 || c->number >= n) {
    diags_.error(c->loc, "the chunk index of '" + ast->args[0]->name +
                             "' must be an integer from 0 to " + std::to_string(n - 1) +
                             " (it is packed in " + std::to_string(n) + " chunks)");
    return nullptr;
  }
  return ir::Node::makeCall(lib_.find("chunk", 3),
                            {leaf, ir::Node::makeConst(c->number, ir::ValueType::Int),
                             ir::Node::makeConst(n, ir::ValueType::Int)});
}

void Sema::acceptArg(CallFrame& frame, ir::Expr a) {
  const size_t i = frame.args.size();
  frame.args.push_back(a);
  const SourceLoc& loc = expansionCall_ ? *expansionCall_ : frame.ast->args[i]->loc;
  auto fail = [&](const std::string& msg) {
    diags_.error(loc, msg);
    frame.ok = false;
  };
  if (!a) {
    frame.ok = false;
  } else if (frame.function) {
    if (a->type() == ir::ValueType::Bool)
      fail("a condition cannot be passed to '" + frame.function->name + "'");
  } else {
    const prims::Primitive& prim = *frame.prim;
    const prims::Param& param = prim.params[i];
    if (param.kind == prims::ParamKind::Bool && boolAttrs_.count(a.get())) {
      a = ir::Node::makeCall(lib_.find("ne", 2), {a, ir::Node::makeConst(0)});
      frame.args.back() = a;
    }
    if (param.kind == prims::ParamKind::Bool && a->type() != ir::ValueType::Bool)
      fail("argument '" + param.name + "' of " + describe(frame.ast) +
           " must be a condition (a comparison such as x > 0)");
    else if (param.kind != prims::ParamKind::Bool && a->type() == ir::ValueType::Bool)
      fail("a condition cannot be used as a value (argument '" + param.name + "' of " +
           describe(frame.ast) + "); use where(cond, a, b)");
    else if (param.kind == prims::ParamKind::Const && !a->isConstant()) {
      fail("argument '" + param.name + "' of '" + prim.name +
           "' must be a constant or an attr, not a tensor expression");
      if (prim.name == "pow" && !rules_) // (a spec's formula; a rule's reader is a developer)
        diags_.note(loc, "a tensor exponent: write exp(p * log(x)) (for x > 0)");
    } else if (param.kind == prims::ParamKind::Const && prim.kind == prims::PrimKind::Move &&
               !rules_ && !countsColumns(a)) // (a rule's shifts come from checked ones, folded)
      fail("argument '" + param.name + "' of '" + prim.name +
           "' counts columns: it must be an integer (an integer literal, an int attr or D, "
           "combined by + - *), not a float value");
    else if (frame.ok && prim.kind == prims::PrimKind::Reduction &&
             (a->shape() == ir::ShapeClass::Row || a->shape() == ir::ShapeClass::Scalar))
      fail("'" + prim.name + "' reduces over the last dim, but its argument has shape " +
           spec::shapeClassSpelling(a->shape()) +
           (a->shape() == ir::ShapeClass::Row
                ? " (one value per row: sum_all, max_all and min_all combine those over the "
                  "whole tensor, for a [] output)"
                : " (one value per row or less)"));
    else if (frame.ok && prim.kind == prims::PrimKind::Total && ir::usesColumnReduction(a))
      fail("'" + prim.name +
           "' of a value that uses a column statistic (colsum, colmean): a whole-tensor "
           "reduction after the passes over the rows is not supported");
    else if (frame.ok && prim.kind == prims::PrimKind::Column && a->shape() != ir::ShapeClass::Full)
      fail("'" + prim.name + "' reduces over the rows, per column, but its argument has shape " +
           spec::shapeClassSpelling(a->shape()) +
           (a->shape() == ir::ShapeClass::Row ? " (one value per row: sum_all sums those)"
                                              : " (the same in every row)"));
    else if (frame.ok && prim.kind == prims::PrimKind::Total &&
             (a->shape() == ir::ShapeClass::Col || a->shape() == ir::ShapeClass::Scalar))
      fail("'" + prim.name + "' reduces over every row, but its argument has shape " +
           spec::shapeClassSpelling(a->shape()) + " (the same in every row)");
  }
}

ir::Expr Sema::finishCall(CallFrame& frame) {
  if (frame.position) return frame.position;
  if (frame.function) return inlineFunction(*frame.function, frame.ast, std::move(frame.args));
  if (frame.prim->expand) { // a primitive defined by a formula: inlined
    Scope inner;
    for (size_t i = 0; i < frame.prim->params.size(); ++i)
      inner[frame.prim->params[i].name] = frame.args[i];
    inner["j"] = ir::Node::makeColumn();
    inner["D"] = ir::Node::makeDim();
    inner["rows"] = ir::Node::makeRows();
    const bool outermost = !expansionCall_;
    if (outermost) expansionCall_ = frame.ast->loc;
    ++inlineDepth_;
    ir::Expr out = lower(frame.prim->expand, inner);
    --inlineDepth_;
    if (outermost) expansionCall_.reset();
    if (!out) diags_.note(frame.ast->loc, "in the expansion of '" + frame.prim->name + "' here");
    return out;
  }
  if (frame.prim->kind == prims::PrimKind::Move) {
    const ir::Expr& a = frame.args[0];
    // A value the same in every column of its row is its own permutation.
    if (a->shape() == ir::ShapeClass::Row || a->shape() == ir::ShapeClass::Scalar) return a;
    for (const ir::Node* n : ir::topoOrder({a})) {
      if (!rules_ && n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Move &&
          !prims::movesCompose(frame.prim->move, n->prim()->move)) {
        diags_.error(frame.ast->loc, "'" + frame.prim->name + "' of a value moved by '" +
                                         n->prim()->name +
                                         "': only moves that compose into one may be nested "
                                         "(a swap with itself; rolls with rolls and swap_halves)");
        return nullptr;
      }
    }
  }
  // Each call's random parameters get streams of their own: two dropouts drop independently.
  for (size_t i = frame.args.size(); i < frame.prim->params.size(); ++i) {
    randomStreams_.push_back(ir::Node::makeRandom(static_cast<int>(randomStreams_.size())));
    frame.args.push_back(randomStreams_.back());
  }
  return ir::Node::makeCall(frame.prim, std::move(frame.args));
}

ir::Expr Sema::inlineFunction(const cxx::UserFunction& f, const AstPtr& call,
                              std::vector<ir::Expr> args) {
  Scope inner;
  for (size_t i = 0; i < f.params.size(); ++i)
    inner[f.params[i]] = args[i];
  ++inlineDepth_; // bounded above (enterCall), so this recursion is too
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

namespace {

bool usesWholeTensorValue(const ir::Expr& e) {
  for (const ir::Node* n : ir::topoOrder({e}))
    if (ir::isWholeTensorValue(n)) return true;
  return false;
}

// Whether e may differ between rows: it reads a per-element or per-row input, position,
// random number or gradient other than through [D] and [] values (a reduction over the last
// dim of [D] values, sum(colmean(x)), is the same in every row).
bool variesPerRow(const ir::Expr& e) {
  std::unordered_map<const ir::Node*, bool> varies;
  for (const ir::Node* n : ir::topoOrder({e})) {
    bool v = false; // ([D] and [] values are the same in every row)
    if (n->shape() != ir::ShapeClass::Col && n->shape() != ir::ShapeClass::Scalar) {
      if (n->kind() == ir::NodeKind::Call)
        for (const ir::Expr& a : n->args())
          v = v || varies.at(a.get());
      else
        v = n->kind() == ir::NodeKind::Input || n->kind() == ir::NodeKind::Position ||
            n->kind() == ir::NodeKind::Random || n->kind() == ir::NodeKind::GradOut;
    }
    varies[n] = v;
  }
  return varies.at(e.get());
}

// The rules of whole-tensor values (sum_all, max_all, min_all), which are known only once every
// row is done: only a [] output uses them, none is taken of a value that uses another, and
// outside them a [] output reads attrs, D and literals only (it is computed after the rows).
bool checkWholeTensorUses(const spec::Binding& b, const ir::Expr& e, Diagnostics& diags) {
  bool uses = false;
  for (const ir::Node* n : ir::topoOrder({e})) {
    if (!ir::isWholeTensorValue(n)) continue;
    uses = true;
    if (usesWholeTensorValue(n->args()[0])) {
      diags.error(b.formulaLoc, "output '" + b.name + "' takes '" + n->prim()->name +
                                    "' of a value that uses another whole-tensor value; each "
                                    "is known only once every row is done, so they cannot nest");
      return false;
    }
    if (e->shape() != ir::ShapeClass::Scalar) {
      diags.error(b.formulaLoc,
                  "output '" + b.name + "' has shape " + spec::shapeClassSpelling(e->shape()) +
                      " but uses '" + n->prim()->name +
                      "', a whole-tensor value known only once every row is done; only a [] "
                      "output may use one");
      return false;
    }
  }
  if (!uses) return true;
  // The [] output's nodes outside its whole-tensor values.
  std::vector<const ir::Node*> stack{e.get()};
  std::set<const ir::Node*> seen;
  while (!stack.empty()) {
    const ir::Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second || ir::isWholeTensorValue(n)) continue;
    if (n->kind() == ir::NodeKind::Input || n->kind() == ir::NodeKind::Column ||
        n->kind() == ir::NodeKind::Random) {
      diags.error(b.formulaLoc,
                  "[] output '" + b.name + "' reads " +
                      (n->kind() == ir::NodeKind::Input    ? "'" + n->name() + "'"
                       : n->kind() == ir::NodeKind::Column ? std::string("j")
                                                           : std::string("a random number")) +
                      " outside a whole-tensor reduction; a [] output is computed once, after "
                      "every row, from whole-tensor values (sum_all, max_all, min_all), attrs "
                      "and D");
      return false;
    }
    for (const ir::Expr& a : n->args())
      stack.push_back(a.get());
  }
  return true;
}

} // namespace

std::optional<ir::Function> lowerOp(const spec::OpSpec& spec, const prims::PrimitiveLibrary& lib,
                                    Diagnostics& diags, const cxx::UserFunctions* functions) {
  int errorsBefore = diags.errorCount();
  ir::Function fn;
  fn.name = spec.name;
  Scope scope;
  scope["D"] = ir::Node::makeDim();     // the length of the last dim
  scope["j"] = ir::Node::makeColumn();  // the column index
  scope["rows"] = ir::Node::makeRows(); // the number of rows
  scope["inf"] = ir::Node::makeConst(std::numeric_limits<double>::infinity()); // -inf: neg
  // Names and calls are told apart by the parentheses, so an input, attr, let or output may be
  // named like a primitive (`mean` and `rstd`, as torch.native_layer_norm names its outputs).
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const spec::Input& in = spec.inputs[i];
    const ir::ValueType type = in.type == spec::InputType::Dtype  ? ir::ValueType::Value
                               : in.type == spec::InputType::Bool ? ir::ValueType::Bool
                                                                  : ir::ValueType::Int;
    ir::Expr node = ir::Node::makeInput(in.name, static_cast<int>(i), in.shape, type);
    fn.inputs.push_back({in.name, in.shape, node, in.type, in.chunks});
    scope[in.name] = node;
  }
  for (size_t i = 0; i < spec.attrs.size(); ++i) {
    const spec::Attr& a = spec.attrs[i];
    // (a bool attr is the integer 0 or 1, as torch promotes a bool: 1 - 2 * reverse counts
    // columns; as a condition it is reverse != 0, below)
    ir::Expr node = ir::Node::makeAttr(a.name, static_cast<int>(i),
                                       a.type == spec::AttrType::Float ? ir::ValueType::Value
                                                                       : ir::ValueType::Int);
    fn.attrs.push_back({a, node});
    scope[a.name] = node;
  }
  // A call names a primitive or a C++ function: one name cannot be both.
  if (functions)
    for (const auto& [name, f] : *functions)
      if (lib.find(name))
        diags.error(f.loc, "function '" + name + "' has the name of a primitive; rename it");
  Sema sema(lib, diags, functions, spec.dims);
  for (const ir::FunctionAttr& a : fn.attrs)
    if (a.attr.type == spec::AttrType::Bool) sema.addBoolAttr(a.node);
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].chunks > 1)
      sema.addPacked(spec.inputs[i].name, fn.inputs[i].node, spec.inputs[i].chunks);
  // A packed input is read only through chunk(gu, c): it is n values of [..., D], not one.
  auto packedUse = [&](const spec::Binding& b, const ir::Expr& e) {
    std::vector<const ir::Node*> bare;
    if (e->kind() == ir::NodeKind::Input) bare.push_back(e.get());
    for (const ir::Node* n : ir::topoOrder({e}))
      for (size_t k = 0; k < n->args().size(); ++k)
        if (n->args()[k]->kind() == ir::NodeKind::Input && !(n->isCall("chunk") && k == 0))
          bare.push_back(n->args()[k].get());
    for (const ir::Node* n : bare)
      for (const spec::Input& in : spec.inputs)
        if (in.chunks > 1 && in.name == n->name()) {
          diags.error(b.formulaLoc,
                      "input '" + in.name + "' is packed ([..., " + std::to_string(in.chunks) +
                          "*D]): read its chunks with chunk(" + in.name + ", 0) ... chunk(" +
                          in.name + ", " + std::to_string(in.chunks - 1) + ")");
          return false;
        }
    return true;
  };
  auto lowerBinding = [&](const spec::Binding& b) -> ir::Expr {
    AstPtr ast = parseFormula(b.formula, b.charLocs, diags);
    if (!ast) return nullptr;
    return sema.lower(ast, scope);
  };
  std::vector<std::pair<const spec::Binding*, ir::Expr>> lets;
  for (const spec::Binding& b : spec.lets)
    sema.declareLater(b.name, b.loc, false);
  for (const spec::Binding& b : spec.outputs)
    sema.declareLater(b.name, b.loc, true);
  for (const spec::Binding& b : spec.lets) {
    sema.defined(b.name);
    ir::Expr e = lowerBinding(b);
    if (!e || !packedUse(b, e)) {
      // Its error is reported at its formula. The name stays in scope, null: the formulas
      // that use it then fail without "unknown name" errors of their own (lowerName), as
      // clang's invalid declarations do.
      scope[b.name] = nullptr;
      continue;
    }
    scope[b.name] = e;
    lets.emplace_back(&b, e);
  }
  for (const spec::Binding& b : spec.outputs) {
    // An output of parts, cat(a, b, ...): each part per element, the value the sum of their
    // places in the packed output.
    std::vector<ir::Expr> parts;
    AstPtr ast = parseFormula(b.formula, b.charLocs, diags);
    if (!ast) continue;
    ir::Expr e;
    if (ast->kind == Ast::Kind::Call && ast->op.empty() && ast->name == "cat") {
      const size_t n = ast->args.size();
      if (n < 2 || n > 8) {
        diags.error(b.formulaLoc, "cat takes 2 to 8 parts, got " + std::to_string(n));
        continue;
      }
      bool ok = true;
      for (size_t c = 0; c < n && ok; ++c) {
        ir::Expr part = sema.lower(ast->args[c], scope);
        ok = part && packedUse(b, part);
        if (ok && (part->shape() != ir::ShapeClass::Full || part->type() != ir::ValueType::Value)) {
          diags.error(ast->args[c]->loc,
                      "part " + std::to_string(c) + " of cat has shape " +
                          spec::shapeClassSpelling(part->shape()) +
                          (part->type() == ir::ValueType::Value ? "" : ", not values") +
                          "; each part is one value per element ([..., D])");
          ok = false;
        }
        if (!ok) break;
        parts.push_back(part);
        ir::Expr placed = ir::Node::makeCall(
            lib.find("place", 3),
            {part, ir::Node::makeConst(static_cast<double>(c), ir::ValueType::Int),
             ir::Node::makeConst(static_cast<double>(n), ir::ValueType::Int)});
        e = e ? ir::Node::makeCall(lib.find("add", 2), {e, placed}) : placed;
      }
      if (!ok) continue;
    } else {
      e = sema.lower(ast, scope);
      if (!e || !packedUse(b, e)) continue;
    }
    if (e->type() == ir::ValueType::Bool) {
      diags.error(b.formulaLoc,
                  "output '" + b.name + "' is a condition; outputs must be values (use where())");
      continue;
    }
    // (An output of its own type takes integer values as they are: a count stored as float32.)
    if (e->type() == ir::ValueType::Int && b.type == spec::OutputType::Dtype) {
      diags.error(b.formulaLoc, "output '" + b.name +
                                    "' has integer values; outputs are floating (of the op's "
                                    "dtype): mix in a float, e.g. 1.0 * (...), or give it a "
                                    "dtype of its own, {value: ..., dtype: float32}");
      continue;
    }
    if (e->isConstant()) {
      diags.error(b.formulaLoc, "output '" + b.name + "' does not depend on any input tensor");
      continue;
    }
    if (!checkWholeTensorUses(b, e, diags)) continue;
    if (e->shape() == ir::ShapeClass::Row && ir::usesColumnReduction(e) && !variesPerRow(e)) {
      diags.error(b.formulaLoc,
                  "output '" + b.name +
                      "' is the same in every row: a reduction over the last dim of column "
                      "statistics ([D]); a [] output of one is not supported (output the [D] "
                      "value and reduce it in PyTorch)");
      continue;
    }
    if ((e->shape() == ir::ShapeClass::Col && !ir::usesColumnReduction(e)) ||
        (e->shape() == ir::ShapeClass::Scalar && !usesWholeTensorValue(e))) {
      diags.error(b.formulaLoc, "output '" + b.name + "' has shape " +
                                    spec::shapeClassSpelling(e->shape()) +
                                    "; outputs must be [..., D], per-row [...], [D] through a "
                                    "reduction over rows (colsum, colmean) or [] through a "
                                    "whole-tensor reduction (sum_all, max_all, min_all)");
      continue;
    }
    fn.outputs.push_back({b.name, e, b.type, parts});
  }
  if (diags.errorCount() != errorsBefore) return std::nullopt;
  std::vector<ir::Expr> outputValues;
  for (const ir::FunctionOutput& o : fn.outputs)
    outputValues.push_back(o.value);
  std::set<const ir::Node*> used; // every node the outputs reach, found in one walk
  std::set<std::string> usedInputs;
  for (const ir::Node* n : ir::topoOrder(outputValues)) {
    used.insert(n);
    if (n->kind() == ir::NodeKind::Input) usedInputs.insert(n->name());
  }
  for (const spec::Input& in : spec.inputs)
    if (!usedInputs.count(in.name))
      diags.error(in.loc, "input '" + in.name + "' is not used by any output");
  for (const auto& [binding, e] : lets)
    if (!used.count(e.get()))
      diags.warning(binding->loc, "let '" + binding->name + "' is not used by any output");
  if (diags.errorCount() != errorsBefore) return std::nullopt;
  // Share equal subexpressions across outputs, so each value is computed once (the lets
  // go through the same pass so they keep naming the nodes the outputs use).
  std::vector<ir::Expr> values;
  for (const ir::FunctionOutput& o : fn.outputs)
    values.push_back(o.value);
  for (const auto& [binding, e] : lets)
    values.push_back(e);
  for (const ir::FunctionOutput& o : fn.outputs) // (the parts of cat outputs, after them)
    values.insert(values.end(), o.parts.begin(), o.parts.end());
  values = opt::cse(opt::factorRowExtrema(values, lib));
  for (size_t i = 0; i < fn.outputs.size(); ++i)
    fn.outputs[i].value = values[i];
  for (size_t i = 0; i < lets.size(); ++i)
    fn.lets.emplace_back(lets[i].first->name, values[fn.outputs.size() + i]);
  size_t next = fn.outputs.size() + lets.size();
  for (ir::FunctionOutput& o : fn.outputs)
    for (ir::Expr& part : o.parts)
      part = values[next++];
  fn.randomStreams = sema.randomStreams();
  return fn;
}

} // namespace fusegen::expr
