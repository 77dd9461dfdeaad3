// Tests of random numbers in the IR and the planner: each call of a primitive with a `random`
// parameter draws a stream of its own (a let used twice is one draw), the derivative rule of
// dropout reads the forward's draw (the interpreter gives the kept and the dropped branch),
// the programs take the streams as Random inputs, and what autograd keeps: the inputs the
// backward reads, and an output's gradient passed on as an input's where it is one.
#include "TestUtil.h"

#include "ir/Interpreter.h"
#include "ir/Node.h"
#include "plan/KernelPlan.h"

#include <gtest/gtest.h>

#include <set>

namespace fusegen::test {
namespace {

std::set<int> streamsOf(const ir::Expr& e) {
  std::set<int> out;
  for (const ir::Node* n : ir::topoOrder({e}))
    if (n->kind() == ir::NodeKind::Random) out.insert(n->index());
  return out;
}

TEST(Random, EachCallDrawsItsOwnStreamAndALetIsOneDraw) {
  Lowered r = lowerSpec("op: t\ninputs:\n  x: [..., D]\nattrs:\n  p: {type: float, default: 0.1}\n"
                        "let:\n  d: dropout(x, p)\noutputs:\n"
                        "  y: d + d + dropout(x, p) + rand()\n");
  ASSERT_TRUE(r.fn) << r.messages;
  EXPECT_EQ(streamsOf(r.fn->outputs[0].value), (std::set<int>{0, 1, 2}));
  const ir::Expr& y = r.fn->outputs[0].value;
  EXPECT_FALSE(y->isConstant()); // random numbers are per element, never uniform
  EXPECT_EQ(y->shape(), ir::ShapeClass::Full);
}

TEST(Random, RandomParametersAreNotPassed) {
  Lowered r = lowerSpec("op: t\ninputs:\n  x: [..., D]\noutputs:\n  y: dropout(x, 0.1, 0.5)\n");
  EXPECT_FALSE(r.fn);
  EXPECT_NE(r.messages.find("'dropout' takes 2 arguments, got 3"), std::string::npos) << r.messages;
}

// d/dx dropout(x, p) is 1 / (1 - p) where the draw keeps x and 0 where it drops it: the rule
// reads the same stream as the forward, so the backward's mask is the forward's.
TEST(Random, DropoutsGradientReadsTheForwardsDraw) {
  Lowered r = lowerSpec("op: t\ninputs:\n  x: [..., D]\nattrs:\n  p: {type: float, default: 0.25}\n"
                        "outputs:\n  y: dropout(x, p)\n");
  ASSERT_TRUE(r.fn) << r.messages;
  autodiff::Gradient g = gradientOf(*r.fn);
  ASSERT_TRUE(g.inputGrads[0]);
  EXPECT_EQ(streamsOf(g.inputGrads[0]), (std::set<int>{0}));
  for (double u : {0.1, 0.2499, 0.25, 0.9}) {
    ir::Env env;
    env.inputs = {{"x", 3.0}};
    env.attrs = {{"p", 0.25}};
    env.gradOuts = {{"y", 2.0}};
    env.random = {{0, u}};
    const bool kept = u >= 0.25;
    EXPECT_EQ(ir::evaluate(r.fn->outputs[0].value, env), kept ? 3.0 / 0.75 : 0.0) << u;
    EXPECT_EQ(ir::evaluate(g.inputGrads[0], env), kept ? 2.0 / 0.75 : 0.0) << u;
  }
}

// bias_dropout_add: the streams follow the inputs in both programs; the backward reads none of
// the op's inputs (they are not kept), and the residual's gradient is the output's.
TEST(Random, BiasDropoutAddKeepsNothingAndPassesTheResidualsGradientOn) {
  Planned planned = planSpec("op: t\ninputs:\n  x: [..., D]\n  bias: [D]\n  residual: [..., D]\n"
                             "attrs:\n  p: {type: float, default: 0.1}\n"
                             "outputs:\n  y: residual + dropout(x + bias, p)\n");
  const std::optional<plan::KernelPlan>& p = planned.plan;
  ASSERT_TRUE(p) << planned.messages;
  EXPECT_EQ(p->randomStreams, 1);
  ASSERT_EQ(p->forward.inputs.size(), 4u);
  EXPECT_TRUE(p->forward.inputs[3].random);
  ASSERT_GE(p->backward.inputs.size(), 4u);
  EXPECT_TRUE(p->backward.inputs[3].random);
  for (int k = 0; k < 3; ++k)
    EXPECT_FALSE(p->backward.inputs[k].read) << p->backward.inputs[k].name;
  EXPECT_EQ(p->passthrough, (std::vector<int>{-1, -1, 0}));
}

// An input the backward reads is kept; a gradient that is not an output's unchanged is
// computed (rezero's x gets grad_y as it is; h and alpha do not).
TEST(Random, OnlyUnchangedOutputGradientsArePassedOn) {
  Planned planned = planSpec("op: t\ninputs:\n  x: [..., D]\n  h: [..., D]\n  alpha: []\n"
                             "outputs:\n  y: x + alpha * h\n");
  const std::optional<plan::KernelPlan>& p = planned.plan;
  ASSERT_TRUE(p) << planned.messages;
  EXPECT_EQ(p->randomStreams, 0);
  EXPECT_EQ(p->passthrough, (std::vector<int>{0, -1, -1}));
  EXPECT_FALSE(p->backward.inputs[0].read); // x: its gradient is grad_y
  EXPECT_TRUE(p->backward.inputs[1].read);  // h: alpha's gradient sums grad_y * h
  EXPECT_TRUE(p->backward.inputs[2].read);  // alpha: h's gradient is grad_y * alpha
}

} // namespace
} // namespace fusegen::test
