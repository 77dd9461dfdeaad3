// Tests of the C++ function importer (cxx/FunctionImporter): bodies of scalar device
// functions become formulas (locals inlined, ?: as where, math calls as primitives), calls
// between the header's functions are kept for Sema to inline, and what cannot be
// translated is an error at the C++ line and column.
#include "cxx/FunctionImporter.h"
#include "expr/Ast.h"

#include <gtest/gtest.h>

#include <sstream>
#include <utility>
#include <vector>

namespace {

using fusegen::Diagnostics;
using fusegen::cxx::importFunctions;

TEST(FunctionImporter, TranslatesLocalsCallsAndConditionals) {
  std::ostringstream err;
  Diagnostics diags(err);
  const std::string header = "__host__ __device__ inline float sp(float x) {\n"
                             "  return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));\n"
                             "}\n"
                             "__host__ __device__ inline float mish(float x) {\n"
                             "  const float s = sp(x);\n"
                             "  return x * tanhf(s);\n"
                             "}\n"
                             "__host__ __device__ inline float relu2(float x) {\n"
                             "  const float r = x > 0.0f ? x : 0.0f;\n"
                             "  return r * r;\n"
                             "}\n";
  auto fns = importFunctions("acts.cuh", header, diags);
  ASSERT_TRUE(fns) << err.str();
  ASSERT_EQ(fns->size(), 3u);
  EXPECT_EQ(fusegen::expr::toString(fns->at("sp").body), "add(max(x, 0), log1p(exp(neg(abs(x)))))");
  EXPECT_EQ(fusegen::expr::toString(fns->at("mish").body), "mul(x, tanh(sp(x)))");
  EXPECT_EQ(fusegen::expr::toString(fns->at("relu2").body),
            "mul(where(gt(x, 0), x, 0), where(gt(x, 0), x, 0))");
  EXPECT_EQ(fns->at("mish").params, std::vector<std::string>{"x"});
  EXPECT_EQ(fns->at("mish").loc.line, 4);
}

// Integer subexpressions have C++'s semantics: folded by Clang (1 / 2 is 0, -7 / 2 is -3,
// 7 % 4 is 3), then converted to the float they are used as (16777217 rounds to 16777216).
TEST(FunctionImporter, IntegerArithmeticIsFoldedAsCppComputesIt) {
  std::ostringstream err;
  Diagnostics diags(err);
  const std::string header = "inline float f(float x) {\n"
                             "  const float h = x * (1 / 2) + (7 / 2) + 7 % 4 + (-7) / 2;\n"
                             "  return h + 16777217 + (x > 0.0f ? 3 / 2 : 5 / 2);\n"
                             "}\n";
  auto fns = importFunctions("int.cuh", header, diags);
  ASSERT_TRUE(fns) << err.str();
  EXPECT_EQ(fusegen::expr::toString(fns->at("f").body),
            "add(add(add(add(add(mul(x, 0), 3), 3), -3), 16777216), where(gt(x, 0), 1, 2))");
}

TEST(FunctionImporter, IntegerArithmeticOnValuesIsAnError) {
  std::ostringstream err;
  Diagnostics diags(err);
  EXPECT_FALSE(importFunctions(
      "i.cuh", "inline float f(float x) {\n  return x + (x > 0.0f) / 2;\n}\n", diags));
  EXPECT_NE(err.str().find("i.cuh:2:14: error: integer arithmetic on values that are not "
                           "constants cannot be translated"),
            std::string::npos)
      << err.str();
}

TEST(FunctionImporter, LoopIsAnErrorAtItsLine) {
  std::ostringstream err;
  Diagnostics diags(err);
  const std::string header = "inline float f(float x) {\n"
                             "  while (x > 1.0f) x = x / 2.0f;\n"
                             "  return x;\n"
                             "}\n";
  EXPECT_FALSE(importFunctions("loop.cuh", header, diags));
  EXPECT_NE(err.str().find("loop.cuh:2:3: error: cannot translate a WhileStmt"), std::string::npos)
      << err.str();
}

TEST(FunctionImporter, DoubleReturnAndIntegerParameterAreErrors) {
  std::ostringstream err;
  Diagnostics diags(err);
  EXPECT_FALSE(importFunctions("i.cuh", "inline float f(int n) { return 1.0f; }\n", diags));
  EXPECT_NE(err.str().find("i.cuh:1:20: error: parameter 'n' of 'f' must be a float (not int)"),
            std::string::npos)
      << err.str();
}

TEST(FunctionImporter, NamedDerivativesAreRecordedPerParameter) {
  std::ostringstream err;
  Diagnostics diags(err);
  const std::string header = "inline float f_dx(float x, float y) { return y; }\n"
                             "inline float f_dy(float x, float y) { return x; }\n"
                             "FUSEGEN_DERIVATIVE(f_dx, f_dy)\n"
                             "inline float f(float x, float y) { return x * y; }\n";
  auto fns = importFunctions("d.cuh", header, diags);
  ASSERT_TRUE(fns) << err.str();
  EXPECT_EQ(fns->at("f").derivatives, (std::vector<std::string>{"f_dx", "f_dy"}));
  EXPECT_TRUE(fns->at("f_dx").derivatives.empty());
}

TEST(FunctionImporter, NamedDerivativeMustBeDefinedWithTheSameParameters) {
  std::ostringstream err;
  Diagnostics diags(err);
  const std::string header = "inline float g(float x) { return x; }\n"
                             "FUSEGEN_DERIVATIVE(g, h)\n"
                             "inline float f(float x, float y) { return x * y; }\n";
  EXPECT_FALSE(importFunctions("d.cuh", header, diags));
  EXPECT_NE(err.str().find("d.cuh:2:1: error: FUSEGEN_DERIVATIVE of 'f' names 'h', which this "
                           "header does not define"),
            std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("'g', a derivative of 'f', takes 1 parameter(s)"), std::string::npos)
      << err.str();
}

// Clang would follow an #include to any file on the machine, so every spelling of one is
// refused before Clang runs, at the line of the directive; other directives are fine.
TEST(FunctionImporter, InclusionsAreRefusedInEverySpelling) {
  const std::string body = "__host__ __device__ inline float f(float x) { return x; }\n";
  for (const auto& [text, line] : std::vector<std::pair<std::string, int>>{
           {"#include \"/etc/hostname\"\n", 1},
           {"  #  include </dev/zero>\n", 1},
           {"// a comment\n#\\\ninclude \"x.h\"\n", 2},
           {"#include_next <a.h>\n", 1},
           {"#import \"a.h\"\n", 1},
           {"\n#if __has_include(\"/etc/passwd\")\n#endif\n", 2}}) {
    std::ostringstream err;
    Diagnostics diags(err);
    EXPECT_FALSE(importFunctions("h.cuh", text + body, diags)) << text;
    EXPECT_EQ(diags.errorCount(), 1) << text;
    EXPECT_EQ(err.str().rfind("h.cuh:" + std::to_string(line) + ":", 0), 0u) << err.str();
  }
  std::ostringstream err;
  Diagnostics diags(err);
  EXPECT_TRUE(importFunctions("h.cuh",
                              "#pragma once\n#ifndef FUSEGEN_DERIVATIVE\n#define "
                              "FUSEGEN_DERIVATIVE(...)\n#endif\n" +
                                  body,
                              diags))
      << err.str();
}

} // namespace
