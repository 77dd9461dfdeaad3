// Parser: formula text -> Ast, by precedence climbing.
//   expr       := comparison
//   comparison := additive (('<'|'<='|'>'|'>='|'=='|'!=') additive)?
//   additive   := term (('+'|'-') term)*
//   term       := unary (('*'|'/') unary)*
//   unary      := '-' unary | primary
//   primary    := number | name | name '(' [expr (',' expr)*] ')' | '(' expr ')'
// Operators become calls of the primitives add, sub, mul, div, neg, lt, le, gt, ge, eq, ne.
#pragma once

#include "expr/Ast.h"
#include "support/Diagnostics.h"

namespace fusegen::expr {

// `loc` is where the first character of `text` sits in its file. Returns null (with a
// diagnostic) on a syntax error.
AstPtr parseFormula(const std::string& text, const SourceLoc& loc, Diagnostics& diags);

} // namespace fusegen::expr
