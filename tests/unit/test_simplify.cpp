// Tests of opt::Simplifier (algebraic identities and constant folding, which clean up the
// bulk output of reverse-mode AD) and opt::cse (structurally equal subtrees become one node,
// so printed code computes each value once). Both must never change the value computed.
#include "RowInterpreter.h"
#include "TestUtil.h"

#include "ir/Interpreter.h"
#include "opt/Simplify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <sstream>

namespace fusegen::test {
namespace {

using ir::Expr;
using ir::Node;

Expr k(double v) {
  return Node::makeConst(v);
}

class Simplify : public ::testing::Test {
protected:
  Expr simplify(const Expr& e) const { return opt::Simplifier(library()).simplify(e); }

  Expr x = Node::makeInput("x", 0, ir::ShapeClass::Full);
  Expr y = Node::makeInput("y", 1, ir::ShapeClass::Full);
};

TEST_F(Simplify, MultiplyByOneIsIdentity) {
  EXPECT_EQ(simplify(call("mul", {x, k(1)})).get(), x.get());
  EXPECT_EQ(simplify(call("mul", {k(1), x})).get(), x.get());
}

TEST_F(Simplify, AddZeroIsIdentity) {
  EXPECT_EQ(simplify(call("add", {x, k(0)})).get(), x.get());
  EXPECT_EQ(simplify(call("add", {k(0), x})).get(), x.get());
  EXPECT_EQ(simplify(call("sub", {x, k(0)})).get(), x.get());
  EXPECT_EQ(simplify(call("div", {x, k(1)})).get(), x.get());
}

TEST_F(Simplify, MultiplyByZeroIsZero) {
  for (const Expr& e :
       {call("mul", {x, k(0)}), call("mul", {k(0), y}), call("mul", {k(-0.0), call("exp", {x})})}) {
    Expr s = simplify(e);
    EXPECT_EQ(s->kind(), ir::NodeKind::Const);
    EXPECT_TRUE(s->isConst(0));
  }
  EXPECT_TRUE(simplify(call("div", {k(0), x}))->isConst(0));
}

TEST_F(Simplify, DoubleNegationCancels) {
  EXPECT_EQ(simplify(call("neg", {call("neg", {x})})).get(), x.get());
  Expr s = simplify(call("neg", {call("neg", {call("neg", {x})})}));
  ASSERT_TRUE(s->isCall("neg"));
  EXPECT_EQ(s->args()[0].get(), x.get());
  // neg(a) * neg(b) -> a * b
  s = simplify(call("mul", {call("neg", {x}), call("neg", {y})}));
  ASSERT_TRUE(s->isCall("mul"));
  EXPECT_EQ(s->args()[0].get(), x.get());
  EXPECT_EQ(s->args()[1].get(), y.get());
}

TEST_F(Simplify, NegationsTurnIntoSubtraction) {
  Expr s = simplify(call("add", {x, call("neg", {y})}));
  ASSERT_TRUE(s->isCall("sub"));
  EXPECT_EQ(s->args()[0].get(), x.get());
  EXPECT_EQ(s->args()[1].get(), y.get());
  s = simplify(call("sub", {k(0), x}));
  ASSERT_TRUE(s->isCall("neg"));
  EXPECT_EQ(s->args()[0].get(), x.get());
  s = simplify(call("mul", {k(-1), x}));
  ASSERT_TRUE(s->isCall("neg"));
  EXPECT_EQ(s->args()[0].get(), x.get());
}

TEST_F(Simplify, ConstantFolding) {
  Expr s = simplify(call("add", {k(2), k(3)}));
  EXPECT_EQ(s->kind(), ir::NodeKind::Const);
  EXPECT_EQ(s->value(), 5.0);
  s = simplify(call("mul", {call("sub", {k(7), k(4.5)}), call("exp", {k(0)})}));
  EXPECT_TRUE(s->isConst(2.5));
  s = simplify(call("gelu", {k(1.0)}));
  ASSERT_EQ(s->kind(), ir::NodeKind::Const);
  EXPECT_NEAR(s->value(), 0.8413447460685429, 1e-15);
  // Folding happens inside larger expressions too.
  s = simplify(call("mul", {x, call("add", {k(0.25), k(0.75)})}));
  EXPECT_EQ(s.get(), x.get());
}

TEST_F(Simplify, NoFoldingToNonFiniteValuesOrConditions) {
  Expr s = simplify(call("div", {k(1), k(0)}));
  ASSERT_TRUE(s->isCall("div")); // inf is left for the runtime, not baked into the code
  s = simplify(call("log", {k(-1)}));
  EXPECT_TRUE(s->isCall("log"));
  s = simplify(call("gt", {k(2), k(1)}));
  ASSERT_TRUE(s->isCall("gt")); // conditions stay conditions
  EXPECT_EQ(s->type(), ir::ValueType::Bool);
}

TEST_F(Simplify, WhereWithEqualBranches) {
  Expr c = call("gt", {x, k(0)});
  Expr a = call("exp", {y});
  // simplify() rebuilds every call, so the branch comes back as an equal exp(y) node.
  Expr s = simplify(call("where", {c, a, a}));
  ASSERT_TRUE(s->isCall("exp"));
  EXPECT_EQ(s->args()[0].get(), y.get());
  EXPECT_EQ(simplify(call("where", {c, y, y})).get(), y.get());
  s = simplify(call("where", {c, a, y}));
  EXPECT_TRUE(s->isCall("where"));
}

TEST_F(Simplify, InputIsNotModifiedAndValueIsPreserved) {
  // ((x * 1 + 0) * (y - 0)) + neg(neg(x)) * (2 + 3)
  Expr e = call("add",
                {call("mul", {call("add", {call("mul", {x, k(1)}), k(0)}), call("sub", {y, k(0)})}),
                 call("mul", {call("neg", {call("neg", {x})}), call("add", {k(2), k(3)})})});
  std::string before = ir::printDag({{"e", e}});
  Expr s = simplify(e);
  EXPECT_EQ(ir::printDag({{"e", e}}), before);
  EXPECT_EQ(ir::printDag({{"s", s}}), "%0 = mul(x, y)  [..., D]\n%1 = mul(x, 5.0)  [..., D]\n"
                                      "%2 = add(%0, %1)  [..., D]\ns = %2\n");
  ir::Env env;
  env.inputs = {{"x", 1.3}, {"y", -0.4}};
  EXPECT_DOUBLE_EQ(ir::evaluate(s, env), ir::evaluate(e, env));
}

TEST_F(Simplify, CallSimplifiesOneNode) {
  opt::Simplifier simplifier(library());
  EXPECT_EQ(simplifier.call("mul", {x, k(1)}).get(), x.get());
  EXPECT_TRUE(simplifier.call("add", {k(1), k(2)})->isConst(3));
  EXPECT_THROW(simplifier.call("no_such_prim", {x}), std::logic_error);
}

TEST_F(Simplify, SumIsPulledThroughLinearOperations) {
  Expr r = Node::makeInput("r", 2, ir::ShapeClass::Row);
  // sum(x) * r, except for an empty row (D = 0): there r may be NaN (a mean over the empty
  // row) and 0 * NaN is NaN, where the sum over no elements is 0.
  Expr s = simplify(call("sum", {call("mul", {x, r})}));
  ASSERT_TRUE(s->isCall("where")) << ir::printDag({{"s", s}});
  ASSERT_TRUE(s->args()[0]->isCall("eq"));
  EXPECT_EQ(s->args()[0]->args()[0]->kind(), ir::NodeKind::Dim);
  EXPECT_TRUE(s->args()[0]->args()[1]->isConst(0));
  EXPECT_TRUE(s->args()[1]->isCall("sum"));
  ASSERT_TRUE(s->args()[2]->isCall("mul"));
  EXPECT_EQ(s->args()[2]->args()[0].get(), s->args()[1].get());
  EXPECT_EQ(s->args()[2]->args()[1].get(), r.get());
  // A finite constant factor needs no guard.
  s = simplify(call("sum", {call("mul", {k(2.5), x})}));
  ASSERT_TRUE(s->isCall("mul")) << ir::printDag({{"s", s}});
  EXPECT_TRUE(s->args()[0]->isConst(2.5));
  EXPECT_TRUE(s->args()[1]->isCall("sum"));
  s = simplify(call("sum", {call("neg", {x})}));
  ASSERT_TRUE(s->isCall("neg"));
  EXPECT_TRUE(s->args()[0]->isCall("sum"));
  // max is not linear: max(-x) != -max(x).
  s = simplify(call("max", {call("neg", {x})}));
  EXPECT_TRUE(s->isCall("max"));
  EXPECT_EQ(s->prim()->kind, prims::PrimKind::Reduction);
}

TEST_F(Simplify, ReductionRewritesPreserveTheValueOverARow) {
  Expr r = Node::makeInput("r", 2, ir::ShapeClass::Row);
  Expr b = Node::makeInput("b", 3, ir::ShapeClass::Col);
  RowEnv env;
  env.inputs = {{"x", {0.3, -1.2, 2.2, 0.9, -0.4}},
                {"y", {1.5, 0.25, -0.75, 2.0, -1.0}},
                {"r", std::vector<double>(5, -0.6)},
                {"b", {1.1, 0.5, -0.8, 1.9, 0.2}}};
  for (const char* red : {"sum", "mean", "max", "min"}) {
    auto R = [red](Expr e) { return call(red, {std::move(e)}); };
    const Expr cases[] = {
        R(call("neg", {x})),
        R(call("add", {x, y})),
        R(call("sub", {call("mul", {x, x}), y})),
        R(call("mul", {x, r})),
        R(call("mul", {r, call("exp", {x})})),
        R(call("mul", {k(2.5), x})),
        R(call("div", {x, r})),
        R(call("div", {r, x})),
        R(call("add", {x, b})),
        R(call("mul", {call("neg", {x}), call("add", {y, k(1)})})),
        call("add", {x, R(call("mul", {call("sub", {x, y}), r}))}),
    };
    for (const Expr& e : cases) {
      SCOPED_TRACE(ir::printDag({{"e", e}}));
      Expr s = simplify(e);
      std::vector<double> before = evalRow(e, env), after = evalRow(s, env);
      ASSERT_EQ(before.size(), after.size());
      for (size_t j = 0; j < before.size(); ++j)
        EXPECT_NEAR(after[j], before[j], 1e-12 * (1 + std::fabs(before[j])))
            << ir::printDag({{"simplified", s}});
    }
  }
}

// DISABLED: fails today. Simplify.cpp applies the linearity rules (sum(x * r) -> sum(x) * r,
// ...) to every reduction with `combine: sum`, whatever its `finish` formula; with a
// non-linear finish such as sqrt(acc) the rewrite changes the value.
TEST(SimplifyLibrary, LinearityNeedsALinearFinish) {
  std::ostringstream out;
  int first = 0;
  auto lib = libraryWith("- name: rootsum(x)\n"
                         "  kind: reduction\n"
                         "  combine: sum\n"
                         "  finish: sqrt(acc)\n"
                         "  torch: \"{x}.sum(-1, keepdim=True).sqrt()\"\n"
                         "  grad: {x: grad * 0.5 / result}\n",
                         first, out);
  ASSERT_TRUE(lib) << out.str();
  Expr x = Node::makeInput("x", 0, ir::ShapeClass::Full);
  Expr e =
      Node::makeCall(lib->find("rootsum", 1), {Node::makeCall(lib->find("mul", 2), {x, k(4)})});
  Expr s = opt::Simplifier(*lib).simplify(e);
  RowEnv env;
  env.inputs = {{"x", {0.5, 1.0, 2.0, 0.25, 1.25}}}; // sum 5: sqrt(4 * 5) = 2 sqrt(5)
  EXPECT_DOUBLE_EQ(evalRow(e, env)[0], 2 * std::sqrt(5.0));
  EXPECT_DOUBLE_EQ(evalRow(s, env)[0], 2 * std::sqrt(5.0)) << ir::printDag({{"s", s}});
}

// ---- CSE ----

TEST(Cse, StructurallyEqualSubtreesBecomeOneNode) {
  Expr x = Node::makeInput("x", 0, ir::ShapeClass::Full);
  Expr y = Node::makeInput("y", 1, ir::ShapeClass::Col);
  Expr m1 = call("mul", {x, y});
  Expr m2 = call("mul", {x, y});
  ASSERT_NE(m1.get(), m2.get());
  Expr e = call("add", {call("tanh", {m1}), call("tanh", {m2})});
  std::vector<Expr> out = opt::cse({e});
  ASSERT_EQ(out.size(), 1u);
  const Expr& r = out[0];
  ASSERT_TRUE(r->isCall("add"));
  EXPECT_EQ(r->args()[0].get(), r->args()[1].get());
  EXPECT_TRUE(r->args()[0]->isCall("tanh"));
  // Leaves keep their identity.
  const Expr& mul = r->args()[0]->args()[0];
  EXPECT_EQ(mul->args()[0].get(), x.get());
  EXPECT_EQ(mul->args()[1].get(), y.get());
  // x, y, mul, tanh, add: each once.
  std::vector<const ir::Node*> order = ir::topoOrder(out);
  EXPECT_EQ(order.size(), 5u);
  EXPECT_EQ(std::set<const ir::Node*>(order.begin(), order.end()).size(), order.size());
  EXPECT_EQ(ir::topoOrder({e}).size(), 7u); // before: two muls and two tanhs
}

TEST(Cse, SharesAcrossRootsAndMergesEqualConstants) {
  Expr x = Node::makeInput("x", 0, ir::ShapeClass::Full);
  Expr a = call("mul", {x, k(0.5)});
  Expr b = call("mul", {x, k(0.5)});
  Expr c = call("mul", {x, k(0.25)});
  std::vector<Expr> out = opt::cse({a, b, c, nullptr});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].get(), out[1].get());
  EXPECT_NE(out[0].get(), out[2].get());
  EXPECT_EQ(out[3], nullptr);
  EXPECT_EQ(out[0]->args()[0].get(), x.get());
  EXPECT_EQ(out[2]->args()[0].get(), x.get());
  std::vector<const ir::Node*> order = ir::topoOrder(out);
  EXPECT_EQ(order.size(), 5u); // x, 0.5, 0.25, two muls
  EXPECT_EQ(std::set<const ir::Node*>(order.begin(), order.end()).size(), order.size());
}

TEST(Cse, DoesNotMergeDifferentOperations) {
  Expr x = Node::makeInput("x", 0, ir::ShapeClass::Full);
  Expr y = Node::makeInput("y", 1, ir::ShapeClass::Full);
  std::vector<Expr> out = opt::cse({call("sub", {x, y}), call("sub", {y, x}), call("add", {x, y})});
  EXPECT_NE(out[0].get(), out[1].get());
  EXPECT_NE(out[0].get(), out[2].get());
  EXPECT_NE(out[1].get(), out[2].get());
  EXPECT_EQ(ir::topoOrder(out).size(), 5u);
}

TEST(TopoOrder, ArgumentsComeBeforeUsersWithoutDuplicates) {
  Expr x = Node::makeInput("x", 0, ir::ShapeClass::Full);
  Expr t = call("tanh", {x});
  Expr u = call("mul", {t, t});
  Expr v = call("add", {u, t});
  std::vector<const ir::Node*> order = ir::topoOrder({v, u, v});
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0], x.get());
  EXPECT_EQ(order[1], t.get());
  EXPECT_EQ(order[2], u.get());
  EXPECT_EQ(order[3], v.get());
}

} // namespace
} // namespace fusegen::test
