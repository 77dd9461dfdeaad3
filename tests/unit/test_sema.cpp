// Tests of spec loading + expr::lowerOp (name resolution, type and shape checks): shape-class
// joins, and every user-facing Sema error with its exact text and location. These are the
// checks that turn a wrong spec into a clear message instead of a kernel that does not
// compile or silently broadcasts the wrong way. Last, how the row plan takes [] inputs.
#include "TestUtil.h"

#include "ir/Interpreter.h"
#include "ir/Node.h"
#include "opt/Simplify.h"
#include "plan/KernelPlan.h"

#include <gtest/gtest.h>
#include <limits>
#include <regex>

#include <set>

namespace fusegen::test {
namespace {

using ir::ShapeClass;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A spec with the given inputs/attrs/outputs blocks (already indented YAML text).
std::string spec(const std::string& inputs, const std::string& outputs,
                 const std::string& extra = "") {
  return "op: t\ninputs:\n" + inputs + extra + "outputs:\n" + outputs;
}

const ir::Expr& output(const Lowered& r, const std::string& name) {
  for (const ir::FunctionOutput& o : r.fn->outputs)
    if (o.name == name) return o.value;
  throw std::runtime_error("no output " + name);
}

TEST(Sema, JoinShapesTable) {
  const ShapeClass S = ShapeClass::Scalar, C = ShapeClass::Col, R = ShapeClass::Row,
                   F = ShapeClass::Full;
  struct Case {
    ShapeClass a, b, expected;
  } cases[] = {
      {S, S, S}, {S, C, C}, {S, R, R}, {S, F, F}, {C, C, C},
      {C, R, F}, {C, F, F}, {R, R, R}, {R, F, F}, {F, F, F},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ir::joinShapes(c.a, c.b), c.expected)
        << spec::shapeClassSpelling(c.a) << " with " << spec::shapeClassSpelling(c.b);
    EXPECT_EQ(ir::joinShapes(c.b, c.a), c.expected)
        << spec::shapeClassSpelling(c.b) << " with " << spec::shapeClassSpelling(c.a);
  }
}

TEST(Sema, OutputShapesAreTheJoinOfTheirArguments) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n  b: [D]\n  r: [...]\n  s: []\n",
                             "  full_col: x * b\n"
                             "  col_row: b + r\n"
                             "  row_scalar: r * s\n"
                             "  col_scalar_full: (b - s) * x\n"
                             "  row_only: exp(r)\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(output(r, "full_col")->shape(), ShapeClass::Full);
  EXPECT_EQ(output(r, "col_row")->shape(), ShapeClass::Full);
  EXPECT_EQ(output(r, "row_scalar")->shape(), ShapeClass::Row);
  EXPECT_EQ(output(r, "col_scalar_full")->shape(), ShapeClass::Full);
  EXPECT_EQ(output(r, "col_scalar_full")->args()[0]->shape(), ShapeClass::Col);
  EXPECT_EQ(output(r, "row_only")->shape(), ShapeClass::Row);
  ASSERT_EQ(r.fn->inputs.size(), 4u);
  EXPECT_EQ(r.fn->inputs[1].shape, ShapeClass::Col);
  EXPECT_EQ(r.fn->inputs[1].node->shape(), ShapeClass::Col);
}

TEST(Sema, ConstantsAreScalarAndDoNotWidenShapes) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n  b: [D]\n", "  y: x * (b * 2 + 1)\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  const ir::Expr& y = output(r, "y");
  EXPECT_EQ(y->shape(), ShapeClass::Full);
  EXPECT_EQ(y->args()[1]->shape(), ShapeClass::Col);
  EXPECT_FALSE(y->isConstant());
}

// inf is a literal every formula can use, like D and j (-inf its negation).
TEST(Sema, InfIsALiteral) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: where(x > 0, x, -inf)\n  z: x * inf\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  const ir::Expr& y = output(r, "y");
  ASSERT_EQ(y->args().size(), 3u);
  EXPECT_TRUE(y->args()[2]->isConstant());
  EXPECT_EQ(ir::evaluate(y->args()[2], ir::Env{}), -std::numeric_limits<double>::infinity());
  const ir::Expr& z = output(r, "z");
  ASSERT_EQ(z->args().size(), 2u);
  EXPECT_EQ(z->args()[1]->kind(), ir::NodeKind::Const);
  EXPECT_EQ(z->args()[1]->value(), std::numeric_limits<double>::infinity());
}

