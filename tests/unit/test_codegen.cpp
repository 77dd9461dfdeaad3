// Tests of emit::printCpp / emit::printPython: the straight-line code the kernels and the
// PyTorch reference are made of. Each DAG node must be computed exactly once (a shared node
// printed twice would double the work, or worse diverge), literals must read back as the
// exact same double, and conditions must be typed bool.
#include "TestUtil.h"

#include "emit/CodeFormatter.h"
#include "emit/CodePrinter.h"
#include "support/FileWriter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace fusegen::test {
namespace {

using ir::Expr;
using ir::Node;

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size()))
    ++n;
  return n;
}

class CodePrinter : public ::testing::Test {
protected:
  Expr x = Node::makeInput("x", 0, ir::ShapeClass::Full);
  Expr b = Node::makeInput("bias", 1, ir::ShapeClass::Col);
  Expr alpha = Node::makeAttr("alpha", 0);
  // Where the C++ template reads each leaf from.
  emit::Bindings leaves() const {
    return {{x.get(), "in_x[i]"}, {b.get(), "in_bias[c]"}, {alpha.get(), "alpha_"}};
  }
};

TEST_F(CodePrinter, SharedNodesArePrintedOnce) {
  Expr t = call("mul", {x, b}); // used three times
  Expr e = call("exp", {t});    // used by both outputs
  Expr y = call("add", {call("mul", {t, t}), e});
  Expr z = call("sub", {e, t});
  std::string cpp = emit::printCpp({{"out_y", y}, {"out_z", z}}, 4, leaves());
  EXPECT_EQ(cpp, "    const T _in_x = in_x[i];\n"
                 "    const T _in_bias = in_bias[c];\n"
                 "    const T _t0 = _in_x * _in_bias;\n"
                 "    const T _t1 = _t0 * _t0;\n"
                 "    const T _t2 = fg::exp<kFast>(_t0);\n"
                 "    const T _t3 = _t1 + _t2;\n"
                 "    const T _t4 = _t2 - _t0;\n"
                 "    out_y = _t3;\n"
                 "    out_z = _t4;\n");
  EXPECT_EQ(count(cpp, "_in_x * _in_bias"), 1u);
  EXPECT_EQ(count(cpp, "fg::exp<kFast>("), 1u);
  EXPECT_EQ(count(cpp, "const T _in_x ="), 1u);
  EXPECT_EQ(count(cpp, "const T _t"), 5u); // one per call node in the DAG
  EXPECT_EQ(count(cpp, "const T _t"), ir::topoOrder({y, z}).size() - 2);

  std::string py = emit::printPython({{"y", y}, {"z", z}}, 2, "x", "x");
  EXPECT_EQ(py, "  _t0 = (x * bias)\n"
                "  _t1 = (_t0 * _t0)\n"
                "  _t2 = torch.exp(_t0)\n"
                "  _t3 = (_t1 + _t2)\n"
                "  _t4 = (_t2 - _t0)\n"
                "  y = _t3\n"
                "  z = _t4\n");
  EXPECT_EQ(count(py, "torch.exp("), 1u);
}

TEST_F(CodePrinter, ConstantsAndLeaves) {
  Expr y = call("add", {call("mul", {x, Node::makeConst(0.5)}), alpha});
  std::string cpp = emit::printCpp({{"o", y}}, 0, leaves());
  EXPECT_EQ(cpp, "const T _in_x = in_x[i];\nconst T _t0 = _in_x * T(0.5);\n"
                 "const T _attr_alpha = alpha_;\nconst T _t1 = _t0 + _attr_alpha;\no = _t1;\n");
  std::string py = emit::printPython({{"o", y}}, 0, "x", "x");
  EXPECT_EQ(py, "_t0 = (x * 0.5)\n_t1 = (_t0 + alpha)\no = _t1\n");
  // Gradient leaves are named after their output; D is the kernel parameter _D.
  Expr g = Node::makeGradOut("y", 0, ir::ShapeClass::Full);
  EXPECT_EQ(
      emit::printCpp({{"gx", call("div", {g, Node::makeDim()})}}, 0, {{g.get(), "grad_y[i]"}}),
      "const T _grad_y = grad_y[i];\nconst T _t0 = fg::div<kFast>(_grad_y, _D);\ngx = _t0;\n");
}

