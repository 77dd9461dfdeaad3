// Scalar interpreter over IR nodes and primitive eval formulas.
#include "ir/Interpreter.h"

#include "prims/Builtins.h"
#include "prims/PrimitiveLibrary.h"

#include <stdexcept>
#include <unordered_map>

namespace fusegen::ir {

namespace {

double evalAst(const expr::AstPtr& ast, const prims::Primitive& prim,
               const std::vector<double>& args) {
  switch (ast->kind) {
  case expr::Ast::Kind::Number:
    return ast->number;
  case expr::Ast::Kind::Name:
    return args.at(prim.paramIndex(ast->name));
  case expr::Ast::Kind::Call: {
    const prims::Builtin* b = prims::findBuiltin(ast->name);
    if (!b) throw std::logic_error("unknown builtin '" + ast->name + "'");
    if (ast->name == "select") // evaluate only the branch taken, as the C++ ternary does
      return evalAst(ast->args[0], prim, args) != 0 ? evalAst(ast->args[1], prim, args)
                                                    : evalAst(ast->args[2], prim, args);
    double values[3];
    for (size_t i = 0; i < ast->args.size(); ++i)
      values[i] = evalAst(ast->args[i], prim, args);
    return b->eval(values);
  }
  }
  return 0;
}

} // namespace

double applyPrimitive(const prims::Primitive& prim, const std::vector<double>& args) {
  if (prim.kind != prims::PrimKind::Elementwise || !prim.eval)
    throw std::logic_error("the scalar interpreter cannot apply '" + prim.name + "'");
  return evalAst(prim.eval, prim, args);
}

double evaluate(const Expr& root, const Env& env) {
  std::unordered_map<const Node*, double> values;
  for (const Node* n : topoOrder({root})) {
    double v = 0;
    switch (n->kind()) {
    case NodeKind::Const:
      v = n->value();
      break;
    case NodeKind::Input:
      v = env.inputs.at(n->name());
      break;
    case NodeKind::Attr:
      v = env.attrs.at(n->name());
      break;
    case NodeKind::GradOut:
      v = env.gradOuts.at(n->name());
      break;
    case NodeKind::Dim:
      v = env.D;
      break;
    case NodeKind::Rows:
      v = env.rows;
      break;
    case NodeKind::Column:
      v = env.j;
      break;
    case NodeKind::Position: {
      auto it = env.positions.find(n->index());
      v = it == env.positions.end() ? 0 : it->second;
      break;
    }
    case NodeKind::Random: {
      auto it = env.random.find(n->index());
      v = it == env.random.end() ? 0.5 : it->second;
      break;
    }
    case NodeKind::Call: {
      std::vector<double> args;
      for (const Expr& a : n->args())
        args.push_back(values.at(a.get()));
      v = applyPrimitive(*n->prim(), args);
      break;
    }
    }
    values[n] = v;
  }
  return values.at(root.get());
}

} // namespace fusegen::ir
