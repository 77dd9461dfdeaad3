// IR nodes: small immutable expression nodes built only through make*() (as in Halide).
// A node knows its value type (float, integer or condition) and its shape class; passes never
// mutate a node, they build new ones, so expressions can be shared freely as a DAG.
#pragma once

#include "ir/ShapeClass.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fusegen::prims {
struct Primitive; // prims/PrimitiveLibrary.h: what a Call node calls
} // namespace fusegen::prims

namespace fusegen::ir {

enum class NodeKind {
  Const,    // a literal
  Input,    // a tensor input of the op
  Attr,     // a scalar attribute of the op (a Python number in the schema)
  GradOut,  // the incoming gradient of an output (backward only)
  Dim,      // D, the length of the last dim (uniform over the op, like an attr)
  Rows,     // rows, the number of rows (the product of the leading dims; uniform, like D)
  Column,   // j, the column index 0 ... D-1 (shape [D], an integer)
  Random,   // a uniform random number in [0, 1) per element, of random stream index()
  Position, // pos(S): the index along the op's named dim index() (name()), per row, an integer
  Call,     // a primitive applied to arguments
};

// What a node's values are (DESIGN.md: values carry a type):
//   Value  a floating value (the op's compute type); gradients flow through these only
//   Int    an integer: an int input or attr, D, j, and arithmetic closed over integers
//          (+ - * unary -, abs, where, sum, max, min of integers; Primitive::integerClosed),
//          as in torch's type promotion: an integer literal keeps an integer an integer, a
//          float value or a division makes it a Value. Integers carry no gradient.
//   Bool   a condition: a comparison or a bool input
enum class ValueType { Value, Int, Bool };

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

  // A literal: Int for an integer literal (written without '.' or exponent), else Value.
  static Expr makeConst(double v, ValueType type = ValueType::Value);
  static Expr makeInput(const std::string& name, int index, ShapeClass shape,
                        ValueType type = ValueType::Value);
  static Expr makeAttr(const std::string& name, int index, ValueType type = ValueType::Value);
  static Expr makeGradOut(const std::string& name, int index, ShapeClass shape);
  static Expr makeDim();
  static Expr makeRows();
  static Expr makeColumn();
  // Stream `stream` of the op's random numbers ([..., D]; prims::ParamKind::Random): one
  // value per element, drawn from Philox by (seed, offset, stream, element) at run time, so
  // the backward regenerates what the forward drew. Never constant, never differentiated.
  static Expr makeRandom(int stream);
  // pos(S): the row's index along the op's named dim `dim` (spec::OpSpec::dims), [...] and Int:
  // one value per row, like j is one per column. Never constant, never differentiated.
  static Expr makePosition(int dim, const std::string& name);
  bool isLeaf() const { return kind_ != NodeKind::Call; }
  // Shape: reductions give Row, column reductions Col (never constant: a sum over the rows);
  // elementwise calls the join of their arguments' shapes. Type:
  // Bool for a primitive returning a condition; Int for one closed over integers whose value
  // arguments are all Int, at least one not a literal (an integer literal alone does not make
  // a value an integer: where(c, x, 0) is x's type); else Value.
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

// A shared pointer of every node reachable from `roots` (null roots skipped), for passes that
// walk topoOrder's raw pointers and rebuild or refer to nodes.
std::unordered_map<const Node*, Expr> owners(const std::vector<Expr>& roots);

// Whether a and b compute the same value: the same node, or equal nodes (kind, type,
// primitive, name, index, literal) of arguments that compute the same values.
bool sameValue(const Node* a, const Node* b);

// A whole-tensor reduction (sum_all, max_all, min_all: prims::PrimKind::Total).
bool isWholeTensorValue(const Node* n);
// A reduction over rows, one value per column (colsum: prims::PrimKind::Column).
bool isColumnReduction(const Node* n);
// Whether a column reduction is reachable from e (its value needs a pass over every row first).
bool usesColumnReduction(const Expr& e);
// The nodes reachable from `roots` from which a column reduction is reachable (themselves
// included): the values known only after a pass over every row (batch statistics and what
// uses them).
std::unordered_set<const Node*> columnReductionUsers(const std::vector<Expr>& roots);

// `root` with every node that is a key of `replace` swapped for its value (a new DAG;
// shared subexpressions stay shared).
Expr substitute(const Expr& root, const std::unordered_map<const Node*, Expr>& replace);

// One line per node in topological order, for dumps and golden tests: "%3 = mul(%1, %2)".
std::string printDag(const std::vector<std::pair<std::string, Expr>>& roots);

} // namespace fusegen::ir
