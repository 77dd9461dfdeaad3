// Ast: the syntax tree of one formula (a spec's let/output, a primitive's eval or derivative
// rule). Immutable; names are resolved later by Sema against a scope.
#pragma once

#include "support/SourceLoc.h"

#include <memory>
#include <string>
#include <vector>

namespace fusegen::expr {

struct Ast;
using AstPtr = std::shared_ptr<const Ast>;

struct Ast {
  enum class Kind {
    Number, // 1.5, 1e-6
    Name,   // x, eps
    Call,   // f(a, b); operators are Calls too, with `op` set
  };
  Kind kind;
  double number = 0;
  bool integer = false; // a Number written without '.' or exponent: an integer literal
  std::string name;     // identifier, or for operators the function they mean (add, lt, ...)
  std::string op;       // operator spelling ("+", "<", "-" for negation), empty for calls
  std::vector<AstPtr> args;
  SourceLoc loc;

  ~Ast(); // frees deep chains of arguments iteratively (support/ChainRelease.h)

  static AstPtr makeNumber(double v, SourceLoc loc, bool integer = false);
  static AstPtr makeName(std::string name, SourceLoc loc);
  static AstPtr makeCall(std::string name, std::vector<AstPtr> args, SourceLoc loc,
                         std::string op = "");
};

// Prints the tree back in the formula syntax, fully parenthesized (for dumps and tests).
std::string toString(const AstPtr& ast);

} // namespace fusegen::expr
