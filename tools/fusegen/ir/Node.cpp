// IR node construction, hashing and printing.
#include "ir/Node.h"

#include "prims/PrimitiveLibrary.h"
#include "support/ChainRelease.h"
#include "support/Format.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <unordered_set>

namespace fusegen::ir {

Node::~Node() {
  releaseChildren(args_);
}

bool Node::isCall(const char* primName) const {
  return kind_ == NodeKind::Call && prim_->name == primName;
}

ShapeClass joinShapes(ShapeClass a, ShapeClass b) {
  if (a == b) return a;
  if (a == ShapeClass::Scalar) return b;
  if (b == ShapeClass::Scalar) return a;
  return ShapeClass::Full; // Col with Row, or anything with Full
}

void Node::finish() {
  size_t h = std::hash<int>()(static_cast<int>(kind_) * 4 + static_cast<int>(type_));
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  uint64_t bits;
  std::memcpy(&bits, &value_, sizeof bits);
  mix(bits);
  mix(std::hash<std::string>()(name_));
  mix(static_cast<size_t>(index_));
  mix(std::hash<const void*>()(prim_));
  for (const Expr& a : args_)
    mix(std::hash<const void*>()(a.get()));
  hash_ = h;
}

Expr Node::makeConst(double v, ValueType type) {
  auto n = std::shared_ptr<Node>(new Node());
  n->kind_ = NodeKind::Const;
  n->type_ = type;
  n->value_ = v == 0 ? 0.0 : v; // one zero: -0.0 and 0.0 fold the same way
  n->finish();
  return n;
}

Expr Node::makeInput(const std::string& name, int index, ShapeClass shape, ValueType type) {
  auto n = std::shared_ptr<Node>(new Node());
  n->kind_ = NodeKind::Input;
  n->type_ = type;
  n->name_ = name;
  n->index_ = index;
  n->shape_ = shape;
  n->constant_ = false;
  n->finish();
  return n;
}

Expr Node::makeAttr(const std::string& name, int index, ValueType type) {
  auto n = std::shared_ptr<Node>(new Node());
  n->kind_ = NodeKind::Attr;
  n->type_ = type;
  n->name_ = name;
  n->index_ = index;
  n->finish();
  return n;
}

Expr Node::makeGradOut(const std::string& name, int index, ShapeClass shape) {
  auto n = std::shared_ptr<Node>(new Node());
  n->kind_ = NodeKind::GradOut;
  n->name_ = name;
  n->index_ = index;
  n->shape_ = shape;
  n->constant_ = false;
  n->finish();
  return n;
}

Expr Node::makeDim() {
  auto n = std::shared_ptr<Node>(new Node());
  n->kind_ = NodeKind::Dim;
  n->type_ = ValueType::Int;
  n->name_ = "D";
  n->finish();
  return n;
}

Expr Node::makeRows() {
  auto n = std::shared_ptr<Node>(new Node());
  n->kind_ = NodeKind::Rows;
  n->type_ = ValueType::Int;
  n->name_ = "rows";
  n->finish();
  return n;
}

Expr Node::makeColumn() {
  auto n = std::shared_ptr<Node>(new Node());
  n->kind_ = NodeKind::Column;
  n->type_ = ValueType::Int;
  n->shape_ = ShapeClass::Col;
  n->name_ = "j";
  n->constant_ = false; // one value per column
  n->finish();
  return n;
}

Expr Node::makePosition(int dim, const std::string& name) {
  auto n = std::shared_ptr<Node>(new Node());
  n->kind_ = NodeKind::Position;
  n->type_ = ValueType::Int;
  n->shape_ = ShapeClass::Row;
  n->name_ = name;
  n->index_ = dim;
  n->constant_ = false; // one value per row
  n->finish();
  return n;
}

Expr Node::makeRandom(int stream) {
  auto n = std::shared_ptr<Node>(new Node());
  n->kind_ = NodeKind::Random;
  n->shape_ = ShapeClass::Full;
  n->name_ = "_u" + std::to_string(stream);
  n->index_ = stream;
  n->constant_ = false; // one value per element
  n->finish();
  return n;
}

Expr Node::makeCall(const prims::Primitive* prim, std::vector<Expr> args) {
  auto n = std::shared_ptr<Node>(new Node());
  n->kind_ = NodeKind::Call;
  n->prim_ = prim;
  n->shape_ = ShapeClass::Scalar;
  n->constant_ = true;
  bool integers = prim->integerClosed, someInteger = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (prim->params[i].kind != prims::ParamKind::Value) continue;
    const Node& a = *args[i];
    someInteger = someInteger || (a.type_ == ValueType::Int && a.kind_ != NodeKind::Const);
    integers = integers && a.type_ == ValueType::Int;
  }
  n->type_ = prim->returnsBool         ? ValueType::Bool
             : integers && someInteger ? ValueType::Int
                                       : ValueType::Value;
  for (const Expr& a : args) {
    n->shape_ = joinShapes(n->shape_, a->shape());
    n->constant_ = n->constant_ && a->isConstant();
  }
  if (prim->kind == prims::PrimKind::Reduction) n->shape_ = ShapeClass::Row;
  if (prim->kind == prims::PrimKind::Total) n->shape_ = ShapeClass::Scalar;
  if (prim->kind == prims::PrimKind::Column) {
    n->shape_ = ShapeClass::Col;
    n->constant_ = false;
  }
  n->args_ = std::move(args);
  n->finish();
  return n;
}

