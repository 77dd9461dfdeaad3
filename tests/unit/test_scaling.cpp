// Tests of the compiler on large and deep inputs: flat chains of any length go through
// Sema, reverse mode, the planner and destruction without deep recursion, and the passes do
// work proportional to the DAG, not to the tree it unfolds to. (Nested calls used to make the
// simplifier copy the whole forward chain at every step of reverse mode, so the backward of
// exp(exp(...exp(x)...)) grew as the cube of the depth.) Sizes are asserted, never times.
#include "TestUtil.h"

#include "ir/Node.h"
#include "opt/Simplify.h"
#include "plan/KernelPlan.h"

#include <gtest/gtest.h>

#include <string>

namespace fusegen::test {
namespace {

using ir::Expr;
using ir::Node;

std::string specWith(const std::string& formula) {
  return "op: t\ninputs:\n  x: [..., D]\n  w: [D]\noutputs:\n  y: " + formula + "\n";
}

std::string nested(const std::string& fn, int depth, const std::string& inner) {
  std::string s;
  for (int i = 0; i < depth; ++i)
    s += fn + "(";
  return s + inner + std::string(depth, ')');
}

TEST(Scaling, SimplifyKeepsNodesNoRuleChanges) {
  opt::Simplifier simplifier(library());
  Expr x = Node::makeInput("x", 0, ir::ShapeClass::Full);
  Expr chain = x;
  for (int i = 0; i < 50; ++i)
    chain = call("exp", {chain});
  EXPECT_EQ(simplifier.simplify(chain).get(), chain.get());
  // A new node over a simplified one: only the new node is rewritten; what lies below keeps
  // its identity (reverse mode builds each contribution this way over the forward DAG).
  Expr product = simplifier.simplify(call("mul", {chain, chain->args()[0]}));
  ASSERT_TRUE(product->isCall("mul"));
  EXPECT_EQ(product->args()[0].get(), chain.get());
  EXPECT_EQ(product->args()[1].get(), chain->args()[0].get());
  // Rewritten nodes are shared: one rewrite of x*1 serves every user.
  Expr times1 = call("mul", {x, Node::makeConst(1)});
  Expr twice = simplifier.simplify(call("add", {call("exp", {times1}), call("log", {times1})}));
  EXPECT_EQ(twice->args()[0]->args()[0].get(), x.get());
  EXPECT_EQ(twice->args()[1]->args()[0].get(), x.get());
}

// The backward of a chain of n nested calls has O(n) nodes, each built once: the gradient's
// DAG is no bigger than a small multiple of the forward's.
TEST(Scaling, BackwardOfNestedCallsIsLinearInTheDepth) {
  for (int depth : {16, 64, 256}) {
    Lowered l = lowerSpec(specWith(nested("exp", depth, "x * w")));
    ASSERT_TRUE(l.fn) << l.messages;
    autodiff::Gradient g = gradientOf(*l.fn);
    ASSERT_TRUE(g.inputGrads[0]);
    size_t nodes = ir::topoOrder({g.inputGrads[0], g.inputGrads[1]}).size();
    EXPECT_LE(nodes, 3u * depth + 16) << "depth " << depth;
  }
}

// x + x*w - x + ... with 20,000 terms: a left-deep tree 20,000 levels deep, lowered,
// differentiated, planned and freed without recursion as deep as the chain.
TEST(Scaling, FlatChainThroughEveryStage) {
  const int terms = 20000;
  std::string formula = "x";
  for (int i = 1; i < terms; ++i)
    formula += i % 3 == 0 ? " - x" : i % 3 == 1 ? " + x * w" : " + w";
  Lowered l = lowerSpec(specWith(formula));
  ASSERT_TRUE(l.fn) << l.messages;
  EXPECT_GE(ir::topoOrder({l.fn->outputs[0].value}).size(), static_cast<size_t>(terms));
  autodiff::Gradient g = gradientOf(*l.fn);
  ASSERT_TRUE(g.inputGrads[0] && g.inputGrads[1]);
  std::ostringstream out;
  Diagnostics diags(out);
  std::optional<spec::OpSpec> s = spec::loadSpecFromString("t.yaml", specWith(formula), diags);
  ASSERT_TRUE(s);
  EXPECT_TRUE(plan::planOp(*s, *l.fn, g, library(), diags)) << out.str();
}

TEST(Scaling, DeepDagsAreFreedWithoutRecursion) {
  Expr chain = Node::makeInput("x", 0, ir::ShapeClass::Full);
  for (int i = 0; i < 300000; ++i)
    chain = call(i % 2 ? "exp" : "neg", {chain});
  chain.reset(); // recursive destruction this deep overflows an 8 MiB stack
  SUCCEED();
}

} // namespace
} // namespace fusegen::test
