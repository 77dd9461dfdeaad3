// Tests of reverse-mode AD (autodiff::differentiate) against central finite differences of
// the scalar interpreter (ir::evaluate). Every elementwise primitive in the real
// library gets its derivative rules checked at several points away from kinks and
// singularities, then whole specs check the chain rule and adjoint accumulation over shared
// subexpressions. Reductions (sum, mean, max, min) and per-row values are checked the same
// way over one row with RowInterpreter.h. A wrong rule here means every generated backward
// kernel using it is wrong, which no other test in the repo would notice.
#include "RowInterpreter.h"
#include "TestUtil.h"

#include "autodiff/ReverseMode.h"
#include "autodiff/SecondOrder.h"
#include "ir/Function.h"
#include "ir/Interpreter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace fusegen::test {
namespace {

using ir::Env;

constexpr double kTol = 1e-6;

// |a - b| <= kTol * (1 + |b|): relative for large values, absolute near zero.
::testing::AssertionResult close(double actual, double expected) {
  if (std::isfinite(actual) && std::isfinite(expected) &&
      std::fabs(actual - expected) <= kTol * (1 + std::fabs(expected)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << actual << ", expected " << expected << " (diff " << actual - expected << ")";
}

double evalOr0(const ir::Expr& e, const Env& env) {
  return e ? ir::evaluate(e, env) : 0.0; // a null gradient means "does not depend"
}

// Central difference of `f` in the input `name` (step relative to the value).
double finiteDifference(const ir::Expr& f, Env env, const std::string& name) {
  double x = env.inputs.at(name);
  double h = 1e-5 * std::max(1.0, std::fabs(x));
  env.inputs[name] = x + h;
  double up = ir::evaluate(f, env);
  env.inputs[name] = x - h;
  double down = ir::evaluate(f, env);
  return (up - down) / (2 * h);
}

// Checks every input gradient of a single-output function at the point `env`.
void checkGradients(const ir::Function& fn, const autodiff::Gradient& g, Env env) {
  ASSERT_EQ(fn.outputs.size(), 1u);
  ASSERT_EQ(g.inputGrads.size(), fn.inputs.size());
  env.gradOuts[fn.outputs[0].name] = 1.0;
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    const std::string& name = fn.inputs[i].name;
    double ad = evalOr0(g.inputGrads[i], env);
    double fd = finiteDifference(fn.outputs[0].value, env, name);
    EXPECT_TRUE(close(ad, fd)) << "d/d" << name;
  }
}

// How to exercise one primitive: the values its value parameters range over, and the
// values of its const parameters. The defaults avoid 0 (the kink of abs/relu/leaky_relu).
struct Domain {
  std::vector<double> values = {-2.3, -0.7, 0.4, 1.9};
  std::vector<double> consts = {};
};

std::map<std::string, Domain> domains() {
  const std::vector<double> positive = {0.4, 1.9, 0.7, 3.1};
  std::map<std::string, Domain> d;
  d["log"].values = positive;
  d["sqrt"].values = positive;
  d["rsqrt"].values = positive;
  d["log1p"].values = {-0.7, 0.4, 1.9, -0.3};
  // Non-integer and negative exponents need x > 0.
  d["pow"] = Domain{positive, {2.0, 3.0, -1.0, 0.5, 2.5, -1.5}};
  d["leaky_relu"].consts = {0.01, 0.2};
  d["dropout"].consts = {0.1, 0.7}; // kept and dropped at the interpreter's draw of 0.5
  return d;
}

// The function `y = prim(args...)` over inputs x0, x1, ...; a bool parameter gets the
// condition `c > 0` over an extra input c, a const parameter an attr p<i> or (when
// `constAsLiteral`) the literal `constValue`.
ir::Function applyOnInputs(const prims::Primitive& p, bool constAsLiteral, double constValue) {
  const prims::Primitive& gt = prim("gt", 2);
  ir::Function fn;
  fn.name = "t_" + p.name;
  std::vector<ir::Expr> args;
  for (size_t i = 0; i < p.params.size(); ++i) {
    switch (p.params[i].kind) {
    case prims::ParamKind::Value: {
      std::string name = "x" + std::to_string(i);
      ir::Expr in =
          ir::Node::makeInput(name, static_cast<int>(fn.inputs.size()), ir::ShapeClass::Full);
      fn.inputs.push_back({name, ir::ShapeClass::Full, in});
      args.push_back(in);
      break;
    }
    case prims::ParamKind::Bool: {
      ir::Expr c =
          ir::Node::makeInput("c", static_cast<int>(fn.inputs.size()), ir::ShapeClass::Full);
      fn.inputs.push_back({"c", ir::ShapeClass::Full, c});
      args.push_back(ir::Node::makeCall(&gt, {c, ir::Node::makeConst(0)}));
      break;
    }
    case prims::ParamKind::Const: {
      if (constAsLiteral) {
        args.push_back(ir::Node::makeConst(constValue));
      } else {
        std::string name = "p" + std::to_string(i);
        ir::Expr a = ir::Node::makeAttr(name, static_cast<int>(fn.attrs.size()));
        spec::Attr attr;
        attr.name = name;
        attr.type = spec::AttrType::Float;
        fn.attrs.push_back({attr, a});
        args.push_back(a);
      }
      break;
    }
    case prims::ParamKind::Random: // the interpreter draws 0.5 (ir::Env::random)
      args.push_back(ir::Node::makeRandom(static_cast<int>(i)));
      break;
    }
  }
  fn.outputs.push_back({"y", ir::Node::makeCall(&p, args)});
  return fn;
}

bool testable(const prims::Primitive& p) {
  // (Expansions are their formulas; moves read other columns: RowDerivatives tests both.)
  return p.kind == prims::PrimKind::Elementwise && !p.returnsBool && !p.declaresGradient &&
         !p.expand;
}

// A primitive whose every rule is the literal 0 (detach) stops the gradient on purpose:
// finite differences do not apply, its gradient must be exactly zero instead.
bool stopsGradient(const prims::Primitive& p) {
  bool any = false;
  for (size_t i = 0; i < p.params.size(); ++i) {
    if (p.params[i].kind != prims::ParamKind::Value) continue;
    const expr::AstPtr& rule = p.grads.at(i);
    if (!rule || rule->kind != expr::Ast::Kind::Number || rule->number != 0) return false;
    any = true;
  }
  return any;
}

TEST(Derivatives, EveryPrimitiveRuleMatchesFiniteDifferences) {
  const prims::PrimitiveLibrary& lib = library();
  std::map<std::string, Domain> special = domains();
  std::set<std::string> tested;
  for (const auto& pp : lib.all()) {
    const prims::Primitive& p = *pp;
    if (!testable(p)) continue;
    SCOPED_TRACE("primitive " + p.signature());
    Domain dom = special.count(p.name) ? special[p.name] : Domain{};
    bool hasConst = false;
    for (const prims::Param& param : p.params)
      hasConst |= param.kind == prims::ParamKind::Const;
    ASSERT_TRUE(!hasConst || !dom.consts.empty())
        << "give the const parameters of '" << p.name << "' values in domains()";
    std::vector<double> constValues = hasConst ? dom.consts : std::vector<double>{0.0};
    int checked = 0;
    for (double constValue : constValues) {
      for (bool asLiteral : {false, true}) {
        ir::Function fn = applyOnInputs(p, asLiteral, constValue);
        autodiff::Gradient g = gradientOf(fn);
        ASSERT_EQ(g.gradOuts.size(), 1u);
        EXPECT_EQ(g.gradOuts[0]->kind(), ir::NodeKind::GradOut);
        const size_t n = dom.values.size();
        for (size_t k = 0; k < n; ++k) {
          for (double cond : {1.0, -1.0}) {
            Env env;
            for (size_t i = 0; i < p.params.size(); ++i) {
              std::string pname = "p" + std::to_string(i);
              if (p.params[i].kind == prims::ParamKind::Value)
                env.inputs["x" + std::to_string(i)] = dom.values[(k + i) % n];
              else if (p.params[i].kind == prims::ParamKind::Const)
                env.attrs[pname] = constValue;
            }
            env.inputs["c"] = cond; // ignored unless there is a bool parameter
            std::string where;
            for (const auto& [name, v] : env.inputs)
              where += " " + name + "=" + std::to_string(v);
            SCOPED_TRACE("at" + where + " const=" + std::to_string(constValue) +
                         (asLiteral ? " (literal)" : " (attr)"));
            double y = ir::evaluate(fn.outputs[0].value, env);
            ASSERT_TRUE(std::isfinite(y)) << "choose a domain where the primitive is finite";
            if (stopsGradient(p)) {
              env.gradOuts["y"] = 1.0;
              for (const ir::Expr& gi : g.inputGrads)
                EXPECT_EQ(evalOr0(gi, env), 0.0);
            } else {
              checkGradients(fn, g, env);
            }
            ++checked;
          }
        }
      }
    }
    EXPECT_GE(checked, 8);
    tested.insert(p.name);
  }
  // Guard against the loop silently skipping primitives.
  for (const char* name :
       {"add",   "sub",     "mul",   "div",        "neg",   "where",    "exp",  "expm1",     "log",
        "log1p", "sqrt",    "rsqrt", "tanh",       "erf",   "abs",      "pow",  "square",    "min",
        "max",   "sigmoid", "relu",  "leaky_relu", "silu",  "softplus", "gelu", "gelu_tanh", "sin",
        "cos",   "floor",   "ceil",  "round",      "trunc", "sign",     "clamp"})
    EXPECT_TRUE(tested.count(name)) << name << " was not tested";
  size_t expected = 0;
  for (const auto& pp : lib.all())
    expected += testable(*pp);
  EXPECT_EQ(tested.size(), expected);
}

// The `sign` claims of primitives.yaml (prims::Sign), sampled: the planner trusts them to add
// sums plainly on the GPU (a wrong claim would sum cancelling terms without compensation).
// NonNegative over values of both signs; OfArgs and Product over values never below 0;
// Product also over two equal values of either sign. Signed zeros are not told apart (-0 is
// no sample: rsqrt(-0) is -inf).
TEST(Signs, EveryElementwiseClaimHoldsOnSamples) {
  const std::vector<double> any = {-40, -3, -1, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 3, 40};
  const std::vector<double> nonNegative = {0, 1e-3, 0.5, 1, 3, 40};
  std::set<std::string> claimed;
  for (const auto& pp : library().all()) {
    const prims::Primitive& p = *pp;
    if (p.sign == prims::Sign::Any || p.kind != prims::PrimKind::Elementwise) continue;
    SCOPED_TRACE("primitive " + p.signature());
    claimed.insert(p.name);
    const ir::Function fn = applyOnInputs(p, true, 0.0);
    const std::vector<double>& values = p.sign == prims::Sign::NonNegative ? any : nonNegative;
    const size_t n = values.size();
    auto check = [&](const std::function<double(size_t)>& valueOf) {
      for (double cond : {1.0, -1.0}) {
        Env env;
        for (size_t i = 0; i < p.params.size(); ++i)
          if (p.params[i].kind == prims::ParamKind::Value)
            env.inputs["x" + std::to_string(i)] = valueOf(i);
        env.inputs["c"] = cond;
        const double y = ir::evaluate(fn.outputs[0].value, env);
        EXPECT_TRUE(std::isnan(y) || y >= 0) << y << " at x0=" << env.inputs["x0"];
      }
    };
    for (size_t k = 0; k < n * n; ++k) // every pair of values for two parameters
      check([&](size_t i) { return values[(i % 2 ? k / n : k) % n]; });
    if (p.sign == prims::Sign::Product)
      for (double v : any)
        check([&](size_t) { return v; });
  }
  for (const char* name : {"add", "mul", "div", "where", "exp", "sqrt", "rsqrt", "abs", "square",
                           "min", "max", "sigmoid", "relu", "softplus", "detach"})
    EXPECT_TRUE(claimed.count(name)) << name << " lost its sign claim";
}

// The `zero` and `neg_inf` claims of primitives.yaml (prims::Zero, prims::NegInf), sampled: the
// liveness analysis trusts them to leave an element input unread where a factor multiplying
// it is 0 (a wrong claim would drop a value that reaches an output). Each claimed argument at
// its trigger value (0 or NaN; -inf or NaN), the others anything, infinities and NaN included:
// the value is 0 or NaN (-inf or NaN).
TEST(Vanishing, EveryZeroAndNegInfClaimHoldsOnSamples) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> any = {-inf, -40, -1, -1e-3, 0, 1e-3, 1, 40, inf, nan};
  std::set<std::string> claimed;
  for (const auto& pp : library().all()) {
    const prims::Primitive& p = *pp;
    if (p.kind != prims::PrimKind::Elementwise) continue;
    // (which claim, its trigger values, the arguments it is about, what the value must be)
    struct Claim {
      std::vector<double> triggers;
      std::vector<size_t> args;
      double value;
    };
    std::vector<Claim> claims;
    if (p.zero == prims::Zero::Product) {
      claims.push_back({{0.0, nan}, {0}, 0.0});
      claims.push_back({{0.0, nan}, {1}, 0.0});
    } else if (p.zero == prims::Zero::First) {
      claims.push_back({{0.0, nan}, {0}, 0.0});
    } else if (p.zero == prims::Zero::AtNegInf) {
      claims.push_back({{-inf, nan}, {0}, 0.0});
    }
    if (p.negInf == prims::NegInf::First || p.negInf == prims::NegInf::Any)
      claims.push_back({{-inf, nan}, {0}, -inf});
    if (p.negInf == prims::NegInf::Any) claims.push_back({{-inf, nan}, {1}, -inf});
    if (claims.empty()) continue;
    SCOPED_TRACE("primitive " + p.signature());
    claimed.insert(p.name);
    const ir::Function fn = applyOnInputs(p, true, 0.0);
    for (const Claim& claim : claims)
      for (double trigger : claim.triggers)
        for (double other : any) {
          Env env;
          for (size_t i = 0; i < p.params.size(); ++i)
            env.inputs["x" + std::to_string(i)] =
                std::find(claim.args.begin(), claim.args.end(), i) != claim.args.end() ? trigger
                                                                                       : other;
          const double y = ir::evaluate(fn.outputs[0].value, env);
          EXPECT_TRUE(std::isnan(y) || y == claim.value)
              << y << " with argument " << claim.args[0] << " = " << trigger << ", the other "
              << other;
        }
  }
  for (const char* name : {"add", "sub", "mul", "div", "neg", "exp"})
    EXPECT_TRUE(claimed.count(name)) << name << " lost its zero or neg_inf claim";
}

// Gradient values at the documented non-smooth points (where finite differences say
// nothing): ties of min/max split the gradient evenly, abs and relu have gradient 0 at 0.
TEST(Derivatives, ConventionsAtKinksAndTies) {
  struct Case {
    const char* prim;
    std::vector<double> args;
    std::vector<double> grads;
  } cases[] = {
      {"min", {1.5, 1.5}, {0.5, 0.5}},
      {"max", {-2.0, -2.0}, {0.5, 0.5}},
      {"min", {1.0, 2.0}, {1.0, 0.0}},
      {"max", {1.0, 2.0}, {0.0, 1.0}},
      {"abs", {0.0}, {0.0}},
      {"relu", {0.0}, {0.0}},
      {"abs", {-3.0}, {-1.0}},
      {"relu", {-3.0}, {0.0}},
      // clamp as torch.clamp: x at a bound keeps its gradient; lo > hi gives hi everywhere
      {"clamp", {0.0, 0.0, 1.0}, {1.0, 0.0, 0.0}},
      {"clamp", {1.0, 0.0, 1.0}, {1.0, 0.0, 0.0}},
      {"clamp", {-1.0, 0.0, 1.0}, {0.0, 1.0, 0.0}},
      {"clamp", {2.0, 0.0, 1.0}, {0.0, 0.0, 1.0}},
      {"clamp", {1.0, 1.5, 0.5}, {0.0, 0.0, 1.0}},
      {"clamp", {0.0, 1.0, 1.0}, {0.0, 0.0, 0.0}}, // lo == hi: torch.clamp's backward
      {"clamp", {1.0, 1.0, 1.0}, {1.0, 0.0, 0.0}},
      {"round", {2.5}, {0.0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.prim);
    ir::Function fn = applyOnInputs(prim(c.prim, c.args.size()), false, 0);
    autodiff::Gradient g = gradientOf(fn);
    Env env;
    for (size_t i = 0; i < c.args.size(); ++i)
      env.inputs["x" + std::to_string(i)] = c.args[i];
    env.gradOuts["y"] = 1.0;
    ASSERT_EQ(g.inputGrads.size(), c.grads.size());
    for (size_t i = 0; i < c.grads.size(); ++i)
      EXPECT_EQ(evalOr0(g.inputGrads[i], env), c.grads[i]) << "argument " << i;
  }
}

// Values where the rounding primitives, sign and clamp have conventions to keep (PyTorch's):
// halves round to even, sign is 0 for NaN, clamp keeps NaN and gives hi when lo > hi.
TEST(Derivatives, RoundingSignAndClampValuesAsPyTorch) {
  const double nan = std::nan("");
  struct Case {
    const char* prim;
    std::vector<double> args;
    double value;
  } cases[] = {
      {"round", {2.5}, 2.0},
      {"round", {3.5}, 4.0},
      {"round", {-2.5}, -2.0},
      {"round", {-0.7}, -1.0},
      {"floor", {-0.5}, -1.0},
      {"ceil", {-0.5}, 0.0},
      {"trunc", {-1.7}, -1.0},
      {"sign", {-3.0}, -1.0},
      {"sign", {0.0}, 0.0},
      {"sign", {nan}, 0.0},
      {"clamp", {5.0, 0.0, 1.0}, 1.0},
      {"clamp", {-5.0, 0.0, 1.0}, 0.0},
      {"clamp", {0.3, 1.5, 0.5}, 0.5},
      {"clamp", {0.3, 0.0, 1.0}, 0.3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.prim);
    ir::Function fn = applyOnInputs(prim(c.prim, c.args.size()), false, 0);
    Env env;
    for (size_t i = 0; i < c.args.size(); ++i)
      env.inputs["x" + std::to_string(i)] = c.args[i];
    EXPECT_EQ(ir::evaluate(fn.outputs[0].value, env), c.value);
  }
  ir::Function clamp = applyOnInputs(prim("clamp", 3), false, 0);
  for (int nanAt = 0; nanAt < 3; ++nanAt) {
    Env env;
    for (int i = 0; i < 3; ++i)
      env.inputs["x" + std::to_string(i)] = i == nanAt ? nan : i == 2 ? 1.0 : 0.0;
    EXPECT_TRUE(std::isnan(ir::evaluate(clamp.outputs[0].value, env))) << "NaN at " << nanAt;
  }
}

TEST(Derivatives, IncomingGradientScalesLinearly) {
  ir::Function fn = applyOnInputs(prim("tanh", 1), false, 0);
  autodiff::Gradient g = gradientOf(fn);
  Env env;
  env.inputs["x0"] = 0.3;
  env.gradOuts["y"] = 1.0;
  double unit = ir::evaluate(g.inputGrads[0], env);
  env.gradOuts["y"] = -2.5;
  EXPECT_TRUE(close(ir::evaluate(g.inputGrads[0], env), -2.5 * unit));
  EXPECT_TRUE(close(unit, 1 - std::tanh(0.3) * std::tanh(0.3)));
}

TEST(Derivatives, WhereConditionGetsNoGradient) {
  ir::Function fn = applyOnInputs(prim("where", 3), false, 0);
  autodiff::Gradient g = gradientOf(fn);
  ASSERT_EQ(fn.inputs.size(), 3u);
  EXPECT_EQ(fn.inputs[0].name, "c");
  EXPECT_EQ(g.inputGrads[0], nullptr);
  EXPECT_NE(g.inputGrads[1], nullptr);
  EXPECT_NE(g.inputGrads[2], nullptr);
}

TEST(Derivatives, DetachStopsTheGradient) {
  // y = x * detach(x): the value is x^2, the gradient only the non-detached x.
  Lowered r = lowerSpec("op: t\ninputs:\n  x: [..., D]\noutputs:\n  y: x * detach(x)\n");
  ASSERT_TRUE(r.fn) << r.messages;
  autodiff::Gradient g = gradientOf(*r.fn);
  Env env;
  env.inputs = {{"x", 1.5}};
  env.gradOuts = {{"y", 1.0}};
  EXPECT_EQ(ir::evaluate(r.fn->outputs[0].value, env), 2.25);
  ASSERT_TRUE(g.inputGrads[0]);
  EXPECT_EQ(ir::evaluate(g.inputGrads[0], env), 1.5);
}

TEST(Derivatives, WithGradUsesTheStatedDerivative) {
  // with_grad(x * x, x, 3 * x): the value is x^2, the gradient the stated 3x (not 2x), and
  // with_grad (and with_surrogate_grad) are the only primitives finite differences skip.
  Lowered r =
      lowerSpec("op: t\ninputs:\n  x: [..., D]\noutputs:\n  y: with_grad(x * x, x, 3 * x)\n");
  ASSERT_TRUE(r.fn) << r.messages;
  autodiff::Gradient g = gradientOf(*r.fn);
  Env env;
  env.inputs = {{"x", 2.0}};
  env.gradOuts = {{"y", 0.5}};
  EXPECT_EQ(ir::evaluate(r.fn->outputs[0].value, env), 4.0);
  ASSERT_TRUE(g.inputGrads[0]);
  EXPECT_EQ(ir::evaluate(g.inputGrads[0], env), 3.0);
  for (const auto& p : library().all()) {
    EXPECT_EQ(p->declaresGradient, p->name == "with_grad" || p->name == "with_surrogate_grad")
        << p->signature();
    EXPECT_EQ(p->surrogateGradient, p->name == "with_surrogate_grad") << p->signature();
  }
}

TEST(Derivatives, RuleThatDoesNotTypeCheckIsReported) {
  // A library whose rule for twice(x) passes the tensor x as pow's const exponent: the
  // library loads (rules are only name-checked), differentiation reports it.
  std::ostringstream libOut;
  int first = 0;
  auto lib = libraryWith("- name: twice(x)\n"
                         "  eval: x + x\n"
                         "  torch: \"(2 * {x})\"\n"
                         "  grad:\n"
                         "    x: pow(grad, x)\n",
                         first, libOut);
  ASSERT_TRUE(lib) << libOut.str();
  ir::Function fn;
  ir::Expr x = ir::Node::makeInput("x", 0, ir::ShapeClass::Full);
  fn.inputs.push_back({"x", ir::ShapeClass::Full, x});
  fn.outputs.push_back({"y", ir::Node::makeCall(lib->find("twice", 1), {x})});
  std::ostringstream out;
  Diagnostics diags(out);
  EXPECT_FALSE(autodiff::differentiate(fn, *lib, diags, SourceLoc{"s.yaml", 6, 6}));
  EXPECT_EQ(diags.errorCount(), 1);
  EXPECT_EQ(out.str(), "lib.yaml:" + std::to_string(first + 4) +
                           ":18: error: argument 'p' of 'pow' must be a constant or an "
                           "attr, not a tensor expression\n"
                           "s.yaml:6:6: note: in the derivative rule of 'twice(x)' for 'x', "
                           "differentiating this op\n");
}

// ---- second order: autodiff::differentiateBackward ----

// The derivatives of L = sum_k v_k * grad_k (v_k the cotangent of input k's gradient) in
// every input and in the output gradient, by the second-order DAG, against central finite
// differences of L evaluated from the first-order gradients.
void checkSecondOrder(const ir::Function& fn, const autodiff::Gradient& g,
                      const autodiff::SecondOrder& s, Env env) {
  ASSERT_TRUE(s.failure.empty()) << s.failure;
  env.gradOuts["y"] = 0.7;
  for (size_t k = 0; k < fn.inputs.size(); ++k)
    if (s.cotangents[k]) env.inputs[s.cotangents[k]->name()] = 0.3 + 0.4 * static_cast<double>(k);
  auto L = [&](const Env& e) {
    double sum = 0;
    for (size_t k = 0; k < fn.inputs.size(); ++k)
      if (s.cotangents[k])
        sum += e.inputs.at(s.cotangents[k]->name()) * evalOr0(g.inputGrads[k], e);
    return sum;
  };
  auto fd = [&](std::map<std::string, double> Env::*field, const std::string& name) {
    double x = (env.*field).at(name);
    double h = 1e-5 * std::max(1.0, std::fabs(x));
    Env up = env, down = env;
    (up.*field)[name] = x + h;
    (down.*field)[name] = x - h;
    return (L(up) - L(down)) / (2 * h);
  };
  for (size_t i = 0; i < fn.inputs.size(); ++i)
    EXPECT_TRUE(close(evalOr0(s.inputGrads[i], env), fd(&Env::inputs, fn.inputs[i].name)))
        << "d/d" << fn.inputs[i].name;
  EXPECT_TRUE(close(evalOr0(s.gradOutGrads[0], env), fd(&Env::gradOuts, "y"))) << "d/dgrad_y";
}

TEST(SecondOrder, EveryPrimitiveMatchesFiniteDifferencesOfItsGradient) {
  const prims::PrimitiveLibrary& lib = library();
  std::map<std::string, Domain> special = domains();
  int checked = 0;
  for (const auto& pp : lib.all()) {
    const prims::Primitive& p = *pp;
    if (!testable(p) || stopsGradient(p)) continue;
    SCOPED_TRACE("primitive " + p.signature());
    Domain dom = special.count(p.name) ? special[p.name] : Domain{};
    for (double constValue : dom.consts.empty() ? std::vector<double>{0.0} : dom.consts) {
      ir::Function fn = applyOnInputs(p, false, constValue);
      autodiff::Gradient g = gradientOf(fn);
      autodiff::SecondOrder s = autodiff::differentiateBackward(fn, g, lib, SourceLoc{});
      const size_t n = dom.values.size();
      for (size_t k = 0; k < n; ++k) {
        Env env;
        for (size_t i = 0; i < p.params.size(); ++i) {
          if (p.params[i].kind == prims::ParamKind::Value)
            env.inputs["x" + std::to_string(i)] = dom.values[(k + i) % n];
          else if (p.params[i].kind == prims::ParamKind::Const)
            env.attrs["p" + std::to_string(i)] = constValue;
        }
        env.inputs["c"] = k % 2 ? 1.0 : -1.0;
        SCOPED_TRACE("point " + std::to_string(k) + " const=" + std::to_string(constValue));
        checkSecondOrder(fn, g, s, env);
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 100);
}

TEST(SecondOrder, StatedDerivativeIsDifferentiatedByTheRules) {
  // with_grad(x * x, x, 3 * x * x): the second derivative is that of the stated 3x^2, 6x.
  Lowered r =
      lowerSpec("op: t\ninputs:\n  x: [..., D]\noutputs:\n  y: with_grad(x * x, x, 3 * x * x)\n");
  ASSERT_TRUE(r.fn) << r.messages;
  autodiff::Gradient g = gradientOf(*r.fn);
  autodiff::SecondOrder s = autodiff::differentiateBackward(*r.fn, g, library(), SourceLoc{});
  ASSERT_TRUE(s.failure.empty()) << s.failure;
  Env env;
  env.inputs = {{"x", 2.0}, {"_gg_x", 0.5}};
  env.gradOuts = {{"y", 0.25}};
  EXPECT_EQ(ir::evaluate(s.inputGrads[0], env), 0.5 * 0.25 * 6 * 2.0);
  EXPECT_EQ(ir::evaluate(s.gradOutGrads[0], env), 0.5 * 3 * 2.0 * 2.0);
}

TEST(SecondOrder, RuleThatDoesNotApplyToTheBackwardIsAFailure) {
  // sq(x)'s rule calls dsq(x), whose own rule is ill-typed (a tensor as pow's exponent): the
  // first derivative never differentiates dsq, the second must, and reports why instead.
  std::ostringstream libOut;
  int first = 0;
  auto lib = libraryWith("- name: sq(x)\n"
                         "  eval: x * x\n"
                         "  torch: \"({x} * {x})\"\n"
                         "  grad: {x: grad * dsq(x)}\n"
                         "- name: dsq(x)\n"
                         "  eval: x + x\n"
                         "  torch: \"(2 * {x})\"\n"
                         "  grad: {x: \"pow(grad, x)\"}\n",
                         first, libOut);
  ASSERT_TRUE(lib) << libOut.str();
  ir::Function fn;
  ir::Expr x = ir::Node::makeInput("x", 0, ir::ShapeClass::Full);
  fn.inputs.push_back({"x", ir::ShapeClass::Full, x});
  fn.outputs.push_back({"y", ir::Node::makeCall(lib->find("sq", 1), {x})});
  std::ostringstream out;
  Diagnostics diags(out);
  std::optional<autodiff::Gradient> g = autodiff::differentiate(fn, *lib, diags, SourceLoc{});
  ASSERT_TRUE(g) << out.str();
  autodiff::SecondOrder s = autodiff::differentiateBackward(fn, *g, *lib, SourceLoc{});
  EXPECT_EQ(s.failure, "lib.yaml:" + std::to_string(first + 7) +
                           ":24: error: argument 'p' of 'pow' must be a constant or an attr, "
                           "not a tensor expression");
  EXPECT_FALSE(s.inputGrads[0]);
}

// ---- whole specs: chain rule, broadcast inputs, shared subexpressions ----

struct Pipeline {
  ir::Function fn;
  autodiff::Gradient grad;
};

Pipeline build(const std::string& specText) {
  Lowered r = lowerSpec(specText);
  if (!r.fn) throw std::runtime_error("spec did not lower:\n" + r.messages);
  autodiff::Gradient g = gradientOf(*r.fn);
  return Pipeline{*r.fn, g};
}

// Checks all input gradients of a (possibly multi-output) function: with output weights w,
// the gradient of sum_k w_k y_k, by finite differences of that weighted sum.
void checkWeighted(const Pipeline& p, Env env, const std::map<std::string, double>& weights) {
  ASSERT_EQ(p.grad.inputGrads.size(), p.fn.inputs.size());
  env.gradOuts = weights;
  auto weighted = [&](const Env& e) {
    double s = 0;
    for (const ir::FunctionOutput& o : p.fn.outputs)
      s += weights.at(o.name) * ir::evaluate(o.value, e);
    return s;
  };
  for (size_t i = 0; i < p.fn.inputs.size(); ++i) {
    const std::string& name = p.fn.inputs[i].name;
    double x = env.inputs.at(name);
    double h = 1e-5 * std::max(1.0, std::fabs(x));
    Env up = env, down = env;
    up.inputs[name] = x + h;
    down.inputs[name] = x - h;
    double fd = (weighted(up) - weighted(down)) / (2 * h);
    double ad = evalOr0(p.grad.inputGrads[i], env);
    EXPECT_TRUE(close(ad, fd)) << "d/d" << name;
  }
}

TEST(Derivatives, CompositeWithBroadcastBias) {
  Pipeline p = build("op: t\ninputs:\n  x: [..., D]\n  bias: [D]\n"
                     "outputs:\n  y: x * sigmoid(x) + tanh(x * bias)\n");
  ASSERT_EQ(p.fn.inputs.size(), 2u);
  ASSERT_TRUE(p.grad.inputGrads[0]);
  ASSERT_TRUE(p.grad.inputGrads[1]);
  for (double x : {-2.3, -0.7, 0.4, 1.9})
    for (double b : {-1.1, 0.3, 2.0}) {
      SCOPED_TRACE("x=" + std::to_string(x) + " bias=" + std::to_string(b));
      Env env;
      env.inputs = {{"x", x}, {"bias", b}};
      checkWeighted(p, env, {{"y", 1.0}});
      // Closed form, independent of the interpreter's finite differences.
      env.gradOuts = {{"y", 1.0}};
      double s = 1 / (1 + std::exp(-x)), t = std::tanh(x * b);
      EXPECT_TRUE(
          close(ir::evaluate(p.grad.inputGrads[0], env), s + x * s * (1 - s) + (1 - t * t) * b));
      EXPECT_TRUE(close(ir::evaluate(p.grad.inputGrads[1], env), (1 - t * t) * x));
    }
}

TEST(Derivatives, NodeUsedTwiceAccumulatesItsAdjoint) {
  // x * x: both arguments of mul are the same node, d/dx = 2x.
  Pipeline p = build("op: t\ninputs:\n  x: [..., D]\noutputs:\n  y: x * x\n");
  Env env;
  env.inputs = {{"x", -1.7}};
  env.gradOuts = {{"y", 1.0}};
  EXPECT_TRUE(close(ir::evaluate(p.grad.inputGrads[0], env), -3.4));
  // A let used three times, with a second level of sharing below it.
  p = build("op: t\ninputs:\n  x: [..., D]\n  w: [..., D]\nlet:\n  u: tanh(x * w)\n"
            "outputs:\n  y: u * u + exp(u) - u / w\n");
  for (double x : {-1.3, 0.2, 0.9})
    for (double w : {-0.8, 1.6}) {
      SCOPED_TRACE("x=" + std::to_string(x) + " w=" + std::to_string(w));
      Env e;
      e.inputs = {{"x", x}, {"w", w}};
      checkWeighted(p, e, {{"y", 1.0}});
    }
}

TEST(Derivatives, SeveralOutputsSumTheirContributions) {
  Pipeline p = build("op: t\ninputs:\n  a: [..., D]\n  b: [..., D]\nlet:\n  m: a * b\n"
                     "outputs:\n  y: gelu(m) + a\n  z: softplus(m - b) * erf(a)\n");
  ASSERT_EQ(p.grad.gradOuts.size(), 2u);
  for (double a : {-0.9, 0.6})
    for (double b : {-1.4, 0.5, 2.2}) {
      SCOPED_TRACE("a=" + std::to_string(a) + " b=" + std::to_string(b));
      Env e;
      e.inputs = {{"a", a}, {"b", b}};
      checkWeighted(p, e, {{"y", 0.3}, {"z", -1.7}});
      checkWeighted(p, e, {{"y", 1.0}, {"z", 0.0}});
      checkWeighted(p, e, {{"y", 0.0}, {"z", 1.0}});
    }
}

TEST(Derivatives, AttrsWhereAndScalarInputs) {
  Pipeline p =
      build("op: t\ninputs:\n  x: [..., D]\n  q: [..., D]\n  s: []\n"
            "attrs:\n  slope: {type: float, default: 0.1}\n"
            "  k: {type: float, default: 1.5}\noutputs:\n"
            "  y: where(x > q, leaky_relu(x * s, slope), pow(x * x + 1, k)) / (q * q + 1)\n");
  for (double x : {-1.2, 0.35, 2.1})
    for (double q : {-0.5, 0.8})
      for (double k : {1.5, -0.5}) {
        SCOPED_TRACE("x=" + std::to_string(x) + " q=" + std::to_string(q) +
                     " k=" + std::to_string(k));
        Env e;
        e.inputs = {{"x", x}, {"q", q}, {"s", 0.7}};
        e.attrs = {{"slope", 0.1}, {"k", k}};
        checkWeighted(p, e, {{"y", 1.0}});
      }
}

// ---- reductions, through the row interpreter of RowInterpreter.h ----
//
// With one row, the gradient of a [..., D] or [D] input is per element, that of a per-row
// input is its single value, and a full-shaped adjoint of a [] input is summed over the row.

// Checks every input gradient of `p` over one row: with per-element output weights
// `weights` (a per-row output counts once), against finite differences of
// L = sum_outputs sum_elements weight * value.
void checkRow(const Pipeline& p, const RowEnv& point,
              const std::map<std::string, std::vector<double>>& weights) {
  ASSERT_EQ(p.grad.inputGrads.size(), p.fn.inputs.size());
  RowEnv env = point;
  env.gradOuts = weights;
  auto loss = [&](const RowEnv& e) {
    double s = 0;
    for (const ir::FunctionOutput& o : p.fn.outputs) {
      std::vector<double> y = evalRow(o.value, e);
      const std::vector<double>& w = weights.at(o.name);
      if (o.value->shape() == ir::ShapeClass::Row)
        s += w[0] * y[0];
      else
        for (size_t j = 0; j < y.size(); ++j)
          s += w[j] * y[j];
    }
    return s;
  };
  for (size_t i = 0; i < p.fn.inputs.size(); ++i) {
    const ir::FunctionInput& in = p.fn.inputs[i];
    const ir::Expr& g = p.grad.inputGrads[i];
    std::vector<double> ad(static_cast<size_t>(env.D), 0.0);
    if (g) ad = evalRow(g, env);
    const bool perRow = in.shape == ir::ShapeClass::Row || in.shape == ir::ShapeClass::Scalar;
    if (in.shape == ir::ShapeClass::Row && g) {
      EXPECT_EQ(g->shape(), ir::ShapeClass::Row) << "the adjoint of a per-row input is per-row";
    }
    for (size_t j = 0; j < (perRow ? 1 : ad.size()); ++j) {
      double x = env.inputs.at(in.name)[j];
      double h = 1e-5 * std::max(1.0, std::fabs(x));
      RowEnv up = env, down = env;
      if (perRow) {
        up.inputs[in.name].assign(ad.size(), x + h);
        down.inputs[in.name].assign(ad.size(), x - h);
      } else {
        up.inputs[in.name][j] = x + h;
        down.inputs[in.name][j] = x - h;
      }
      double fd = (loss(up) - loss(down)) / (2 * h);
      double a = ad[j];
      if (in.shape == ir::ShapeClass::Scalar && g && g->shape() != ir::ShapeClass::Row) {
        a = 0;
        for (double e : ad)
          a += e;
      }
      EXPECT_TRUE(close(a, fd)) << "d/d" << in.name << "[" << j << "]";
    }
  }
}

RowEnv rowPoint(const std::map<std::string, std::vector<double>>& inputs) {
  RowEnv e;
  e.D = static_cast<int>(inputs.begin()->second.size());
  for (const auto& [name, values] : inputs)
    e.inputs[name] = values.size() == 1 ? std::vector<double>(e.D, values[0]) : values;
  return e;
}

const std::vector<double> kWeights = {0.7, -1.3, 0.4, 2.1, -0.6};

TEST(RowDerivatives, EveryReductionRuleMatchesFiniteDifferences) {
  std::set<std::string> tested;
  for (const auto& pp : library().all()) {
    const prims::Primitive& p = *pp;
    if (p.kind != prims::PrimKind::Reduction) continue;
    SCOPED_TRACE("reduction " + p.signature());
    ASSERT_EQ(p.params.size(), 1u);
    ir::Function fn;
    fn.name = "t_" + p.name;
    ir::Expr x = ir::Node::makeInput("x", 0, ir::ShapeClass::Full);
    fn.inputs.push_back({"x", ir::ShapeClass::Full, x});
    // y = r(x) per row, and z = x * r(x * x) elementwise: the rule alone and in a chain.
    fn.outputs.push_back({"y", ir::Node::makeCall(&p, {x})});
    const prims::Primitive& mul = prim("mul", 2);
    fn.outputs.push_back(
        {"z", ir::Node::makeCall(&mul,
                                 {x, ir::Node::makeCall(&p, {ir::Node::makeCall(&mul, {x, x})})})});
    EXPECT_EQ(fn.outputs[0].value->shape(), ir::ShapeClass::Row);
    Pipeline pl{fn, gradientOf(fn)};
    // Distinct values with a unique maximum and minimum (of x and of x * x).
    for (const auto& row : {std::vector<double>{0.3, -1.2, 2.2, 0.9, -0.4},
                            std::vector<double>{-2.5, 0.1, 1.7, -0.6, 1.2}}) {
      checkRow(pl, rowPoint({{"x", row}}), {{"y", std::vector<double>(5, 1.3)}, {"z", kWeights}});
    }
    tested.insert(p.name);
  }
  for (const char* name : {"sum", "mean", "max", "min"})
    EXPECT_TRUE(tested.count(name)) << name << " was not tested";
}

// Every move and every primitive expanded from a formula (rotate_half over swap_halves): the
// derived gradient of y = f(x) and of z = x * f(x * x) over a row (D even), against finite
// differences of the row interpreter, which moves columns independently of the pushing pass.
TEST(RowDerivatives, EveryMoveAndExpansionMatchesFiniteDifferences) {
  std::set<std::string> tested;
  for (const auto& pp : library().all()) {
    const prims::Primitive& p = *pp;
    if (p.kind != prims::PrimKind::Move && !p.expand) continue;
    if (p.name == "colmean") continue; // (over rows: ColumnDerivatives)
    SCOPED_TRACE("primitive " + p.signature());
    // A move's const parameters (a roll's shift): several values, of either sign and past D.
    std::vector<std::string> extra{""};
    if (p.params.size() > 1) extra = {", 2", ", -3", ", 7", ", k", ", -k + D"};
    for (const std::string& e : extra) {
      SCOPED_TRACE("arguments (x" + e + ")");
      Pipeline pl = build("op: t\ninputs:\n  x: [..., D]\nattrs:\n  k: {type: int, default: "
                          "5}\noutputs:\n  y: " +
                          p.name + "(x" + e + ")\n  z: x * " + p.name + "(x * x" + e + ")\n");
      RowEnv point;
      point.D = 6;
      point.attrs["k"] = 5;
      point.inputs["x"] = {0.3, -1.2, 2.2, 0.9, -0.4, 1.7};
      checkRow(
          pl, point,
          {{"y", {0.5, -1.0, 2.0, 0.25, 1.5, -0.75}}, {"z", {1.0, 0.5, -2.0, 3.0, 0.1, -0.3}}});
    }
    tested.insert(p.name);
  }
  for (const char* name : {"swap_halves", "swap_pairs", "roll", "rotate_half", "rotate_pairs"})
    EXPECT_TRUE(tested.count(name)) << name << " was not tested";
}

// Reductions over rows (colsum, colmean): the derived gradients of a batch normalization and
// of a value that mixes row and column reductions, over a whole [R, D] matrix, against finite
// differences of the matrix interpreter. The adjoint of a [D] statistic is the sum over rows of
// its uses' (ReverseMode.cpp); the backward's column sums are split by linearity
// (opt/ColumnSums.h), which the interpreter does not know of.
TEST(ColumnDerivatives, BatchStatisticsMatchFiniteDifferences) {
  Pipeline pl = build("op: t\ninputs:\n  x: [..., D]\n  w: [D]\nattrs:\n  eps: {type: float, "
                      "default: 0.1}\nlet:\n  m: colmean(x)\n  xc: x - m\n  v: colmean(xc * xc)\n"
                      "outputs:\n  y: xc * rsqrt(v + eps) * w\n"
                      "  z: x * colsum(exp(x - mean(x)) * w) + mean(x * colmean(x))\n");
  MatrixEnv env;
  env.values["x"] = {0.3, -1.2, 2.2, 0.9, -0.4, 1.7, 0.1, -0.8, 1.1, 0.6, -1.5, 0.2};
  env.values["w"] = {0.7, -1.1, 1.3, 0.4};
  env.values["_grad_y"] = {0.5, -1.0, 2.0, 0.25, 1.5, -0.75, 1.0, 0.5, -2.0, 3.0, 0.1, -0.3};
  env.values["_grad_z"] = {1.0, 0.2, -0.4, 0.8, -0.6, 0.9, 0.3, -1.1, 0.5, 0.7, -0.2, 0.4};
  env.attrs["eps"] = 0.1;
  // L = sum(y * gy + z * gz): its gradient is the backward's with those incoming gradients.
  auto loss = [&](const MatrixEnv& e) {
    double l = 0;
    for (size_t m = 0; m < pl.fn.outputs.size(); ++m) {
      const std::vector<double> out = evalMatrix(pl.fn.outputs[m].value, e);
      const std::vector<double>& g = e.values.at("_grad_" + pl.fn.outputs[m].name);
      for (size_t i = 0; i < out.size(); ++i)
        l += out[i] * g[i];
    }
    return l;
  };
  MatrixEnv withGrads = env;
  for (const ir::FunctionOutput& o : pl.fn.outputs)
    withGrads.values[o.name] = env.values.at("_grad_" + o.name); // (GradOut nodes: by output)
  for (size_t i = 0; i < pl.fn.inputs.size(); ++i) {
    const std::string& name = pl.fn.inputs[i].name;
    SCOPED_TRACE("input " + name);
    const std::vector<double> grad = evalMatrix(pl.grad.inputGrads[i], withGrads);
    const bool col = pl.fn.inputs[i].shape == ir::ShapeClass::Col;
    for (size_t k = 0; k < env.values.at(name).size(); ++k) {
      const double h = 1e-6;
      MatrixEnv up = env, down = env;
      up.values[name][k] += h;
      down.values[name][k] -= h;
      const double fd = (loss(up) - loss(down)) / (2 * h);
      double derived = 0; // a [D] input's gradient: the per-element one summed over rows
      if (col)
        for (int r = 0; r < env.R; ++r)
          derived += grad[static_cast<size_t>(r * env.D) + k];
      else
        derived = grad[k];
      EXPECT_NEAR(derived, fd, 1e-6 * (1 + std::abs(fd))) << "element " << k;
    }
  }
}

// A per-row value added inside a reduction: y = mean(x + mean(x)) = 2 mean(x). The adjoint
// of x + mean(x) is per row (from the outer mean), the same for every element, so mean(x)
// gets D times it (found by tests/difffuzz: row_value_in_reduction_grad.yaml).
TEST(RowDerivatives, PerRowValueInsideAReduction) {
  Pipeline p = build("op: t\ninputs:\n  x: [..., D]\noutputs:\n  y: mean(x + mean(x))\n"
                     "  z: x * sum(exp(x) - max(x))\n");
  checkRow(p, rowPoint({{"x", {0.3, -1.2, 2.2, 0.9, -0.4}}}),
           {{"y", std::vector<double>(5, 1.3)}, {"z", kWeights}});
}

TEST(RowDerivatives, ColumnInputUnderAReduction) {
  // d s / d b_j = r for every j: the adjoint of b is per-row (grad * r), summed over rows by
  // the kernel; with one row it is the value at every j.
  Pipeline p = build("op: t\ninputs:\n  x: [..., D]\n  r: [...]\n  b: [D]\n"
                     "outputs:\n  y: x * r\n  s: sum(b * r) + mean(x * b)\n");
  checkRow(
      p,
      rowPoint(
          {{"x", {0.3, -1.2, 2.2, 0.9, -0.4}}, {"r", {-1.4}}, {"b", {1.1, 0.5, -0.8, 1.9, 0.2}}}),
      {{"y", kWeights}, {"s", std::vector<double>(5, 0.8)}});
}

TEST(RowDerivatives, SoftmaxWithDetachedMax) {
  Pipeline p = build("op: t\ninputs:\n  x: [..., D]\nlet:\n  m: detach(max(x))\n"
                     "  e: exp(x - m)\noutputs:\n  y: e / sum(e)\n");
  for (const auto& x : {std::vector<double>{0.3, -1.2, 2.2, 0.9, -0.4},
                        std::vector<double>{5.0, 4.9, -3.0, 0.0, 1.1}}) {
    RowEnv env = rowPoint({{"x", x}});
    std::vector<double> y = evalRow(p.fn.outputs[0].value, env);
    double total = 0;
    for (double v : y)
      total += v;
    EXPECT_NEAR(total, 1.0, 1e-14);
    checkRow(p, env, {{"y", kWeights}});
  }
}

TEST(RowDerivatives, RmsNormWithColumnWeight) {
  Pipeline p = build("op: t\ninputs:\n  x: [..., D]\n  w: [D]\n"
                     "let:\n  rstd: rsqrt(mean(x * x) + 1e-5)\noutputs:\n  y: x * rstd * w\n");
  checkRow(p, rowPoint({{"x", {0.3, -1.2, 2.2, 0.9, -0.4}}, {"w", {1.1, 0.5, -0.8, 1.9, 0.2}}}),
           {{"y", kWeights}});
}

TEST(RowDerivatives, LayerNormCentersWithMean) {
  Pipeline p = build("op: t\ninputs:\n  x: [..., D]\nlet:\n  c: x - mean(x)\n"
                     "  rstd: rsqrt(mean(c * c) + 1e-5)\noutputs:\n  y: c * rstd\n");
  checkRow(p, rowPoint({{"x", {0.3, -1.2, 2.2, 0.9, -0.4}}}), {{"y", kWeights}});
}

TEST(RowDerivatives, MaxAndMinGoToTheExtremeElement) {
  Pipeline p = build("op: t\ninputs:\n  x: [..., D]\noutputs:\n"
                     "  y: x * max(x) - min(x * x)\n");
  checkRow(p, rowPoint({{"x", {0.3, -1.2, 2.2, 0.9, -0.4}}}), {{"y", kWeights}});
}

TEST(RowDerivatives, PerRowInputsAndOutputs) {
  Pipeline p = build("op: t\ninputs:\n  x: [..., D]\n  r: [...]\n  b: [D]\n"
                     "outputs:\n  y: x * r + tanh(r) * b\n  s: sum(x * x) * r + exp(r)\n");
  ASSERT_EQ(p.fn.outputs[1].value->shape(), ir::ShapeClass::Row);
  checkRow(
      p,
      rowPoint(
          {{"x", {0.3, -1.2, 2.2, 0.9, -0.4}}, {"r", {0.6}}, {"b", {1.1, 0.5, -0.8, 1.9, 0.2}}}),
      {{"y", kWeights}, {"s", std::vector<double>(5, -0.9)}});
}

TEST(Derivatives, InputWithoutPathToOutputHasNullGradient) {
  // y depends on b only through a comparison, which carries no gradient.
  Pipeline p = build("op: t\ninputs:\n  a: [..., D]\n  b: [..., D]\n"
                     "outputs:\n  y: where(b > 0, a, 2 * a)\n");
  ASSERT_EQ(p.grad.inputGrads.size(), 2u);
  EXPECT_NE(p.grad.inputGrads[0], nullptr);
  EXPECT_EQ(p.grad.inputGrads[1], nullptr);
  Env e;
  e.inputs = {{"a", 0.3}, {"b", -1.0}};
  e.gradOuts = {{"y", 1.0}};
  EXPECT_EQ(ir::evaluate(p.grad.inputGrads[0], e), 2.0);
}

// ---- numerical stability of the forward formulas at extreme arguments ----

TEST(Derivatives, ActivationsAreFiniteAndAccurateAtLargeArguments) {
  auto apply = [](const char* name, double x) { return ir::applyPrimitive(prim(name, 1), {x}); };
  for (double x : {1e5, -1e5, 800.0, -800.0}) {
    SCOPED_TRACE("x=" + std::to_string(x));
    for (const char* name : {"sigmoid", "softplus", "silu"})
      EXPECT_TRUE(std::isfinite(apply(name, x))) << name;
  }
  EXPECT_EQ(apply("sigmoid", 1e5), 1.0);
  EXPECT_EQ(apply("sigmoid", -1e5), 0.0);
  EXPECT_EQ(apply("softplus", 1e5), 1e5);
  EXPECT_EQ(apply("softplus", -1e5), 0.0);
  EXPECT_EQ(apply("silu", 1e5), 1e5);
  EXPECT_EQ(apply("silu", -1e5), 0.0);
  // Far in the tails the result is tiny but must keep full relative precision.
  const double e40 = std::exp(-40.0);
  EXPECT_NEAR(apply("sigmoid", -40) / (e40 / (1 + e40)), 1.0, 1e-14);
  EXPECT_NEAR(apply("softplus", -40) / std::log1p(e40), 1.0, 1e-14);
  EXPECT_NEAR(apply("silu", -40) / (-40 * e40 / (1 + e40)), 1.0, 1e-14);
  EXPECT_EQ(apply("softplus", 40), 40 + std::log1p(e40));
  // And the gradients stay finite there too.
  for (const char* name : {"sigmoid", "softplus", "silu"}) {
    ir::Function fn = applyOnInputs(prim(name, 1), false, 0);
    autodiff::Gradient g = gradientOf(fn);
    for (double x : {1e5, -1e5}) {
      Env e;
      e.inputs = {{"x0", x}};
      e.gradOuts = {{"y", 1.0}};
      double d = ir::evaluate(g.inputGrads[0], e);
      EXPECT_TRUE(std::isfinite(d)) << name << " at " << x;
      double expected = std::string(name) == "sigmoid" ? 0.0 : (x > 0 ? 1.0 : 0.0);
      EXPECT_NEAR(d, expected, 1e-12) << name << " at " << x;
    }
  }
}

} // namespace
} // namespace fusegen::test