TEST(Sema, UnknownNameWithDidYouMeanNote) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n  bias: [D]\n", "  y: x + bais\n"));
  EXPECT_TRUE(r.specLoaded);
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_TRUE(contains(r.messages, "t.yaml:6:10: error: unknown name 'bais'\n")) << r.messages;
  EXPECT_TRUE(contains(r.messages, "t.yaml:6:10: note: did you mean 'bias'?\n")) << r.messages;
}

TEST(Sema, UnknownNameWithoutCloseMatchHasNoNote) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: x + zzzzzz\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_TRUE(contains(r.messages, "error: unknown name 'zzzzzz'\n")) << r.messages;
  EXPECT_FALSE(contains(r.messages, "did you mean")) << r.messages;
}

TEST(Sema, FunctionNameUsedAsValue) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: x * gelu\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_TRUE(contains(
      r.messages,
      "t.yaml:5:10: error: unknown name 'gelu'; 'gelu' is a function, call it as gelu(...)\n"))
      << r.messages;
}

TEST(Sema, UnknownFunctionWithNote) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: sigmiod(x)\n"));
  EXPECT_TRUE(r.specLoaded);
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_TRUE(contains(r.messages, "t.yaml:5:6: error: unknown function 'sigmiod'\n"))
      << r.messages;
  EXPECT_TRUE(contains(r.messages, "t.yaml:5:6: note: did you mean 'sigmoid'?\n")) << r.messages;
}

TEST(Sema, ArityError) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: tanh(x, x)\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_TRUE(contains(r.messages,
                       "t.yaml:5:6: error: 'tanh' takes 1 argument, got 2; signature is tanh(x)\n"))
      << r.messages;
  r = lowerSpec(spec("  x: [..., D]\n", "  y: where(x > 0, x)\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_TRUE(contains(r.messages, "error: 'where' takes 3 arguments, got 2; signature is "
                                   "where(cond: bool, a, b)\n"))
      << r.messages;
}

TEST(Sema, ArityErrorListsEveryOverload) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: max(x, x, x)\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_TRUE(contains(r.messages, "t.yaml:5:6: error: 'max' takes 1 or 2 arguments, got 3; "
                                   "signatures are max(x), max(a, b)\n"))
      << r.messages;
}

TEST(Sema, ConditionUsedAsValue) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: (x > 0) * x\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  // Reported at the comparison operator, the location of the offending argument.
  EXPECT_TRUE(contains(r.messages, "t.yaml:5:9: error: a condition cannot be used as a value "
                                   "(argument 'a' of operator '*'); use where(cond, a, b)\n"))
      << r.messages;
  r = lowerSpec(spec("  x: [..., D]\n", "  y: exp(x < 1)\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_TRUE(contains(r.messages, "error: a condition cannot be used as a value (argument 'x' "
                                   "of 'exp'); use where(cond, a, b)\n"))
      << r.messages;
}

TEST(Sema, NonConditionGivenToWhere) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: where(x, x, 0)\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_TRUE(contains(r.messages, "t.yaml:5:12: error: argument 'cond' of 'where' must be a "
                                   "condition (a comparison such as x > 0)\n"))
      << r.messages;
}

TEST(Sema, ConstParameterGivenATensor) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: pow(x, x + 1)\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_TRUE(contains(r.messages, "t.yaml:5:15: error: argument 'p' of 'pow' must be a constant "
                                   "or an attr, not a tensor expression\n"))
      << r.messages;
}

TEST(Sema, OutputThatIsACondition) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: x > 0\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_TRUE(contains(
      r.messages,
      "t.yaml:5:6: error: output 'y' is a condition; outputs must be values (use where())\n"))
      << r.messages;
}

TEST(Sema, OutputThatDependsOnNoInput) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: x\n  z: exp(2) * 3\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_TRUE(
      contains(r.messages, "t.yaml:6:6: error: output 'z' does not depend on any input tensor\n"))
      << r.messages;
}

