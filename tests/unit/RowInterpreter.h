// A small interpreter of IR over one row of D elements, for the tests of reductions.
// ir::evaluate works on scalars and rejects reductions, so rows are evaluated here:
// every node is a vector of D values (per-row and scalar values repeated), a reduction
// combines its argument over the row and applies its `finish` formula. It is written
// independently of the generator's code paths so it can check them.
#pragma once

#include "ir/Interpreter.h"
#include "ir/Node.h"
#include "prims/Builtins.h"
#include "prims/PrimitiveLibrary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fusegen::test {

struct RowEnv {
  int D = 5;
  std::map<std::string, std::vector<double>> inputs; // D values (repeated for [...] and [])
  std::map<std::string, double> attrs;
  std::map<std::string, std::vector<double>> gradOuts;
  std::map<int, std::vector<double>> random; // D values per random stream
};

// A reduction's `finish` formula over builtins, with `acc` and `D` in scope.
inline double evalFinish(const expr::AstPtr& a, double acc, double D) {
  switch (a->kind) {
  case expr::Ast::Kind::Number:
    return a->number;
  case expr::Ast::Kind::Name:
    return a->name == "acc" ? acc : D;
  case expr::Ast::Kind::Call: {
    const prims::Builtin* b = prims::findBuiltin(a->name);
    if (!b) throw std::logic_error("unknown builtin " + a->name);
    double values[3] = {0, 0, 0};
    for (size_t i = 0; i < a->args.size() && i < 3; ++i)
      values[i] = evalFinish(a->args[i], acc, D);
    return b->eval(values);
  }
  }
  return 0;
}

inline std::vector<double> evalRow(const ir::Expr& root, const RowEnv& env) {
  std::map<const ir::Node*, std::vector<double>> v;
  const size_t D = static_cast<size_t>(env.D);
  for (const ir::Node* n : ir::topoOrder({root})) {
    std::vector<double>& out = v[n];
    switch (n->kind()) {
    case ir::NodeKind::Const:
      out.assign(D, n->value());
      break;
    case ir::NodeKind::Input:
      out = env.inputs.at(n->name());
      break;
    case ir::NodeKind::Attr:
      out.assign(D, env.attrs.at(n->name()));
      break;
    case ir::NodeKind::GradOut:
      out = env.gradOuts.at(n->name());
      break;
    case ir::NodeKind::Dim:
      out.assign(D, static_cast<double>(D));
      break;
    case ir::NodeKind::Rows: // (one row)
      out.assign(D, 1.0);
      break;
    case ir::NodeKind::Position: // (one row: at index 0 along every named dim)
      out.assign(D, 0.0);
      break;
    case ir::NodeKind::Column:
      out.resize(D);
      for (size_t j = 0; j < D; ++j)
        out[j] = static_cast<double>(j);
      break;
    case ir::NodeKind::Random:
      out = env.random.at(n->index());
      break;
    case ir::NodeKind::Call: {
      const prims::Primitive& p = *n->prim();
      if (p.kind == prims::PrimKind::Reduction) {
        const std::vector<double>& a = v.at(n->args()[0].get());
        double acc = a[0];
        for (size_t j = 1; j < D; ++j)
          acc = p.combine == prims::Combine::Sum   ? acc + a[j]
                : p.combine == prims::Combine::Max ? std::max(acc, a[j])
                                                   : std::min(acc, a[j]);
        out.assign(D, p.finish ? evalFinish(p.finish, acc, static_cast<double>(D)) : acc);
      } else if (p.kind == prims::PrimKind::Move) { // the argument at the moved columns
        const std::vector<double>& a = v.at(n->args()[0].get());
        // (a roll's shift: a constant, the same in every column)
        const long long shift =
            n->args().size() > 1 ? static_cast<long long>(v.at(n->args()[1].get())[0]) : 0;
        out.resize(D);
        for (size_t j = 0; j < D; ++j)
          out[j] = a[static_cast<size_t>(prims::moveColumn(p.move, static_cast<long long>(j),
                                                           static_cast<long long>(D), shift))];
      } else {
        out.resize(D);
        for (size_t j = 0; j < D; ++j) {
          std::vector<double> args;
          for (const ir::Expr& a : n->args())
            args.push_back(v.at(a.get())[j]);
          out[j] = ir::applyPrimitive(p, args);
        }
      }
      break;
    }
    }
    EXPECT_EQ(out.size(), D) << "input or gradient given with the wrong length";
  }
  return v.at(root.get());
}

