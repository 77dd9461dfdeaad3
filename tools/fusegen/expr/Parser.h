// Parser: formula text -> Ast, by precedence climbing.
//   expr       := comparison
//   comparison := additive (('<'|'<='|'>'|'>='|'=='|'!=') additive)?
//   additive   := term (('+'|'-') term)*
//   term       := unary (('*'|'/') unary)*
//   unary      := '-' unary | primary
//   primary    := number | name | name '(' [expr (',' expr)*] ')' | '(' expr ')'
// Operators become calls of the primitives add, sub, mul, div, neg, lt, le, gt, ge, eq, ne.
// Nesting (parentheses, call arguments and unary '-', counted together) is limited to
// kMaxFormulaNesting levels, reported at the token that goes past it; flat chains such as
// a + b + ... + z are loops here and have no limit (later stages walk them iteratively).
#pragma once

#include "expr/Ast.h"
#include "support/Diagnostics.h"

namespace fusegen::expr {

constexpr int kMaxFormulaNesting = 256;

// `charLocs` gives the location of each character of `text` and of its end (see
// support/FormulaLocator.h). Returns null (with a diagnostic) on a syntax error.
AstPtr parseFormula(const std::string& text, const std::vector<SourceLoc>& charLocs,
                    Diagnostics& diags);
// The same for text that sits on one line starting at `loc`.
AstPtr parseFormula(const std::string& text, const SourceLoc& loc, Diagnostics& diags);

} // namespace fusegen::expr