TEST(Sema, OutputWithColumnOrScalarShape) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n  b: [D]\n", "  y: x * b\n  z: b * 2\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_TRUE(contains(r.messages, "t.yaml:7:6: error: output 'z' has shape [D]; outputs must "
                                   "be [..., D], per-row [...], [D] through a reduction over "
                                   "rows (colsum, colmean) or [] through a whole-tensor "
                                   "reduction (sum_all, max_all, min_all)\n"))
      << r.messages;
  r = lowerSpec(spec("  x: [..., D]\n  s: []\n", "  y: x * s\n  z: s + 1\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_TRUE(contains(r.messages, "error: output 'z' has shape []; outputs must be [..., D], "
                                   "per-row [...], [D] through a reduction over rows (colsum, "
                                   "colmean) or [] through a whole-tensor reduction (sum_all, "
                                   "max_all, min_all)\n"))
      << r.messages;
}

TEST(Sema, PerRowOutputIsAllowed) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n  r: [...]\n", "  y: x * r\n  z: r * r\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  EXPECT_EQ(output(r, "z")->shape(), ShapeClass::Row);
}

TEST(Sema, UnusedInput) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n  unused: [..., D]\n", "  y: x * 2\n"));
  EXPECT_TRUE(r.specLoaded);
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_TRUE(contains(r.messages, "t.yaml:4:3: error: input 'unused' is not used by any output\n"))
      << r.messages;
}

TEST(Sema, InputUsedOnlyByAnUnusedLetIsUnused) {
  Lowered r =
      lowerSpec(spec("  x: [..., D]\n  w: [..., D]\n", "  y: x * 2\n", "let:\n  t: w * 3\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_TRUE(contains(r.messages, "error: input 'w' is not used by any output\n")) << r.messages;
}

TEST(Sema, UnusedLetIsOnlyAWarning) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: x * 2\n", "let:\n  t: x * 3\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  EXPECT_EQ(r.errors, 0);
  EXPECT_TRUE(contains(r.messages, "t.yaml:5:3: warning: let 't' is not used by any output\n"))
      << r.messages;
}

TEST(Sema, LetsAreSharedNodes) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: t * t\n  z: t + 1\n", "let:\n  t: exp(x)\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  const ir::Expr& y = output(r, "y");
  const ir::Expr& z = output(r, "z");
  ASSERT_TRUE(y->isCall("mul"));
  ASSERT_TRUE(z->isCall("add"));
  EXPECT_EQ(y->args()[0].get(), y->args()[1].get());
  EXPECT_EQ(y->args()[0].get(), z->args()[0].get());
  EXPECT_TRUE(y->args()[0]->isCall("exp"));
}

