// Tests of expr::parseFormula: operator precedence and associativity, calls, numeric
// literals, negative-literal folding, and the exact text and column of every syntax error.
// Formulas are the user's main input, so a misparse silently computes the wrong function
// and a wrong column sends the user to the wrong character.
#include "expr/Parser.h"

#include <gtest/gtest.h>

#include <sstream>

namespace fusegen::expr {
namespace {

// Parses `text` as if it started at line 1, column 1 of "f.yaml"; fails the test on error.
std::string parsed(const std::string& text) {
  std::ostringstream out;
  Diagnostics diags(out);
  AstPtr ast = parseFormula(text, SourceLoc{"f.yaml", 1, 1}, diags);
  EXPECT_TRUE(ast) << "failed to parse '" << text << "':\n" << out.str();
  EXPECT_EQ(diags.errorCount(), 0);
  return ast ? toString(ast) : "<error>";
}

AstPtr parseOk(const std::string& text) {
  std::ostringstream out;
  Diagnostics diags(out);
  AstPtr ast = parseFormula(text, SourceLoc{"f.yaml", 1, 1}, diags);
  EXPECT_TRUE(ast) << out.str();
  return ast;
}

// Parses a formula that sits in a YAML file as `  y: <text>` on line 3 (so it starts at
// column 6) and returns everything Diagnostics printed.
struct ErrorResult {
  bool failed = false;
  int errors = 0;
  std::string output;
};

ErrorResult parseError(const std::string& text) {
  std::string file = "op: t\noutputs:\n  y: " + text + "\n";
  std::ostringstream out;
  Diagnostics diags(out);
  diags.addFile("s.yaml", file);
  AstPtr ast = parseFormula(text, SourceLoc{"s.yaml", 3, 6}, diags);
  return ErrorResult{ast == nullptr, diags.errorCount(), out.str()};
}

// The full diagnostic for an error at 0-based `offset` into the formula.
std::string expectedError(const std::string& text, int offset, const std::string& message) {
  return "s.yaml:3:" + std::to_string(6 + offset) + ": error: " + message + "\n" + "  y: " + text +
         "\n" + std::string(5 + offset, ' ') + "^\n";
}

TEST(Parser, MultiplicationBindsTighterThanAddition) {
  EXPECT_EQ(parsed("a + b * c"), "(a + (b * c))");
  EXPECT_EQ(parsed("a * b + c"), "((a * b) + c)");
  EXPECT_EQ(parsed("a - b / c"), "(a - (b / c))");
}

TEST(Parser, UnaryMinusBindsTighterThanMultiplication) {
  EXPECT_EQ(parsed("-a * b"), "((-a) * b)");
  EXPECT_EQ(parsed("a * -b"), "(a * (-b))");
  EXPECT_EQ(parsed("--a"), "(-(-a))");
  AstPtr ast = parseOk("-a * b");
  ASSERT_TRUE(ast);
  EXPECT_EQ(ast->name, "mul");
  EXPECT_EQ(ast->args[0]->name, "neg");
  EXPECT_EQ(ast->args[0]->op, "-");
}

TEST(Parser, ComparisonsHaveTheLowestPrecedence) {
  EXPECT_EQ(parsed("a + b < c * d"), "((a + b) < (c * d))");
  EXPECT_EQ(parsed("-a <= b - c"), "((-a) <= (b - c))");
  EXPECT_EQ(parsed("a > b"), "(a > b)");
  EXPECT_EQ(parsed("a >= b"), "(a >= b)");
  EXPECT_EQ(parsed("a == b"), "(a == b)");
  EXPECT_EQ(parsed("a != b"), "(a != b)");
  const std::pair<const char*, const char*> names[] = {{"a < b", "lt"},  {"a <= b", "le"},
                                                       {"a > b", "gt"},  {"a >= b", "ge"},
                                                       {"a == b", "eq"}, {"a != b", "ne"}};
  for (auto [text, prim] : names) {
    AstPtr ast = parseOk(text);
    ASSERT_TRUE(ast);
    EXPECT_EQ(ast->kind, Ast::Kind::Call);
    EXPECT_EQ(ast->name, prim) << text;
  }
}

TEST(Parser, SubtractionAndDivisionAreLeftAssociative) {
  EXPECT_EQ(parsed("a - b - c"), "((a - b) - c)");
  EXPECT_EQ(parsed("a / b / c"), "((a / b) / c)");
  EXPECT_EQ(parsed("a - b + c - d"), "(((a - b) + c) - d)");
  EXPECT_EQ(parsed("a / b * c"), "((a / b) * c)");
}

TEST(Parser, OperatorsBecomeCallsOfPrimitives) {
  AstPtr ast = parseOk("a + b");
  ASSERT_TRUE(ast);
  EXPECT_EQ(ast->kind, Ast::Kind::Call);
  EXPECT_EQ(ast->name, "add");
  EXPECT_EQ(ast->op, "+");
  ASSERT_EQ(ast->args.size(), 2u);
  EXPECT_EQ(ast->args[0]->kind, Ast::Kind::Name);
  EXPECT_EQ(ast->args[0]->name, "a");
  EXPECT_EQ(parseOk("a - b")->name, "sub");
  EXPECT_EQ(parseOk("a * b")->name, "mul");
  EXPECT_EQ(parseOk("a / b")->name, "div");
}

TEST(Parser, CallsWithZeroToThreeArguments) {
  EXPECT_EQ(parsed("f()"), "f()");
  EXPECT_EQ(parsed("f(a)"), "f(a)");
  EXPECT_EQ(parsed("f(a, b)"), "f(a, b)");
  EXPECT_EQ(parsed("where(a > 0, a + 1, g(b))"), "where((a > 0), (a + 1), g(b))");
  AstPtr ast = parseOk("where(a > 0, a + 1, g(b))");
  ASSERT_TRUE(ast);
  EXPECT_EQ(ast->kind, Ast::Kind::Call);
  EXPECT_TRUE(ast->op.empty());
  EXPECT_EQ(ast->args.size(), 3u);
  EXPECT_EQ(parseOk("f()")->args.size(), 0u);
  // A name not followed by '(' is a name, not a call.
  EXPECT_EQ(parseOk("f")->kind, Ast::Kind::Name);
}

TEST(Parser, NumericLiterals) {
  struct Case {
    const char* text;
    double value;
  } cases[] = {{"1", 1.0}, {"1.5", 1.5}, {"1e-6", 1e-6}, {".5", 0.5}, {"2.5E3", 2500.0}, {"0", 0}};
  for (const Case& c : cases) {
    AstPtr ast = parseOk(c.text);
    ASSERT_TRUE(ast) << c.text;
    EXPECT_EQ(ast->kind, Ast::Kind::Number) << c.text;
    EXPECT_EQ(ast->number, c.value) << c.text;
  }
  EXPECT_EQ(parsed("x * .5 + 1e-6"), "((x * 0.5) + 9.9999999999999995e-07)");
}

TEST(Parser, NegativeLiteralIsFoldedToANumber) {
  AstPtr ast = parseOk("-2");
  ASSERT_TRUE(ast);
  EXPECT_EQ(ast->kind, Ast::Kind::Number);
  EXPECT_EQ(ast->number, -2.0);
  ast = parseOk("-2 * x");
  ASSERT_TRUE(ast);
  EXPECT_EQ(ast->name, "mul");
  EXPECT_EQ(ast->args[0]->kind, Ast::Kind::Number);
  EXPECT_EQ(ast->args[0]->number, -2.0);
  EXPECT_EQ(parsed("x - -1.5"), "(x - -1.5)");
  ast = parseOk("--3");
  ASSERT_TRUE(ast);
  EXPECT_EQ(ast->kind, Ast::Kind::Number);
  EXPECT_EQ(ast->number, 3.0);
  ast = parseOk("-(4)");
  ASSERT_TRUE(ast);
  EXPECT_EQ(ast->kind, Ast::Kind::Number);
  EXPECT_EQ(ast->number, -4.0);
  // A negated name stays a call of neg.
  EXPECT_EQ(parseOk("-x")->kind, Ast::Kind::Call);
}

TEST(Parser, NestedParentheses) {
  EXPECT_EQ(parsed("((a))"), "a");
  EXPECT_EQ(parsed("(a + b) * c"), "((a + b) * c)");
  EXPECT_EQ(parsed("a - (b - c)"), "(a - (b - c))");
  EXPECT_EQ(parsed("((a + (b * (c - d))) / e)"), "((a + (b * (c - d))) / e)");
  EXPECT_EQ(parsed("f((a), (g((b))))"), "f(a, g(b))");
  EXPECT_EQ(parsed("(a < b)"), "(a < b)");
}

TEST(Parser, WhitespaceIsIgnored) {
  EXPECT_EQ(parsed("  a+b*c  "), "(a + (b * c))");
  EXPECT_EQ(parsed("f( a ,b )"), "f(a, b)");
  EXPECT_EQ(parsed("a<=b"), "(a <= b)");
}

TEST(Parser, LocationsPointAtTheOperatorOrName) {
  std::ostringstream out;
  Diagnostics diags(out);
  AstPtr ast = parseFormula("ab + f(c)", SourceLoc{"f.yaml", 4, 10}, diags);
  ASSERT_TRUE(ast);
  EXPECT_EQ(ast->loc.line, 4);
  EXPECT_EQ(ast->loc.col, 13); // the '+'
  EXPECT_EQ(ast->args[0]->loc.col, 10);
  EXPECT_EQ(ast->args[1]->loc.col, 15); // the 'f'
  EXPECT_EQ(ast->args[1]->args[0]->loc.col, 17);
  EXPECT_EQ(ast->loc.file, "f.yaml");
}

TEST(ParserErrors, UnexpectedCharacter) {
  ErrorResult r = parseError("a + $b");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.errors, 1);
  EXPECT_EQ(r.output, expectedError("a + $b", 4, "unexpected character '$' in formula"));
  // A single '=' is not an operator; the note says what a keyword argument would have meant.
  r = parseError("a = b");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.errors, 1);
  const std::string error = expectedError("a = b", 2, "unexpected character '=' in formula");
  EXPECT_EQ(r.output.substr(0, error.size()), error);
  EXPECT_NE(r.output.find("note: calls take no keyword arguments"), std::string::npos);
}

