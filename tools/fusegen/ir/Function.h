// Function: the IR of one op, as lowered from its spec: named inputs, attrs and outputs,
// each output an expression DAG over the inputs and attrs.
#pragma once

#include "ir/Node.h"
#include "specfile/SpecModel.h"

#include <string>
#include <vector>

namespace fusegen::ir {

struct FunctionInput {
  std::string name;
  ShapeClass shape;
  Expr node;
  spec::InputType type = spec::InputType::Dtype; // integer and bool inputs: no gradient
  int chunks = 1; // a packed last dim [..., chunks*D], read through chunk(x, c, chunks)
};

struct FunctionAttr {
  spec::Attr attr;
  Expr node;
};

struct FunctionOutput {
  std::string name;
  Expr value;
  spec::OutputType type = spec::OutputType::Dtype; // its own type: no gradient flows through it
  // An output assembled from parts, `y: cat(a, b)`: [..., n*D], part c at columns c*D...; its
  // value is the sum of place(part c, c, n), through which reverse mode reads each part's
  // gradient as a chunk of the packed output gradient. Empty: an output of one part.
  std::vector<Expr> parts = {};
  bool differentiable() const { return type == spec::OutputType::Dtype; }
};

struct Function {
  std::string name;
  std::vector<FunctionInput> inputs;
  std::vector<FunctionAttr> attrs;
  std::vector<FunctionOutput> outputs;
  std::vector<std::pair<std::string, Expr>> lets; // the spec's named intermediates
  std::vector<Expr> randomStreams; // stream k's node (NodeKind::Random), as Sema made them
};

} // namespace fusegen::ir