// A name and a call are told apart by the parentheses: inputs, attrs, lets and outputs may be
// named like primitives (torch.native_layer_norm returns `mean` and `rstd`).
TEST(Sema, NamesLikePrimitivesAreNamesAndCallsAreCalls) {
  Lowered r = lowerSpec(spec("  exp: [..., D]\n  max: []\n",
                             "  mean: mean(exp)\n"
                             "  relu: exp(exp) * max(sum, max)\n",
                             "attrs:\n  sum: {type: float, default: 0.5}\n"
                             "let:\n  min: min(exp, max)\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  EXPECT_EQ(r.errors, 0);
  const ir::Expr& mean = output(r, "mean");
  ASSERT_TRUE(mean->isCall("mean"));
  EXPECT_EQ(mean->args()[0]->kind(), ir::NodeKind::Input);
  EXPECT_EQ(mean->args()[0]->name(), "exp");
  const ir::Expr& relu = output(r, "relu");
  ASSERT_TRUE(relu->isCall("mul"));
  ASSERT_TRUE(relu->args()[0]->isCall("exp"));
  EXPECT_EQ(relu->args()[0]->args()[0]->name(), "exp");
  ASSERT_TRUE(relu->args()[1]->isCall("max"));
  EXPECT_EQ(relu->args()[1]->args()[0]->kind(), ir::NodeKind::Attr);
  EXPECT_EQ(relu->args()[1]->args()[1]->name(), "max");
  // A primitive's name without parentheses is still not a value when nothing is named so.
  r = lowerSpec(spec("  x: [..., D]\n", "  y: x * sigmoid\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_TRUE(contains(r.messages, "error: unknown name 'sigmoid'; 'sigmoid' is a function, "
                                   "call it as sigmoid(...)\n"))
      << r.messages;
}

// Names the generated code prints verbatim next to its own: keywords of Python and C++,
// C macros, and the generated code's names are reserved, and say so.
TEST(Sema, NamesTheGeneratedCodeUsesAreReserved) {
  struct Case {
    const char* name;
    const char* what;
  } cases[] = {{"new", "input"},   {"with", "input"},  {"kFast", "input"},
               {"kPass", "input"}, {"SPEC", "input"},  {"tuple", "input"},
               {"NAN", "input"},   {"errno", "input"}, {"static", "input"}};
  for (const Case& c : cases) {
    Lowered r = lowerSpec(spec(std::string("  x: [..., D]\n  ") + c.name + ": [..., D]\n",
                               std::string("  y: x * ") + c.name + "\n"));
    EXPECT_FALSE(r.fn) << c.name;
    EXPECT_TRUE(contains(r.messages, std::string("t.yaml:4:3: error: ") + c.what + " name '" +
                                         c.name + "' is reserved\n"))
        << r.messages;
  }
  // Names the generated C++ uses for its own declarations are qualified there, so free.
  Lowered r = lowerSpec(spec("  out: [..., D]\n  Forward: [D]\n  grads: []\n  S: [...]\n",
                             "  Op: out * Forward * grads * S\n"));
  EXPECT_TRUE(r.fn) << r.messages;
}

TEST(Sema, AttrsAreUsableAsConstParameters) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: pow(x, p) + leaky_relu(x, slope * 2)\n",
                             "attrs:\n  p: {type: float, default: 2.5}\n"
                             "  slope: {type: float, default: 0.01}\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  EXPECT_EQ(r.errors, 0);
  ASSERT_EQ(r.fn->attrs.size(), 2u);
  EXPECT_EQ(r.fn->attrs[0].attr.name, "p");
  EXPECT_TRUE(r.fn->attrs[0].attr.hasDefault);
  EXPECT_EQ(r.fn->attrs[0].attr.defaultValue, 2.5);
  const ir::Expr& y = output(r, "y");
  ASSERT_TRUE(y->isCall("add"));
  const ir::Expr& powNode = y->args()[0];
  ASSERT_TRUE(powNode->isCall("pow"));
  EXPECT_EQ(powNode->args()[1]->kind(), ir::NodeKind::Attr);
  EXPECT_EQ(powNode->args()[1]->name(), "p");
  EXPECT_EQ(powNode->args()[1].get(), r.fn->attrs[0].node.get());
  EXPECT_TRUE(powNode->args()[1]->isConstant());
  EXPECT_EQ(powNode->args()[1]->shape(), ShapeClass::Scalar);
  const ir::Expr& leaky = y->args()[1];
  ASSERT_TRUE(leaky->isCall("leaky_relu"));
  EXPECT_TRUE(leaky->args()[1]->isCall("mul"));
  EXPECT_TRUE(leaky->args()[1]->isConstant());
}

TEST(Sema, ReductionsGiveOnePerRowValue) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: x - max(x)\n  z: mean(x * x)\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  const ir::Expr& y = output(r, "y");
  EXPECT_EQ(y->shape(), ShapeClass::Full);
  ASSERT_TRUE(y->args()[1]->isCall("max"));
  EXPECT_EQ(y->args()[1]->prim()->kind, prims::PrimKind::Reduction);
  EXPECT_EQ(y->args()[1]->shape(), ShapeClass::Row);
  EXPECT_EQ(output(r, "z")->shape(), ShapeClass::Row);
  // The two-argument max is the elementwise overload.
  r = lowerSpec(spec("  x: [..., D]\n  b: [D]\n", "  y: max(x, b)\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  EXPECT_EQ(output(r, "y")->prim()->kind, prims::PrimKind::Elementwise);
  EXPECT_EQ(output(r, "y")->shape(), ShapeClass::Full);
}

TEST(Sema, ReductionOfAPerRowValue) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: x * sum(sum(x))\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_TRUE(contains(r.messages, "t.yaml:5:14: error: 'sum' reduces over the last dim, but its "
                                   "argument has shape [...] (one value per row: sum_all, "
                                   "max_all and min_all combine those over the whole tensor, "
                                   "for a [] output)\n"))
      << r.messages;
}

// A bool attr where a condition is expected is the condition attr != 0; elsewhere a number.
TEST(Sema, BoolAttrIsAConditionInWhere) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: where(flag, x, -x) + flag\n",
                             "attrs:\n  flag: {type: bool, default: false}\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  const ir::Expr& y = output(r, "y");
  ASSERT_TRUE(y->isCall("add"));
  const ir::Expr& w = y->args()[0];
  ASSERT_TRUE(w->isCall("where"));
  EXPECT_TRUE(w->args()[0]->isCall("ne"));
  EXPECT_EQ(w->args()[0]->args()[0]->kind(), ir::NodeKind::Attr);
  EXPECT_EQ(y->args()[1]->kind(), ir::NodeKind::Attr); // (a number in a value)
  // A float attr is not a condition.
  Lowered f = lowerSpec(spec("  x: [..., D]\n", "  y: where(scale, x, -x)\n",
                             "attrs:\n  scale: {type: float, default: 1.0}\n"));
  EXPECT_FALSE(f.fn);
  EXPECT_TRUE(contains(f.messages, "must be a condition"));
}