// Spec names may be macros of the headers the generated C++ includes (M_PI, INT_MAX,
// FG_HD...): in C++ an input is _in_<name> and an attr _attr_<name>, never a macro; the
// Python reference keeps the spec's names.
TEST_F(CodePrinter, SpecNamesArePrefixedInCppOnly) {
  Expr pi = Node::makeInput("M_PI", 0, ir::ShapeClass::Full);
  Expr hd = Node::makeInput("FG_HD", 1, ir::ShapeClass::Col);
  Expr max = Node::makeAttr("INT_MAX", 0);
  Expr y = call("add", {call("mul", {pi, hd}), max});
  EXPECT_EQ(emit::printCpp({{"o", y}}, 0,
                           {{pi.get(), "_in[0]"}, {hd.get(), "_in[1]"}, {max.get(), "_attr[0]"}}),
            "const T _in_M_PI = _in[0];\nconst T _in_FG_HD = _in[1];\n"
            "const T _t0 = _in_M_PI * _in_FG_HD;\nconst T _attr_INT_MAX = _attr[0];\n"
            "const T _t1 = _t0 + _attr_INT_MAX;\no = _t1;\n");
  EXPECT_EQ(emit::cppInputName("M_PI"), "_in_M_PI");
  EXPECT_EQ(emit::cppAttrName("INT_MAX"), "_attr_INT_MAX");
  EXPECT_EQ(emit::printPython({{"o", y}}, 0, "x", "x"),
            "_t0 = (M_PI * FG_HD)\n_t1 = (_t0 + INT_MAX)\no = _t1\n");
}

TEST_F(CodePrinter, UnboundLeafInCppIsALogicError) {
  EXPECT_THROW(emit::printCpp({{"o", call("exp", {x})}}, 0, {}), std::logic_error);
}

TEST_F(CodePrinter, BoundInnerNodeIsUsedAndNotRecomputed) {
  Expr t = call("mul", {x, b});
  Expr y = call("exp", {t});
  std::string cpp = emit::printCpp({{"o", y}}, 2, {{t.get(), "row_t"}});
  EXPECT_EQ(cpp, "  const T _t0 = fg::exp<kFast>(row_t);\n  o = _t0;\n");
  EXPECT_EQ(count(cpp, "_in_x"), 0u);
  EXPECT_EQ(count(cpp, "in_x"), 0u);
}

TEST_F(CodePrinter, NullValueIsZeroAndLeavesAssignDirectly) {
  EXPECT_EQ(emit::printCpp({{"gx", nullptr}, {"o", x}}, 2, leaves()),
            "  const T _in_x = in_x[i];\n  gx = T(0);\n  o = _in_x;\n");
  EXPECT_EQ(emit::printPython({{"gx", nullptr}, {"o", x}}, 0, "x", "x"), "gx = 0.0\no = x\n");
}