// A whole [R, D] matrix: full inputs and output gradients given as R * D values (row-major),
// [D] ones as D values; the column reductions (colsum) sum over the R rows, the reductions over
// the last dim over each row. Enough for ops over rows and columns (batch statistics).
struct MatrixEnv {
  int R = 3, D = 4;
  std::map<std::string, std::vector<double>> values; // inputs and output gradients by name
  std::map<std::string, double> attrs;
};

inline std::vector<double> evalMatrix(const ir::Expr& root, const MatrixEnv& env) {
  const size_t R = static_cast<size_t>(env.R), D = static_cast<size_t>(env.D), n = R * D;
  std::map<const ir::Node*, std::vector<double>> v;
  auto given = [&](const ir::Node* node) {
    const std::vector<double>& g = env.values.at(node->name());
    std::vector<double> out(n);
    for (size_t i = 0; i < n; ++i)
      out[i] = g.size() == n ? g[i] : g.size() == D ? g[i % D] : g.at(i / D);
    return out;
  };
  for (const ir::Node* node : ir::topoOrder({root})) {
    std::vector<double>& out = v[node];
    switch (node->kind()) {
    case ir::NodeKind::Const:
      out.assign(n, node->value());
      break;
    case ir::NodeKind::Input:
    case ir::NodeKind::GradOut:
      out = given(node);
      break;
    case ir::NodeKind::Attr:
      out.assign(n, env.attrs.at(node->name()));
      break;
    case ir::NodeKind::Dim:
      out.assign(n, static_cast<double>(D));
      break;
    case ir::NodeKind::Rows:
      out.assign(n, static_cast<double>(R));
      break;
    case ir::NodeKind::Column:
      out.resize(n);
      for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<double>(i % D);
      break;
    case ir::NodeKind::Position:
    case ir::NodeKind::Random:
      ADD_FAILURE() << "evalMatrix: no positions or random numbers";
      out.assign(n, 0.0);
      break;
    case ir::NodeKind::Call: {
      const prims::Primitive& p = *node->prim();
      const std::vector<double>* a = node->args().empty() ? nullptr : &v.at(node->args()[0].get());
      out.assign(n, 0.0);
      if (p.kind == prims::PrimKind::Column) {
        for (size_t j = 0; j < D; ++j) {
          double s = 0;
          for (size_t r = 0; r < R; ++r)
            s += (*a)[r * D + j];
          for (size_t r = 0; r < R; ++r)
            out[r * D + j] = s;
        }
      } else if (p.kind == prims::PrimKind::Reduction) {
        for (size_t r = 0; r < R; ++r) {
          double acc = (*a)[r * D];
          for (size_t j = 1; j < D; ++j)
            acc = p.combine == prims::Combine::Sum   ? acc + (*a)[r * D + j]
                  : p.combine == prims::Combine::Max ? std::max(acc, (*a)[r * D + j])
                                                     : std::min(acc, (*a)[r * D + j]);
          for (size_t j = 0; j < D; ++j)
            out[r * D + j] = p.finish ? evalFinish(p.finish, acc, static_cast<double>(D)) : acc;
        }
      } else {
        EXPECT_EQ(p.kind, prims::PrimKind::Elementwise) << p.name;
        for (size_t i = 0; i < n; ++i) {
          std::vector<double> args;
          for (const ir::Expr& x : node->args())
            args.push_back(v.at(x.get())[i]);
          out[i] = ir::applyPrimitive(p, args);
        }
      }
      break;
    }
    }
  }
  return v.at(root.get());
}

} // namespace fusegen::test