// A let whose formula fails is reported once: its users report nothing more of it.
TEST(Sema, FailedLetReportedOnce) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: z + exp(z)\n", "let:\n  z: gelu2(x)\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 1);
  EXPECT_FALSE(contains(r.messages, "unknown name"));
}

TEST(Sema, DimIsAConstantScalar) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: x / D\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  const ir::Expr& d = output(r, "y")->args()[1];
  EXPECT_EQ(d->kind(), ir::NodeKind::Dim);
  EXPECT_TRUE(d->isConstant());
  EXPECT_EQ(d->shape(), ShapeClass::Scalar);
}

// An attr may omit its default (it is then a required argument of the op).
TEST(Sema, AttrWithoutDefault) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: x * k\n", "attrs:\n  k: {type: float}\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  ASSERT_EQ(r.fn->attrs.size(), 1u);
  EXPECT_FALSE(r.fn->attrs[0].attr.hasDefault);
}

TEST(Sema, ErrorsInSeveralOutputsAreAllReported) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: foo(x)\n  z: x + q\n"));
  EXPECT_FALSE(r.fn);
  EXPECT_EQ(r.errors, 2);
  EXPECT_TRUE(contains(r.messages, "error: unknown function 'foo'")) << r.messages;
  EXPECT_TRUE(contains(r.messages, "error: unknown name 'q'")) << r.messages;
}

TEST(Sema, SyntaxErrorInFormulaIsReportedAtItsColumn) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n", "  y: \"x + $\"\n"));
  EXPECT_FALSE(r.fn);
  // The formula is quoted: its first character is after the quote, at column 7.
  EXPECT_TRUE(contains(r.messages, "t.yaml:5:11: error: unexpected character '$' in formula\n"))
      << r.messages;
}

TEST(Sema, ValidSpecLowersToTheExpectedDag) {
  Lowered r = lowerSpec(spec("  x: [..., D]\n  bias: [D]\n", "  y: gelu_tanh(x + bias)\n"));
  ASSERT_TRUE(r.fn) << r.messages;
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.messages, "");
  EXPECT_EQ(r.fn->name, "t");
  EXPECT_EQ(ir::printDag({{"y", r.fn->outputs[0].value}}),
            "%0 = add(x, bias)  [..., D]\n%1 = gelu_tanh(%0)  [..., D]\ny = %1\n");
}

// ---- [] inputs next to reductions: the row plan sums their gradients ----

const plan::Program::Output& backwardOutput(const Planned& p, const std::string& name) {
  for (const plan::Program::Output& o : p.plan->backward.outputs)
    if (o.name == name) return o;
  throw std::runtime_error("no backward output " + name);
}