TEST(ParserErrors, ExpectedAnExpression) {
  ErrorResult r = parseError("a +");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.errors, 1);
  EXPECT_EQ(r.output, expectedError("a +", 3, "expected an expression"));
  r = parseError("a * )");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.output, expectedError("a * )", 4, "expected an expression, found ')'"));
  r = parseError("");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.output, expectedError("", 0, "expected an expression"));
}

TEST(ParserErrors, UnclosedCall) {
  ErrorResult r = parseError("f(a, b");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.errors, 1);
  EXPECT_EQ(r.output, expectedError("f(a, b", 6, "expected ')' to close the call of 'f'"));
  r = parseError("f(a b)");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.output,
            expectedError("f(a b)", 4, "expected ',' or ')' in the call of 'f', found 'b'"));
}

TEST(ParserErrors, UnclosedParenthesis) {
  ErrorResult r = parseError("(a + b");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.output, expectedError("(a + b", 6, "expected ')'"));
}

TEST(ParserErrors, TrailingTokens) {
  ErrorResult r = parseError("a b");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.errors, 1);
  EXPECT_EQ(r.output, expectedError("a b", 2, "unexpected 'b' after the end of the expression"));
  r = parseError("f(a))");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.output, expectedError("f(a))", 4, "unexpected ')' after the end of the expression"));
}

