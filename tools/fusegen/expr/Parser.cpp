// Lexer and precedence-climbing parser for formulas.
#include "expr/Parser.h"

#include "support/ChainRelease.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace fusegen::expr {

Ast::~Ast() {
  releaseChildren(args);
}

AstPtr Ast::makeNumber(double v, SourceLoc loc, bool integer) {
  auto a = std::make_shared<Ast>();
  a->kind = Kind::Number;
  a->number = v;
  a->integer = integer;
  a->loc = std::move(loc);
  return a;
}

AstPtr Ast::makeName(std::string name, SourceLoc loc) {
  auto a = std::make_shared<Ast>();
  a->kind = Kind::Name;
  a->name = std::move(name);
  a->loc = std::move(loc);
  return a;
}

AstPtr Ast::makeCall(std::string name, std::vector<AstPtr> args, SourceLoc loc, std::string op) {
  auto a = std::make_shared<Ast>();
  a->kind = Kind::Call;
  a->name = std::move(name);
  a->op = std::move(op);
  a->args = std::move(args);
  a->loc = std::move(loc);
  return a;
}

std::string toString(const AstPtr& a) {
  switch (a->kind) {
  case Ast::Kind::Number: {
    std::ostringstream s;
    s.precision(17);
    s << a->number;
    return s.str();
  }
  case Ast::Kind::Name:
    return a->name;
  case Ast::Kind::Call:
    if (!a->op.empty() && a->args.size() == 2)
      return "(" + toString(a->args[0]) + " " + a->op + " " + toString(a->args[1]) + ")";
    if (!a->op.empty()) return "(" + a->op + toString(a->args[0]) + ")";
    std::string s = a->name + "(";
    for (size_t i = 0; i < a->args.size(); ++i)
      s += (i ? ", " : "") + toString(a->args[i]);
    return s + ")";
  }
  return "?";
}

namespace {

// How a formula raises to a power, for the spellings of Python (**) and others (^).
constexpr const char* kPowerNote =
    "a power is pow(x, p), p a number or an attr (square(x) for p = 2, exp(p * log(x)) for "
    "a p that varies)";

struct Token {
  enum class Kind { Number, Ident, Punct, End } kind;
  std::string text;
  double number = 0;
  int offset = 0;
};

class Lexer {
public:
  Lexer(const std::string& text, const std::vector<SourceLoc>& locs, Diagnostics& diags)
      : text_(text), locs_(locs), diags_(diags) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    size_t i = 0;
    while (i < text_.size()) {
      char c = text_[i];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      Token t{Token::Kind::Punct, "", 0, static_cast<int>(i)};
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && i + 1 < text_.size() &&
           std::isdigit(static_cast<unsigned char>(text_[i + 1])))) {
        // digits [. digits] [e [+-] digits], scanned here so hex and the like are rejected
        const size_t start = i;
        auto digits = [&] {
          while (i < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i])))
            ++i;
        };
        digits();
        if (i < text_.size() && text_[i] == '.') {
          ++i;
          digits();
        }
        if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
          size_t mark = i++;
          if (i < text_.size() && (text_[i] == '+' || text_[i] == '-')) ++i;
          if (i < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i])))
            digits();
          else
            i = mark; // not an exponent: "2e" is reported below
        }
        t.kind = Token::Kind::Number;
        t.text = text_.substr(start, i - start);
        t.number = std::strtod(t.text.c_str(), nullptr);
        if (i < text_.size() &&
            (std::isalpha(static_cast<unsigned char>(text_[i])) || text_[i] == '_'))
          diags_.fatal(locs_[i], "invalid number '" + t.text + text_[i] + "...'");
        if (!std::isfinite(t.number) ||
            (t.number == 0 && t.text.find_first_of("123456789") != std::string::npos))
          diags_.fatal(locs_[start], "number '" + t.text + "' is out of the range of a double");
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        t.kind = Token::Kind::Ident;
        while (i < text_.size() &&
               (std::isalnum(static_cast<unsigned char>(text_[i])) || text_[i] == '_'))
          t.text += text_[i++];
      } else {
        static const char* twoChar[] = {"<=", ">=", "==", "!="};
        for (const char* op : twoChar)
          if (text_.compare(i, 2, op) == 0) t.text = op;
        if (text_.compare(i, 2, "**") == 0) { // (Python's power: not an operator here)
          diags_.error(locs_[i], "unexpected '**' in formula");
          diags_.note(locs_[i], kPowerNote);
          throw FatalError{};
        }
        if (t.text.empty() && std::string("+-*/%()<>,").find(c) != std::string::npos)
          t.text = std::string(1, c);
        if (t.text.empty()) {
          // What a user of torch or C++ may type, and how a formula says it instead.
          const char* note =
              c == '=' ? "calls take no keyword arguments: a reduction is over the last dim "
                         "(sum(x)), an attr is used by its name" // (== is a comparison, above)
              : c == '|' || c == '&' || c == '!'
                  ? "conditions combine by nesting where(): where(a, v, where(b, v, x)) is v "
                    "where a or b holds, where(a, where(b, v, x), x) where both do, where(a, "
                    "x, v) where a does not"
              : c == '^' ? kPowerNote
                         : nullptr;
          diags_.error(locs_[i], std::string("unexpected character '") + c + "' in formula");
          if (note) diags_.note(locs_[i], note);
          throw FatalError{};
        }
        i += t.text.size();
      }
      out.push_back(t);
    }
    out.push_back(Token{Token::Kind::End, "", 0, static_cast<int>(text_.size())});
    return out;
  }