TEST(Plan, ScalarInputsOfRowPlansAreReadPerRowAndTheirGradientsSummed) {
  using TotalOf = plan::Program::TotalOf;
  // w scales elements, e sits in a per-row value, s inside a reduction's argument.
  Planned p = planSpec(spec("  x: [..., D]\n  w: []\n  e: []\n  s: []\n",
                            "  y: w * x * rsqrt(mean(x * x + s) + e * e)\n"));
  ASSERT_TRUE(p.plan) << p.messages;
  EXPECT_EQ(p.plan->forward.plan, plan::RuntimePlan::Row);
  for (const char* name : {"grad_w", "grad_e", "grad_s"})
    EXPECT_EQ(backwardOutput(p, name).kind, plan::OutKind::Total) << name;
  EXPECT_EQ(backwardOutput(p, "grad_w").totalOf, TotalOf::Elements);
  EXPECT_EQ(backwardOutput(p, "grad_e").totalOf, TotalOf::Rows);
  // s's adjoint is mean's grad / D, one value per row standing for each element.
  EXPECT_EQ(backwardOutput(p, "grad_s").totalOf, TotalOf::RowsTimesD);
  // The [] inputs are per-row values of the forward (read once, by rowPre).
  int scalars = 0;
  for (size_t i = 0; i < p.plan->forward.rowValues.size(); ++i)
    if (p.plan->forward.rowValues[i]->kind() == ir::NodeKind::Input) {
      EXPECT_EQ(p.plan->forward.rowValueStage[i], -1);
      ++scalars;
    }
  EXPECT_EQ(scalars, 3);
}

// A [] input used per element and per row: reverse mode sums the per-element part of its
// adjoint over the row (autodiff/ReverseMode.cpp), so its gradient is a sum over the rows of
// a per-row value, not over the elements (which would count the per-row part D times).
TEST(Plan, ScalarInputUsedPerElementAndPerRowSumsAPerRowAdjoint) {
  Planned p = planSpec(spec("  x: [..., D]\n  w: []\n", "  y: x * w - mean(x) * w\n"));
  ASSERT_TRUE(p.plan) << p.messages;
  const plan::Program::Output& g = p.plan->backward.outputs[1];
  EXPECT_EQ(g.name, "grad_w");
  EXPECT_EQ(g.kind, plan::OutKind::Total);
  EXPECT_EQ(g.totalOf, plan::Program::TotalOf::Rows);
  ASSERT_TRUE(g.value);
  EXPECT_EQ(g.value->shape(), ir::ShapeClass::Row);
}

// A with_grad is as wide as its arguments, its value broadcast (docs/spec-language.md): the
// plan keeps that class once the stated derivatives are dropped, not the value's.
TEST(Plan, WithGradKeepsTheClassOfItsArgumentsWithoutItsDerivatives) {
  Planned p = planSpec(spec("  x: [..., D]\n  r: [...]\n  b: [D]\n",
                            "  y0: x * sum(x)\n  y1: with_grad(10, r, x)\n"
                            "  y2: with_grad(sum(x), r, x)\n  y3: with_grad(2, r, b)\n"
                            "  y4: sum(with_grad(3, r, exp(b)) * x)\n"));
  ASSERT_TRUE(p.plan) << p.messages;
  for (const plan::Program::Output& o : p.plan->forward.outputs) {
    if (o.name[0] == '_') continue; // saved values
    EXPECT_EQ(o.kind, o.name == "y4" ? plan::OutKind::Row : plan::OutKind::Full) << o.name;
    // The stated derivatives are not computed: no exp of b is left in the forward.
    for (const ir::Node* n : ir::topoOrder({o.value}))
      EXPECT_FALSE(n->isCall("exp")) << o.name;
  }
}

// The backward's derived argument names (incoming gradients, saved per-row values) begin
// with '_', which spec names cannot: an input grad_y next to an output y, or saved_m next to a
// saved let m, are arguments of their own.
TEST(Plan, DerivedArgumentNamesDoNotClashWithTheSpecs) {
  Planned p =
      planSpec("op: t\ninputs:\n  x: [..., D]\n  grad_y: [..., D]\n  saved_m: [...]\n"
               "let:\n  m: rsqrt(mean(x * x) + 1)\noutputs:\n  y: x * m * saved_m + grad_y\n");
  ASSERT_TRUE(p.plan) << p.messages;
  std::set<std::string> names;
  for (const plan::Program::Input& in : p.plan->backward.inputs)
    EXPECT_TRUE(names.insert(in.name).second) << "two backward arguments named " << in.name;
  EXPECT_TRUE(names.count("_grad_y") && names.count("_saved_m") && names.count("saved_m") &&
              names.count("grad_y"));
}