bool Node::shallowEquals(const Node& o) const {
  if (kind_ != o.kind_ || type_ != o.type_ || prim_ != o.prim_ || name_ != o.name_ ||
      index_ != o.index_ || args_.size() != o.args_.size() ||
      std::memcmp(&value_, &o.value_, sizeof value_) != 0)
    return false;
  for (size_t i = 0; i < args_.size(); ++i)
    if (args_[i].get() != o.args_[i].get()) return false;
  return true;
}

std::unordered_map<const Node*, Expr> owners(const std::vector<Expr>& roots) {
  std::unordered_map<const Node*, Expr> owner;
  for (const Expr& r : roots)
    if (r) owner[r.get()] = r;
  for (const Node* n : topoOrder(roots))
    for (const Expr& a : n->args())
      owner[a.get()] = a;
  return owner;
}

bool sameValue(const Node* a, const Node* b) {
  if (a == b) return true;
  if (a->kind() != b->kind() || a->type() != b->type() || a->prim() != b->prim() ||
      a->name() != b->name() || a->index() != b->index() || a->args().size() != b->args().size() ||
      !(a->value() == b->value() || (std::isnan(a->value()) && std::isnan(b->value()))))
    return false;
  for (size_t i = 0; i < a->args().size(); ++i)
    if (!sameValue(a->args()[i].get(), b->args()[i].get())) return false;
  return true;
}

bool isWholeTensorValue(const Node* n) {
  return n->kind() == NodeKind::Call && n->prim()->kind == prims::PrimKind::Total;
}

bool isColumnReduction(const Node* n) {
  return n->kind() == NodeKind::Call && n->prim()->kind == prims::PrimKind::Column;
}

bool usesColumnReduction(const Expr& e) {
  return columnReductionUsers({e}).count(e.get()) > 0;
}

std::unordered_set<const Node*> columnReductionUsers(const std::vector<Expr>& roots) {
  std::unordered_set<const Node*> users;
  for (const Node* n : topoOrder(roots)) {
    bool uses = isColumnReduction(n);
    for (const Expr& a : n->args())
      uses = uses || users.count(a.get());
    if (uses) users.insert(n);
  }
  return users;
}

std::vector<const Node*> topoOrder(const std::vector<Expr>& roots) {
  std::vector<const Node*> order;
  std::unordered_set<const Node*> seen;
  // Iterative post-order so deep expressions cannot overflow the stack.
  std::vector<std::pair<const Node*, size_t>> stack;
  for (const Expr& r : roots) {
    if (!r || seen.count(r.get())) continue;
    stack.emplace_back(r.get(), 0);
    seen.insert(r.get());
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->args().size()) {
        const Node* child = node->args()[next++].get();
        if (seen.insert(child).second) stack.emplace_back(child, 0);
        continue;
      }
      order.push_back(node);
      stack.pop_back();
    }
  }
  return order;
}

Expr substitute(const Expr& root, const std::unordered_map<const Node*, Expr>& replace) {
  if (!root) return root;
  std::unordered_map<const Node*, Expr> done(replace.begin(), replace.end());
  auto get = [&done](const Expr& e) {
    auto it = done.find(e.get());
    return it == done.end() ? e : it->second;
  };
  for (const Node* n : topoOrder({root})) {
    if (n->kind() != NodeKind::Call || replace.count(n)) continue;
    std::vector<Expr> args;
    bool changed = false;
    for (const Expr& a : n->args()) {
      args.push_back(get(a));
      changed = changed || args.back().get() != a.get();
    }
    if (changed) done[n] = Node::makeCall(n->prim(), std::move(args));
  }
  return get(root);
}

std::string printDag(const std::vector<std::pair<std::string, Expr>>& roots) {
  std::vector<Expr> exprs;
  for (const auto& r : roots)
    exprs.push_back(r.second);
  std::map<const Node*, std::string> names;
  std::ostringstream out;
  int next = 0;
  for (const Node* n : topoOrder(exprs)) {
    switch (n->kind()) {
    case NodeKind::Const:
      names[n] = formatDouble(n->value());
      continue;
    case NodeKind::Input:
      names[n] = n->name();
      continue;
    case NodeKind::Attr:
      names[n] = "attr." + n->name();
      continue;
    case NodeKind::GradOut:
      names[n] = "grad." + n->name();
      continue;
    case NodeKind::Dim:
      names[n] = "D";
      continue;
    case NodeKind::Rows:
      names[n] = "rows";
      continue;
    case NodeKind::Column:
      names[n] = "j";
      continue;
    case NodeKind::Random:
      names[n] = "rand" + std::to_string(n->index());
      continue;
    case NodeKind::Position:
      names[n] = "pos(" + n->name() + ")";
      continue;
    case NodeKind::Call:
      break;
    }
    std::string id = "%" + std::to_string(next++);
    out << id << " = " << n->prim()->name << "(";
    for (size_t i = 0; i < n->args().size(); ++i)
      out << (i ? ", " : "") << names[n->args()[i].get()];
    out << ")  " << shapeClassSpelling(n->shape()) << "\n";
    names[n] = id;
  }
  for (const auto& [label, e] : roots)
    out << label << " = " << (e ? names[e.get()] : "0") << "\n";
  return out.str();
}

} // namespace fusegen::ir