TEST(ParserErrors, ChainedComparisons) {
  ErrorResult r = parseError("a < b < c");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.errors, 1);
  EXPECT_EQ(r.output,
            expectedError("a < b < c", 6,
                          "comparisons cannot be chained; use where() to combine conditions"));
  r = parseError("a == b >= c");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.output,
            expectedError("a == b >= c", 7,
                          "comparisons cannot be chained; use where() to combine conditions"));
}

TEST(ParserErrors, UnaryPlusAndMalformedNumbers) {
  ErrorResult r = parseError("+a");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.output, expectedError("+a", 0, "unary '+' is not supported"));
  r = parseError("2x");
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.output, expectedError("2x", 1, "invalid number '2x...'"));
}

// Nesting (parentheses, calls and unary minus, counted together) is limited so the
// recursive-descent parser cannot overflow the stack; the error points at the opener that
// goes one level past the limit. Flat chains are loops and have no limit.
// x inside `levels` copies of `open` ("(", "exp(" or "-"), closed where it needs closing.
std::string nestedIn(const std::string& open, int levels) {
  std::string text;
  for (int i = 0; i < levels; ++i)
    text += open;
  return text + "x" + (open == "-" ? "" : std::string(levels, ')'));
}

TEST(Parser, NestingUpToTheLimitParses) {
  const int n = kMaxFormulaNesting;
  for (const std::string open : {"(", "exp(", "-"})
    EXPECT_TRUE(parseOk(nestedIn(open, n))) << open;
  // Levels of different kinds add up: n/4 + n/4 + 1 + (n/2 - 1) = n.
  EXPECT_TRUE(parseOk(std::string(n / 4, '(') + std::string(n / 4, '-') + "exp(" +
                      std::string(n / 2 - 1, '(') + "x" + std::string(n / 2, ')') +
                      std::string(n / 4, ')')));
}

TEST(Parser, NestingPastTheLimitIsReportedAtTheOpener) {
  const int n = kMaxFormulaNesting + 1;
  const std::string message = "the formula nests deeper than " +
                              std::to_string(kMaxFormulaNesting) +
                              " levels (parentheses, calls and unary '-' together); name "
                              "inner parts with 'let'";
  for (const std::string open : {"(", "exp(", "-"}) {
    const std::string text = nestedIn(open, n);
    ErrorResult r = parseError(text);
    EXPECT_TRUE(r.failed) << open;
    EXPECT_EQ(r.errors, 1);
    const int offset = (n - 1) * static_cast<int>(open.size());
    EXPECT_EQ(r.output, expectedError(text, offset, message)) << open;
  }
  // Levels of different kinds add up.
  std::string mixed =
      std::string(n / 2, '(') + std::string(n - n / 2, '-') + "x" + std::string(n / 2, ')');
  EXPECT_TRUE(parseError(mixed).failed);
}

TEST(Parser, FlatChainsHaveNoDepthLimit) {
  std::string text = "x";
  for (int i = 0; i < 100000; ++i)
    text += i % 2 ? " + x" : " - x";
  AstPtr ast = parseOk(text);
  ASSERT_TRUE(ast);
  int depth = 0;
  for (const Ast* a = ast.get(); a->kind == Ast::Kind::Call; a = a->args[0].get())
    ++depth;
  EXPECT_EQ(depth, 100000);
  ast.reset(); // a left-deep tree this deep is freed without recursion (ChainRelease)
}

} // namespace
} // namespace fusegen::expr