// The planner recognizes the forward's per-row values in the backward by node identity, so
// the backward must refer to the forward's nodes as they are: neither a copy that the
// simplifier rewrote (exp(0) * x folded to x) nor one that still holds the with_grad the
// forward has dropped. Else it recomputes each of them, a pass more per level of nesting.
TEST(Plan, BackwardReadsTheForwardsPerRowValuesBackWhateverTheSimplifierDoes) {
  for (const char* formula :
       {"x * max(exp(0) * x * max(exp(0) * x * max(exp(0) * x)))",
        "x * mean(tanh(with_grad(x, x, 1) * max(with_grad(x, x, 1) * max(with_grad(x, x, 1) * "
        "max(with_grad(x, x, 1))))))"}) {
    Planned p = planSpec(spec("  x: [..., D]\n", std::string("  y: ") + formula + "\n"));
    ASSERT_TRUE(p.plan) << formula << "\n" << p.messages;
    EXPECT_EQ(p.plan->saved.size(), p.plan->forward.stages.size()) << formula;
    EXPECT_LE(p.plan->backward.stages.size(), p.plan->forward.stages.size()) << formula;
    for (const plan::Program::Stage& st : p.plan->backward.stages)
      for (const ir::Expr& r : st.reductions)
        EXPECT_EQ(r->prim()->name, "sum")
            << formula << ": the backward recomputes a " << r->prim()->name;
  }
}

// ---- online max-and-sum: which passes are shifted by the maxima before them ----

std::vector<int> forwardShifts(const std::string& outputs, const std::string& lets = "") {
  const bool w = outputs.find('w') != std::string::npos;
  Planned p = planSpec(spec(w ? "  x: [..., D]\n  w: [D]\n" : "  x: [..., D]\n", outputs, lets));
  if (!p.plan) throw std::runtime_error("planning failed:\n" + p.messages);
  const std::vector<plan::Program::Stage>& stages = p.plan->forward.stages;
  return stages.size() == 2 ? stages[1].shift : std::vector<int>{};
}

TEST(Plan, SumsOfExpAgainstTheMaximumAreShifted) {
  const std::string m = "let:\n  m: detach(max(x))\n";
  // softmax's and logsumexp's sums, a factor free of the maximum, and several sums.
  EXPECT_EQ(forwardShifts("  y: exp(x - m) / sum(exp(x - m))\n", m), std::vector<int>{0});
  EXPECT_EQ(forwardShifts("  y: m + log(sum(exp(x - m)))\n", m), std::vector<int>{0});
  EXPECT_EQ(forwardShifts("  y: x * sum(w * x * exp(x - m))\n", m), std::vector<int>{0});
  EXPECT_EQ(forwardShifts("  y: x * sum(exp(x - m)) + sum(w * exp(x - m))\n", m),
            (std::vector<int>{0, 0}));
  // Sums, differences and quotients of values shifted by the same maximum.
  EXPECT_EQ(forwardShifts("  y: x * sum(exp(x - m) * w - exp(x - m) / (x * x + 1))\n", m),
            std::vector<int>{0});
}

TEST(Plan, OtherSumsAfterAMaximumAreNotShifted) {
  const std::string m = "let:\n  m: detach(max(x))\n";
  // The maximum elsewhere in the term, a shift by another value than the one maximized, a
  // sum not of exp, and one sum of two that is not shifted: no pass is.
  for (const char* out : {"  y: x * sum(m * exp(x - m))\n", "  y: x * sum(exp(w * x - m))\n",
                          "  y: x * sum(exp(x - 2 * m))\n", "  y: x * sum(x - m)\n",
                          "  y: x * sum(exp(x - m)) + sum(x - m)\n",
                          "  y: x * sum(exp(x - m) + x)\n", "  y: x * sum(x / exp(x - m))\n"})
    for (int shift : forwardShifts(out, m))
      EXPECT_EQ(shift, -1) << out;
  // A mean before the sum: no maxima, nothing shifted.
  for (int shift : forwardShifts("  y: x * sum(exp(x - mean(x)))\n"))
    EXPECT_EQ(shift, -1);
}

// ---- reductions guarded by a uniform condition (skipped when their branch is not taken) ----

