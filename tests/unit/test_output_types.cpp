// Tests of outputs of their own type (float32, FP8: spec::OutputType) and of whole-tensor values
// ([] outputs through sum_all, max_all, min_all): an output of its own type has no gradient and
// the backward takes none for it; a whole-tensor value becomes a Total output of the forward
// (combined as its primitive says, saved in the compute type), which the [] output's finish
// reads, and which the backward reads back as a [] input where its gradients use it.
#include "TestUtil.h"

#include "ir/Interpreter.h"
#include "plan/KernelPlan.h"

#include <gtest/gtest.h>

namespace fusegen::test {
namespace {

using plan::OutKind;

TEST(OutputTypes, AnOutputOfItsOwnTypeHasNoGradient) {
  Planned planned = planSpec("op: t\ninputs:\n  x: [..., D]\n"
                             "let:\n  m: mean(x)\n"
                             "outputs:\n  y: x - m\n  mu: {value: m, dtype: float32}\n"
                             "  q: {value: x * 2, dtype: float8_e4m3fn}\n");
  ASSERT_TRUE(planned.plan) << planned.messages;
  const plan::KernelPlan& p = *planned.plan;
  ASSERT_GE(p.forward.outputs.size(), 3u);
  EXPECT_EQ(p.forward.outputs[1].type, spec::OutputType::Float32);
  EXPECT_EQ(p.forward.outputs[2].type, spec::OutputType::Float8E4M3);
  // The backward takes the gradient of y alone: x's gradient is grad_y - mean(grad_y), as if
  // mu and q were not there.
  int grads = 0;
  for (const plan::Program::Input& in : p.backward.inputs)
    grads += in.name.rfind("_grad_", 0) == 0;
  EXPECT_EQ(grads, 1);
  Lowered l = lowerSpec("op: t\ninputs:\n  x: [..., D]\noutputs:\n  y: x * 2\n"
                        "  q: {value: x * 3, dtype: float8_e4m3fn}\n");
  ASSERT_TRUE(l.fn) << l.messages;
  autodiff::Gradient g = gradientOf(*l.fn);
  EXPECT_TRUE(g.gradOuts[0]);
  EXPECT_FALSE(g.gradOuts[1]);
  ir::Env env;
  env.inputs = {{"x", 3.0}};
  env.gradOuts = {{"y", 1.5}};
  EXPECT_EQ(ir::evaluate(g.inputGrads[0], env), 3.0); // 2 * 1.5: q contributes nothing
}

// A count is an integer formula: stored as float32 (its own type) it needs no 1.0 * (...); in
// the op's dtype it is still an error.
TEST(OutputTypes, AnOutputOfItsOwnTypeTakesIntegerValues) {
  const std::string inputs = "op: t\ninputs:\n  x: [..., D]\n  t: {shape: [...], dtype: int64}\n";
  Lowered ok = lowerSpec(inputs + "outputs:\n  y: where(j == t, x, 0)\n"
                                  "  n: {value: t * 2 + 1, dtype: float32}\n");
  EXPECT_TRUE(ok.fn) << ok.messages;
  Lowered bad = lowerSpec(inputs + "outputs:\n  y: where(j == t, x, 0)\n"
                                   "  n: t * 2 + 1\n");
  EXPECT_FALSE(bad.fn);
  EXPECT_NE(bad.messages.find("has integer values"), std::string::npos) << bad.messages;
}

TEST(OutputTypes, AnOpWithoutDifferentiableOutputsHasNoGradients) {
  Planned planned = planSpec("op: t\ninputs:\n  x: [..., D]\n  w: [D]\n"
                             "outputs:\n  q: {value: x * w, dtype: float8_e5m2}\n");
  ASSERT_TRUE(planned.plan) << planned.messages;
  for (const plan::Program::Output& g : planned.plan->backward.outputs)
    EXPECT_FALSE(g.value) << g.name;
}

// loss = sum_all(l) / sum_all(kept): two Total outputs of per-row values (sums), saved; the
// [] output is the program's finish; the backward reads the count (grad / count per row).
TEST(WholeTensorValues, AMeanOverKeptRowsIsTwoSavedTotalsAndAFinish) {
  Planned planned = planSpec("op: t\ninputs:\n  x: [..., D]\n  keep: {shape: [...], dtype: bool}\n"
                             "let:\n  l: log(sum(exp(x)))\n"
                             "outputs:\n  loss: sum_all(where(keep, l, 0)) / sum_all(where(keep, "
                             "1.0, 0))\n");
  ASSERT_TRUE(planned.plan) << planned.messages;
  const plan::KernelPlan& p = *planned.plan;
  EXPECT_EQ(p.forward.plan, plan::RuntimePlan::Row);
  EXPECT_EQ(p.forward.outputs[0].kind, OutKind::Scalar);
  ASSERT_EQ(p.savedTotals.size(), 2u);
  int totals = 0;
  for (const plan::Program::Output& o : p.forward.outputs)
    if (o.kind == OutKind::Total) {
      ++totals;
      EXPECT_EQ(o.combine, prims::Combine::Sum);
      EXPECT_EQ(o.totalOf, plan::Program::TotalOf::Rows);
      EXPECT_EQ(o.type, spec::OutputType::Compute);
      EXPECT_TRUE(o.whole);
    }
  EXPECT_EQ(totals, 2);
  bool readsCount = false;
  for (const plan::Program::Input& in : p.backward.inputs)
    if (in.shape == ir::ShapeClass::Scalar && in.stat) readsCount = readsCount || in.read;
  EXPECT_TRUE(readsCount);
}

TEST(WholeTensorValues, AnAmaxIsAMaximumOverElements) {
  Planned planned = planSpec("op: t\ninputs:\n  x: [..., D]\n  s: []\n"
                             "outputs:\n  q: {value: x * s, dtype: float8_e4m3fn}\n"
                             "  amax: {value: max_all(abs(x)), dtype: float32}\n");
  ASSERT_TRUE(planned.plan) << planned.messages;
  const plan::KernelPlan& p = *planned.plan;
  EXPECT_EQ(p.forward.plan, plan::RuntimePlan::Row); // (the finish is the row plan's)
  bool found = false;
  for (const plan::Program::Output& o : p.forward.outputs)
    if (o.kind == OutKind::Total) {
      found = true;
      EXPECT_EQ(o.combine, prims::Combine::Max);
      EXPECT_EQ(o.totalOf, plan::Program::TotalOf::Elements);
    }
  EXPECT_TRUE(found);
}

} // namespace
} // namespace fusegen::test

