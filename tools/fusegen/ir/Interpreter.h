// Interpreter: evaluates IR on scalars in double precision. It gives constant folding its
// arithmetic and lets the unit tests check every derivative rule against finite
// differences, independently of any generated code.
#pragma once

#include "ir/Node.h"

#include <map>
#include <string>

namespace fusegen::ir {

struct Env {
  std::map<std::string, double> inputs;   // by input name
  std::map<std::string, double> attrs;    // by attr name
  std::map<std::string, double> gradOuts; // by output name
  double D = 1;                           // the length of the last dim
  double rows = 1;                        // the number of rows
  double j = 0;                           // the column index
  std::map<int, double> positions;        // pos(S) by dim index (0 where not given)
  std::map<int, double> random;           // by random stream (absent: 0.5)
};

// Evaluates an elementwise expression; reductions are rejected (they need a row).
double evaluate(const Expr& e, const Env& env);

// Applies one primitive to scalar arguments through its `eval` formula.
double applyPrimitive(const prims::Primitive& prim, const std::vector<double>& args);

} // namespace fusegen::ir