private:
  const std::string& text_;
  const std::vector<SourceLoc>& locs_;
  Diagnostics& diags_;
};

class Parser {
public:
  Parser(std::vector<Token> tokens, const std::vector<SourceLoc>& locs, Diagnostics& diags)
      : tokens_(std::move(tokens)), locs_(locs), diags_(diags) {}

  AstPtr parse() {
    AstPtr e = comparison();
    if (peek().kind != Token::Kind::End)
      fail(peek(), "unexpected '" + peek().text + "' after the end of the expression");
    return e;
  }

private:
  const Token& peek() const { return tokens_[pos_]; }
  Token next() { return tokens_[pos_++]; }
  bool isPunct(const char* p) const {
    return peek().kind == Token::Kind::Punct && peek().text == p;
  }
  SourceLoc at(const Token& t) const { return locs_[t.offset]; }
  [[noreturn]] void fail(const Token& t, const std::string& msg) { diags_.fatal(at(t), msg); }

  // One level of nesting for as long as it lives: '(' , a call's arguments, a unary '-'.
  class Nested {
  public:
    Nested(Parser& p, const Token& opener) : p_(p) {
      if (++p_.depth_ > kMaxFormulaNesting)
        p_.fail(opener, "the formula nests deeper than " + std::to_string(kMaxFormulaNesting) +
                            " levels (parentheses, calls and unary '-' together); name inner "
                            "parts with 'let'");
    }
    ~Nested() { --p_.depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

  private:
    Parser& p_;
  };

  AstPtr comparison() {
    AstPtr lhs = additive();
    static const std::pair<const char*, const char*> ops[] = {
        {"<", "lt"}, {"<=", "le"}, {">", "gt"}, {">=", "ge"}, {"==", "eq"}, {"!=", "ne"}};
    for (auto [spelling, prim] : ops) {
      if (isPunct(spelling)) {
        Token t = next();
        AstPtr rhs = additive();
        for (auto [s2, p2] : ops)
          if (isPunct(s2))
            fail(peek(), "comparisons cannot be chained; use where() to combine conditions");
        return Ast::makeCall(prim, {lhs, rhs}, at(t), spelling);
      }
    }
    return lhs;
  }

  AstPtr additive() {
    AstPtr lhs = term();
    while (isPunct("+") || isPunct("-")) {
      Token t = next();
      AstPtr rhs = term();
      lhs = Ast::makeCall(t.text == "+" ? "add" : "sub", {lhs, rhs}, at(t), t.text);
    }
    return lhs;
  }

  AstPtr term() {
    AstPtr lhs = unary();
    while (isPunct("*") || isPunct("/") || isPunct("%")) {
      Token t = next();
      AstPtr rhs = unary();
      lhs = Ast::makeCall(t.text == "*"   ? "mul"
                          : t.text == "/" ? "div"
                                          : "mod",
                          {lhs, rhs}, at(t), t.text);
    }
    return lhs;
  }

  AstPtr unary() {
    if (isPunct("-")) {
      Token t = next();
      Nested level(*this, t);
      AstPtr operand = unary();
      if (operand->kind == Ast::Kind::Number)
        return Ast::makeNumber(-operand->number, at(t), operand->integer);
      return Ast::makeCall("neg", {operand}, at(t), "-");
    }
    if (isPunct("+")) fail(peek(), "unary '+' is not supported");
    return primary();
  }

  AstPtr primary() {
    Token t = next();
    if (t.kind == Token::Kind::Number)
      return Ast::makeNumber(t.number, at(t), t.text.find_first_of(".eE") == std::string::npos);
    if (t.kind == Token::Kind::Ident) {
      if (!isPunct("(")) return Ast::makeName(t.text, at(t));
      next();
      Nested level(*this, t);
      std::vector<AstPtr> args;
      if (!isPunct(")")) {
        for (;;) {
          args.push_back(comparison());
          if (isPunct(",")) {
            next();
            continue;
          }
          break;
        }
      }
      if (!isPunct(")"))
        fail(peek(), peek().kind == Token::Kind::End
                         ? "expected ')' to close the call of '" + t.text + "'"
                         : "expected ',' or ')' in the call of '" + t.text + "', found '" +
                               peek().text + "'");
      next();
      return Ast::makeCall(t.text, std::move(args), at(t));
    }
    if (t.kind == Token::Kind::Punct && t.text == "(") {
      Nested level(*this, t);
      AstPtr inner = comparison();
      if (!isPunct(")")) fail(peek(), "expected ')'");
      next();
      return inner;
    }
    if (t.kind == Token::Kind::End) fail(t, "expected an expression");
    fail(t, "expected an expression, found '" + t.text + "'");
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0; // current nesting, see Nested
  const std::vector<SourceLoc>& locs_;
  Diagnostics& diags_;
};

} // namespace

AstPtr parseFormula(const std::string& text, const std::vector<SourceLoc>& charLocs,
                    Diagnostics& diags) {
  try {
    std::vector<Token> tokens = Lexer(text, charLocs, diags).run();
    return Parser(std::move(tokens), charLocs, diags).parse();
  } catch (const FatalError&) {
    return nullptr;
  }
}

AstPtr parseFormula(const std::string& text, const SourceLoc& loc, Diagnostics& diags) {
  std::vector<SourceLoc> locs;
  for (size_t i = 0; i <= text.size(); ++i)
    locs.push_back(loc.shifted(static_cast<int>(i)));
  return parseFormula(text, locs, diags);
}

} // namespace fusegen::expr
