// Tests of typed values (ir::ValueType): integer and bool inputs, the column index j, integer
// literals, how calls are typed (torch's promotion: integers stay integers under + - * and the
// closed primitives, a float or a division makes a float), that integers carry no gradient,
// and that the gradient of a pick sum(where(j == t, x, 0)) is the one-hot scatter
// where(j == t, grad, 0), checked against the scalar interpreter.
#include "TestUtil.h"

#include "ir/Interpreter.h"
#include "ir/Node.h"
#include "plan/KernelPlan.h"

#include <gtest/gtest.h>

namespace fusegen::test {
namespace {

using ir::ValueType;

std::string spec(const std::string& lets, const std::string& outputs) {
  return "op: t\ninputs:\n  x: [..., D]\n  t: {shape: [...], dtype: int64}\n"
         "  m: {shape: [...], dtype: bool}\n"
         "attrs:\n  k: {type: int, default: -100}\n  s: {type: float, default: 0.5}\n"
         "let:\n" +
         lets + "outputs:\n" + outputs;
}

ValueType letType(const Lowered& r, const std::string& name) {
  for (const auto& [n, e] : r.fn->lets)
    if (n == name) return e->type();
  throw std::runtime_error("no let " + name);
}

TEST(TypedValues, InputsAttrsAndLeavesCarryTheirTypes) {
  Lowered r = lowerSpec(spec("  a: j\n  b: t\n  c: D\n  d: k\n  e: s\n  f: m\n",
                             "  y: where(f, x * a * b * c * d * e, 0)\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  EXPECT_EQ(letType(r, "a"), ValueType::Int);
  EXPECT_EQ(letType(r, "b"), ValueType::Int);
  EXPECT_EQ(letType(r, "c"), ValueType::Int);
  EXPECT_EQ(letType(r, "d"), ValueType::Int);
  EXPECT_EQ(letType(r, "e"), ValueType::Value);
  EXPECT_EQ(letType(r, "f"), ValueType::Bool);
  EXPECT_EQ(r.fn->inputs[1].type, spec::InputType::Int64);
  EXPECT_EQ(r.fn->inputs[2].type, spec::InputType::Bool);
}

TEST(TypedValues, PromotionFollowsTorch) {
  Lowered r = lowerSpec(spec(
      "  plus: t + 1\n"                    // integer and integer literal: integer
      "  prod: j * t - D\n"                // closed arithmetic: integer
      "  sel: where(j == t, t, 0)\n"       // where of integers: integer
      "  cnt: sum(where(j == t, t, 0))\n"  // a sum of integers: integer
      "  lit: where(j == t, t, 0.0)\n"     // a float literal: float
      "  one: where(j == t, 1, 0)\n"       // literals alone: float (as before types)
      "  fl: 1.0 * t\n"                    // likewise
      "  quo: t / 2\n"                     // true division: float
      "  mix: t * s\n"                     // a float attr: float
      "  avg: mean(where(j == t, 1, 0))\n" // mean divides: float
      "  ex: exp(t)\n",                    // float functions: float
      "  y: where(m, x * (plus + prod + sel + cnt + lit + one + fl + quo + mix + avg + ex), 0)\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  for (const char* name : {"plus", "prod", "sel", "cnt"})
    EXPECT_EQ(letType(r, name), ValueType::Int) << name;
  for (const char* name : {"lit", "one", "fl", "quo", "mix", "avg", "ex"})
    EXPECT_EQ(letType(r, name), ValueType::Value) << name;
}

TEST(TypedValues, IntegerOutputsAreRejected) {
  Lowered r = lowerSpec(spec("  a: t + 1\n", "  y: where(x > 0, a, 0) + where(m, t, 0)\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_NE(r.messages.find("output 'y' has integer values"), std::string::npos) << r.messages;
  // 1.0 * (...) makes it a float output.
  Lowered ok =
      lowerSpec(spec("  a: t + 1\n", "  y: 1.0 * (where(x > 0, a, 0) + where(m, t, 0))\n"));
  EXPECT_TRUE(ok.fn) << ok.messages;
}

TEST(TypedValues, BoolInputsAreConditionsNotValues) {
  Lowered r = lowerSpec(spec("  a: j\n", "  y: x * m * a\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_NE(r.messages.find("a condition cannot be used as a value"), std::string::npos)
      << r.messages;
}

TEST(TypedValues, IntegersCarryNoGradient) {
  // exp(t) and x * t would give t an adjoint if integers were differentiated.
  Lowered r = lowerSpec(spec("  a: j\n", "  y: where(m, x * t + exp(t) + a * x, 0)\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  autodiff::Gradient g = gradientOf(*r.fn);
  ASSERT_TRUE(g.inputGrads[0]);
  EXPECT_FALSE(g.inputGrads[1]) << "the int64 input got a gradient";
  EXPECT_FALSE(g.inputGrads[2]) << "the bool input got a gradient";
}

// The derivative of the pick in x is where(j == t, grad, 0): at every column j and target t,
// evaluated by the interpreter, it is grad at j == t and 0 elsewhere; no one-hot tensor or
// reduction appears in it.
TEST(TypedValues, GradientOfAPickIsTheOneHotScatter) {
  Lowered r = lowerSpec(spec("  picked: sum(where(j == t, x, 0))\n", "  y: where(m, picked, 0)\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  autodiff::Gradient g = gradientOf(*r.fn);
  const ir::Expr& dx = g.inputGrads[0];
  ASSERT_TRUE(dx);
  EXPECT_EQ(dx->shape(), ir::ShapeClass::Full);
  for (const ir::Node* n : ir::topoOrder({dx}))
    EXPECT_FALSE(n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Reduction)
        << "a reduction in the pick's gradient: " << n->prim()->name;
  for (int j = 0; j < 5; ++j)
    for (int t : {-100, 0, 2, 4}) {
      ir::Env env;
      env.D = 5;
      env.j = j;
      env.inputs = {{"x", 0.75}, {"t", t}, {"m", 1}};
      env.attrs = {{"k", -100}, {"s", 0.5}};
      env.gradOuts = {{"y", 1.5}};
      EXPECT_EQ(ir::evaluate(dx, env), j == t ? 1.5 : 0.0) << "j=" << j << " t=" << t;
    }
}

// The pick rides in the maximum's pass, and the sum shifted by that maximum still runs with
// it in one combination (cross-entropy's forward reads the row once).
TEST(TypedValues, APickRidesWithTheMaximumAndKeepsTheShift) {
  Planned planned = planSpec(spec("  mx: detach(max(x))\n  lse: mx + log(sum(exp(x - mx)))\n"
                                  "  picked: sum(where(j == t, x, 0))\n",
                                  "  y: where(m, where(t == k, 0, lse - picked), 0)\n"));
  const std::optional<plan::KernelPlan>& p = planned.plan;
  ASSERT_TRUE(p) << planned.messages;
  ASSERT_EQ(p->forward.stages.size(), 2u);
  EXPECT_EQ(p->forward.stages[0].reductions.size(), 2u); // the maximum and the pick
  // The pick is its term at one column, not a sum over the row.
  EXPECT_EQ(p->forward.stages[0].pick, (std::vector<bool>{false, true}));
  ASSERT_EQ(p->forward.stages[1].shift.size(), 1u);
  EXPECT_GE(p->forward.stages[1].shift[0], 0) << "the sum of exp is not shifted";
  EXPECT_TRUE(p->forward.usesColumn);
  // The backward has no pass over the row: the softmax is recomputed from the saved values.
  EXPECT_TRUE(p->backward.stages.empty());
}

// A softmax over the elements a bool mask keeps is shifted by its masked maximum (online
// max-and-sum: one combination across threads), written either way: the exponent masked with
// a constant whose exp is 0, or the term masked with 0. A term masked with 1 is not: it does not
// scale with the maximum.
TEST(TypedValues, AMaskedSoftmaxIsShiftedByItsMaskedMaximum) {
  auto shifted = [](const std::string& term) {
    Planned planned =
        planSpec("op: t\ninputs:\n  x: [..., D]\n  mask: {shape: [..., D], dtype: bool}\n"
                 "let:\n  m: detach(max(where(mask, x, -1.0e30)))\n  e: " +
                 term + "\noutputs:\n  y: e / sum(e)\n");
    EXPECT_TRUE(planned.plan) << planned.messages;
    const plan::Program& f = planned.plan->forward;
    return f.stages.size() == 2 && f.stages[1].shift.size() == 1 && f.stages[1].shift[0] == 0;
  };
  EXPECT_TRUE(shifted("exp(where(mask, x - m, -1.0e30))"));
  EXPECT_TRUE(shifted("where(mask, exp(x - m), 0)"));
  EXPECT_TRUE(shifted("where(mask, 0, exp(x - m))"));
  EXPECT_FALSE(shifted("where(mask, exp(x - m), 1)"));        // 1 does not scale with m
  EXPECT_FALSE(shifted("exp(where(mask, x - m, -1.0))"));     // exp(-1) is not 0
  EXPECT_FALSE(shifted("exp(where(x > 0, x - m, -1.0e30))")); // not the maximum's mask
}

} // namespace
} // namespace fusegen::test