namespace fusegen::test {
namespace {

// RMSNorm's amax: rstd (a reduction's, never below 0) moves out of max(abs(...)), so the
// maximum is taken in the pass of mean(x * x), one pass instead of two; a factor that may be
// negative (a per-row input) or that no reduction computes stays, as does a sum.
TEST(RowExtrema, ANonNegativeReducedFactorMovesOutOfAMaximum) {
  auto passes = [](const std::string& scale) {
    const bool r = scale.find('r') != std::string::npos;
    Planned p = planSpec("op: t\ninputs:\n  x: [..., D]\n  w: [D]\n" +
                         std::string(r ? "  r: [...]\n" : "") +
                         "let:\n  y: x * rsqrt(mean(x * x) + 1e-6) * w\n"
                         "outputs:\n  y8: {value: y / " +
                         scale + ", dtype: float8_e4m3fn}\n");
    if (!p.plan) throw std::runtime_error(p.messages);
    return p.plan->forward.stages.size();
  };
  EXPECT_EQ(passes("max(abs(y))"), 1u);
  EXPECT_EQ(passes("min(y * y)"), 1u);      // rstd twice: both move out
  EXPECT_EQ(passes("max(y + x)"), 2u);      // not a product: stays
  EXPECT_EQ(passes("max(abs(y * r))"), 1u); // r: any sign, stays inside; rstd moves out
  Lowered l = lowerSpec("op: t\ninputs:\n  x: [..., D]\noutputs:\n"
                        "  s: max(x * sqrt(sum(x * x)))\n");
  ASSERT_TRUE(l.fn) << l.messages;
  // where(D == 0, max(x), sqrt(sum(x * x)) * max(x)): an empty row keeps max's identity.
  EXPECT_TRUE(l.fn->outputs[0].value->isCall("where"));
}

} // namespace
} // namespace fusegen::test