TEST_F(CodePrinter, ConditionsAreBool) {
  Expr c = call("gt", {x, Node::makeConst(0)});
  Expr y = call("where", {c, x, call("mul", {x, Node::makeConst(0.5)})});
  std::string cpp = emit::printCpp({{"o", y}}, 0, leaves());
  EXPECT_EQ(count(cpp, "const bool "), 1u);
  EXPECT_EQ(count(cpp, "const T _t"), 2u);
  EXPECT_NE(cpp.find("const bool _t0 = _in_x > T(0.0);\n"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find("const T _t2 = _t0 ? _in_x : _t1;\n"), std::string::npos) << cpp;
  std::string py = emit::printPython({{"o", y}}, 0, "x", "x");
  EXPECT_NE(py.find("_t0 = (x > 0.0)\n"), std::string::npos) << py;
  EXPECT_NE(py.find("_t2 = torch.where(_t0, x, _t1)\n"), std::string::npos) << py;
}

// A where whose condition is the same for every element (an attr's) computes the nodes only
// one branch uses inside an if: tanh(x / alpha) is not computed when alpha > 0 is false. Its
// shared nodes (x * x, used outside too) stay outside, and a condition per element (x > 0)
// keeps the select.
TEST_F(CodePrinter, BranchesOfUniformConditionsAreLazy) {
  Expr sq = call("mul", {x, x});
  Expr capped = call("mul", {alpha, call("tanh", {call("div", {sq, alpha})})});
  Expr y = call("where", {call("gt", {alpha, Node::makeConst(0)}), capped, sq});
  Expr z = call("where", {call("gt", {x, Node::makeConst(0)}), capped, sq});
  std::string cpp = emit::printCpp({{"o", y}}, 0, leaves());
  EXPECT_NE(cpp.find("const T _t1 = _in_x * _in_x;\nT _t2;\nif (_t0) {\n"), std::string::npos)
      << cpp;
  EXPECT_LT(cpp.find("if (_t0) {"), cpp.find("fg::tanh"));
  EXPECT_LT(cpp.find("fg::tanh"), cpp.find("} else {"));
  EXPECT_NE(cpp.find("} else {\n  _t2 = _t1;\n}\n"), std::string::npos) << cpp;
  std::string perElement = emit::printCpp({{"o", z}}, 0, leaves());
  EXPECT_EQ(perElement.find("if ("), std::string::npos) << perElement;
  // Used outside the where too, the branch is computed before it.
  std::string shared = emit::printCpp({{"o", y}, {"p", capped}}, 0, leaves());
  EXPECT_EQ(shared.find("if ("), std::string::npos) << shared;
}

// With UniformConditions, a lazy branch's condition and an assignment of a uniform condition
// (a reduction's guard) read through fg::uniform<U>, numbered once per distinct condition
// across every function printed with the same registry: structurally equal conditions built
// apart share a number. A condition per element is left alone.
TEST_F(CodePrinter, UniformConditionsAreNumberedAcrossFunctions) {
  Expr capped = call("tanh", {call("div", {x, alpha})});
  auto positive = [&] { return call("gt", {alpha, Node::makeConst(0)}); };
  Expr y = call("where", {positive(), capped, x});
  Expr big = call("gt", {alpha, Node::makeConst(2)});
  emit::UniformConditions uniforms;
  std::string term = emit::printCpp({{"o", y}}, 0, leaves(), &uniforms);
  EXPECT_NE(term.find("if (fg::uniform<U>(0, _t0)) {"), std::string::npos) << term;
  std::string guards = emit::printCpp({{"g0", big}, {"g1", positive()}}, 0, leaves(), &uniforms);
  EXPECT_NE(guards.find("g0 = fg::uniform<U>(1, _t0);"), std::string::npos) << guards;
  EXPECT_NE(guards.find("g1 = fg::uniform<U>(0, _t1);"), std::string::npos) << guards;
  ASSERT_EQ(uniforms.conditions().size(), 2u);
  std::string perElement =
      emit::printCpp({{"o", call("where", {call("gt", {x, Node::makeConst(0)}), capped, x})}}, 0,
                     leaves(), &uniforms);
  EXPECT_EQ(perElement.find("fg::uniform"), std::string::npos) << perElement;
  EXPECT_EQ(uniforms.conditions().size(), 2u);
  // Without a registry the code is as before.
  EXPECT_EQ(emit::printCpp({{"o", y}}, 0, leaves()).find("fg::uniform"), std::string::npos);
}

TEST_F(CodePrinter, PrimitiveFormulasAreInlinedWithOperands) {
  std::string cpp = emit::printCpp({{"o", call("leaky_relu", {x, alpha})}}, 0, leaves());
  EXPECT_EQ(cpp, "const T _in_x = in_x[i];\nconst T _attr_alpha = alpha_;\n"
                 "const T _t0 = (_in_x > T(0.0)) ? _in_x : (_in_x * _attr_alpha);\no = _t0;\n");
  std::string py = emit::printPython({{"o", call("pow", {b, Node::makeConst(2)})}}, 0, "x", "x");
  EXPECT_EQ(py, "_t0 = torch.pow(bias, 2.0)\no = _t0\n");
}

// The error bounds print each primitive through its eval formula (the builtins the kernels
// run), so every rounding is visible to testing.Rounding; a shared node is still one line.
TEST_F(CodePrinter, BoundsSpellEvalFormulasOverRounding) {
  Expr t = call("mul", {x, b});
  Expr y = call("add", {call("softplus", {t}), call("div", {t, alpha})});
  std::string py = emit::printPythonBounds({{"y", y}}, 2, {}, "_t");
  EXPECT_EQ(py, "  _t0 = (x * bias)\n"
                "  _t1 = (_r.select((_t0 > 0.0), _t0, 0.0) + _r.log1p(_r.exp((-_r.abs(_t0)))))\n"
                "  _t2 = (_t0 / alpha)\n"
                "  _t3 = (_t1 + _t2)\n"
                "  y = _t3\n");
  EXPECT_EQ(count(py, "x * bias"), 1u);
}

TEST_F(CodePrinter, BoundsOfReductionsAndBoundNodes) {
  // mean is its combine, then its finish formula over acc and D.
  Expr mean = call("mean", {call("mul", {x, x})});
  Expr r = call("rsqrt", {mean});
  Expr y = call("mul", {x, r});
  EXPECT_EQ(emit::printPythonBounds({{"y", y}}, 0, {}, "_t"),
            "_t0 = (x * x)\n_t1 = (_r.sum(_t0) / _D)\n_t2 = _r.rsqrt(_t1)\n"
            "_t3 = (x * _t2)\ny = _t3\n");
  // A bound node (a per-row value saved by the forward) is used by name, not recomputed;
  // max and detach are their combine and their argument.
  Expr m = call("detach", {call("max", {x})});
  Expr z = call("exp", {call("sub", {x, m})});
  EXPECT_EQ(emit::printPythonBounds({{"g", y}, {"z", z}}, 0, {{r.get(), "_s0"}}, "_b"),
            "_b0 = (x * _s0)\n_b1 = _r.max(x)\n_b2 = _b1\n_b3 = (x - _b2)\n"
            "_b4 = _r.exp(_b3)\ng = _b0\nz = _b4\n");
}

TEST(ReductionResult, FinishFormulaOverAcc) {
  EXPECT_EQ(emit::cppReductionResult(prim("sum", 1), "acc0"), "acc0");
  EXPECT_EQ(emit::cppReductionResult(prim("mean", 1), "acc0"), "fg::div<kFast>(acc0, _D)");
}

TEST(CppLiteral, RoundTripsExactly) {
  for (double v : {0.5, 1.0, 0.0, -2.0, 0.1, 1e-6, 1.0 / 3, 0.70710678118654752, 1.1283791670955126,
                   0.044715, 6.02214076e23, 1e300, 5e-324, -7.25e-12,
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::min()}) {
    std::string lit = emit::cppLiteral(v);
    ASSERT_GT(lit.size(), 3u);
    ASSERT_EQ(lit.substr(0, 2), "T(") << lit;
    ASSERT_EQ(lit.back(), ')') << lit;
    std::string number = lit.substr(2, lit.size() - 3);
    // Reads as floating point in C++ (an int literal would change overload resolution).
    EXPECT_NE(number.find_first_of(".e"), std::string::npos) << lit;
    char* end = nullptr;
    double back = std::strtod(number.c_str(), &end);
    EXPECT_EQ(*end, '\0') << lit;
    EXPECT_EQ(back, v) << lit;
    std::string py = emit::pythonLiteral(v);
    EXPECT_EQ(std::strtod(py.c_str(), nullptr), v) << py;
  }
  EXPECT_EQ(emit::cppLiteral(0.5), "T(0.5)");
  EXPECT_EQ(emit::cppLiteral(2), "T(2.0)");
  EXPECT_EQ(emit::pythonLiteral(0.5), "0.5");
  EXPECT_EQ(emit::pythonLiteral(std::numeric_limits<double>::infinity()), "float('inf')");
  EXPECT_EQ(emit::pythonLiteral(-std::numeric_limits<double>::infinity()), "float('-inf')");
  // The literal inf (a name of the formula language): INFINITY, a macro of <cmath>, in T.
  EXPECT_EQ(emit::cppLiteral(std::numeric_limits<double>::infinity()), "T(INFINITY)");
  EXPECT_EQ(emit::cppLiteral(-std::numeric_limits<double>::infinity()), "(-T(INFINITY))");
}

} // namespace
} // namespace fusegen::test

// Generated C++ goes through clang-format with the style in templates/.
TEST(CodeFormatter, FormatsWithTheTemplatesStyle) {
  const std::string style =
      fusegen::readFile(std::string(FUSEGEN_TEST_TEMPLATES) + "/clang-format-style.yaml");
  const std::string messy = "namespace a{int f(int x){if(x>0){return x*2;}return 0;}}\n";
  EXPECT_EQ(fusegen::emit::formatCpp(messy, "a.h", style), "namespace a {\n"
                                                           "int f(int x) {\n"
                                                           "  if (x > 0) {\n"
                                                           "    return x * 2;\n"
                                                           "  }\n"
                                                           "  return 0;\n"
                                                           "}\n"
                                                           "} // namespace a\n");
  EXPECT_THROW(fusegen::emit::formatCpp(messy, "a.h", "ColumnLimit: [oops]"), std::runtime_error);
}
