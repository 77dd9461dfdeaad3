// IR nodes: small immutable expression nodes built only through make*() (as in Halide).
// A node knows its value type (value or condition) and its shape class; passes never mutate
// a node, they build new ones, so expressions can be shared freely as a DAG.
#pragma once

#include "ir/ShapeClass.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace fusegen::prims {
struct Primitive; // prims/PrimitiveLibrary.h: what a Call node calls
} // namespace fusegen::prims

namespace fusegen::ir {

enum class NodeKind {
  Const,   // a literal
  Input,   // a tensor input of the op
  Attr,    // a scalar attribute of the op (a Python number in the schema)
  GradOut, // the incoming gradient of an output (backward only)
  Dim,     // D, the length of the last dim (uniform over the op, like an attr)
  Call,    // a primitive applied to arguments
};

enum class ValueType { Value, Bool };

class Node;
using Expr = std::shared_ptr<const Node>;

class Node {
public:
  ~Node(); // frees deep chains of arguments iteratively (support/ChainRelease.h)

  NodeKind kind() const { return kind_; }
  ValueType type() const { return type_; }
  ShapeClass shape() const { return shape_; }
  double value() const { return value_; }                 // Const
  const std::string& name() const { return name_; }       // Input, Attr, GradOut
  int index() const { return index_; }                    // Input, Attr, GradOut position
  const prims::Primitive* prim() const { return prim_; }  // Call
  const std::vector<Expr>& args() const { return args_; } // Call
  // True when no Input or GradOut is reachable: the value is the same for every element.
  bool isConstant() const { return constant_; }
  size_t hash() const { return hash_; }

  bool isConst(double v) const { return kind_ == NodeKind::Const && value_ == v; }
  bool isCall(const char* primName) const;

  static Expr makeConst(double v);
  static Expr makeInput(const std::string& name, int index, ShapeClass shape);
  static Expr makeAttr(const std::string& name, int index);
  static Expr makeGradOut(const std::string& name, int index, ShapeClass shape);
  static Expr makeDim();
  bool isLeaf() const { return kind_ != NodeKind::Call; }
  // Shape: reductions give Row; elementwise calls the join of their arguments' shapes.
  static Expr makeCall(const prims::Primitive* prim, std::vector<Expr> args);

  // Structural equality of the node itself, with arguments compared by identity.
  bool shallowEquals(const Node& other) const;

private:
  Node() = default;
  void finish();

  NodeKind kind_ = NodeKind::Const;
  ValueType type_ = ValueType::Value;
  ShapeClass shape_ = ShapeClass::Scalar;
  double value_ = 0;
  std::string name_;
  int index_ = -1;
  const prims::Primitive* prim_ = nullptr;
  std::vector<Expr> args_;
  bool constant_ = true;
  size_t hash_ = 0;
};

// The least shape class that both broadcast to: [] < [D], [...] < [..., D].
ShapeClass joinShapes(ShapeClass a, ShapeClass b);

// Nodes reachable from `roots`, each once, arguments before users (a topological order).
std::vector<const Node*> topoOrder(const std::vector<Expr>& roots);

// `root` with every node that is a key of `replace` swapped for its value (a new DAG;
// shared subexpressions stay shared).
Expr substitute(const Expr& root, const std::unordered_map<const Node*, Expr>& replace);

// One line per node in topological order, for dumps and golden tests: "%3 = mul(%1, %2)".
std::string printDag(const std::vector<std::pair<std::string, Expr>>& roots);

} // namespace fusegen::ir