// Per reduction of the forward's first pass: 1 guarded when its condition holds, -1 when it
// fails, 0 not guarded.
std::vector<int> forwardGuards(const std::string& outputs) {
  Planned p =
      planSpec(spec("  x: [..., D]\n", outputs, "attrs:\n  a: {type: float, default: 0.0}\n"));
  if (!p.plan) throw std::runtime_error("planning failed:\n" + p.messages);
  const plan::Program::Stage& stage = p.plan->forward.stages.at(0);
  std::vector<int> out;
  for (size_t j = 0; j < stage.reductions.size(); ++j)
    out.push_back(!stage.guard[j] ? 0 : stage.guardWhen[j] ? 1 : -1);
  return out;
}

TEST(Plan, ReductionsUsedOnlyUnderAUniformConditionAreGuarded) {
  // mean(x) is needed only when a > 0: its sum is skipped otherwise; max(x) always.
  EXPECT_EQ(forwardGuards("  y: max(x) + where(a > 0, a * mean(x), 0)\n"),
            (std::vector<int>{0, 1}));
  // In the other branch: needed when the condition fails.
  EXPECT_EQ(forwardGuards("  y: max(x) + where(a > 0, 0, mean(x))\n"), (std::vector<int>{0, -1}));
  // Used outside the where too, or under a condition per element: always computed.
  EXPECT_EQ(forwardGuards("  y: where(a > 0, mean(x), 0) + mean(x)\n"), (std::vector<int>{0}));
  EXPECT_EQ(forwardGuards("  y: where(x > 0, mean(x), 0)\n"), (std::vector<int>{0}));
  // An output is used by the caller, and a value saved for the backward by it: never guarded.
  EXPECT_EQ(forwardGuards("  y: where(a > 0, x + sum(x), x)\n  s: mean(x * x)\n"),
            (std::vector<int>{1, 0}));
  EXPECT_EQ(forwardGuards("  y: where(a > 0, x * sum(x), x)\n"), (std::vector<int>{0}));
}

// ---- sums of terms never below 0 (added plainly on the GPU) ----

// Program::Stage::plain of the forward's passes, in order.
std::vector<bool> forwardNonNegative(const std::string& outputs, const std::string& lets = "") {
  const bool w = std::regex_search(outputs + lets, std::regex("\\bw\\b")); // the [D] input
  Planned p = planSpec(spec(w ? "  x: [..., D]\n  w: [D]\n" : "  x: [..., D]\n", outputs, lets));
  if (!p.plan) throw std::runtime_error("planning failed:\n" + p.messages);
  std::vector<bool> all;
  for (const plan::Program::Stage& stage : p.plan->forward.stages)
    all.insert(all.end(), stage.plain.begin(), stage.plain.end());
  return all;
}

TEST(Plan, SumsOfSquaresAndExpAreNonNegative) {
  // rmsnorm's mean of squares, layernorm's of centered squares (x - mu twice: one value),
  // softmax's sum of exp (after its maximum, which is no sum), and products, quotients, sums
  // and selections of such values with literals and D.
  EXPECT_EQ(forwardNonNegative("  y: x * rsqrt(mean(x * x) + 1e-6)\n"), std::vector<bool>{true});
  EXPECT_EQ(
      forwardNonNegative("  y: xc * rsqrt(mean(xc * xc))\n", "let:\n  mu: mean(x)\n  xc: x - mu\n"),
      (std::vector<bool>{false, true}));
  EXPECT_EQ(
      forwardNonNegative("  y: exp(x - m) / sum(exp(x - m))\n", "let:\n  m: detach(max(x))\n"),
      (std::vector<bool>{false, true}));
  EXPECT_EQ(forwardNonNegative("  y: x * sum(2 * sigmoid(x) / (abs(x) + D) + where(x > 0, "
                               "relu(x), square(x)))\n"),
            std::vector<bool>{true});
}

TEST(Plan, SumsThatMayCancelAreNotNonNegative) {
  // A plain input, a difference, a product of two different values of unknown sign, a
  // negative literal, a [D] input, a product of a square and an unknown value, tanh.
  for (const char* out :
       {"  y: x * sum(x)\n", "  y: x * sum(exp(x) - 1)\n", "  y: x * sum(x * w)\n",
        "  y: x * sum(-2 * exp(x))\n", "  y: x * sum(w)\n", "  y: x * sum(x * x * w)\n",
        "  y: x * sum(tanh(x))\n"})
    EXPECT_EQ(forwardNonNegative(out), std::vector<bool>{false}) << out;
}

} // namespace
} // namespace fusegen::test
