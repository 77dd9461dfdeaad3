// Pushing moves down to the leaves (opt/Moves.h).
#include "opt/Moves.h"

#include "prims/PrimitiveLibrary.h"

#include <map>

namespace fusegen::opt {

namespace {

bool columnInvariant(const ir::Node* e) {
  return e->isConstant() || e->shape() == ir::ShapeClass::Row ||
         e->shape() == ir::ShapeClass::Scalar;
}

class Pusher {
public:
  // `move`(e), e already pushed (moves only on leaves), as a DAG with moves only on leaves.
  ir::Expr push(const prims::Primitive* move, const ir::Expr& e) {
    if (columnInvariant(e.get())) return e;
    auto key = std::make_pair(move, e.get());
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    ir::Expr out;
    if (e->kind() == ir::NodeKind::Call && e->prim()->kind == prims::PrimKind::Move) {
      if (e->prim()->move == move->move) {
        out = e->args()[0]; // each move is its own inverse
      } else {
        failure = "'" + move->name + "' of a value moved by '" + e->prim()->name + "'";
        out = e;
      }
    } else if (isLeafView(e.get())) {
      out = ir::Node::makeCall(move, {e}); // read at the moved column (Random: Sema refused)
    } else {
      std::vector<ir::Expr> args;
      for (const ir::Expr& a : e->args())
        args.push_back(push(move, a));
      out = ir::Node::makeCall(e->prim(), std::move(args));
    }
    memo_[key] = out;
    return out;
  }

  std::string failure;

private:
  std::map<std::pair<const prims::Primitive*, const ir::Node*>, ir::Expr> memo_;
};

} // namespace

bool isLeafView(const ir::Node* n) {
  return n->isLeaf() || (n->isCall("chunk") && n->args()[0]->isLeaf());
}

bool isMovedLeaf(const ir::Node* n) {
  return n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Move &&
         isLeafView(n->args()[0].get());
}

PushedMoves pushMoves(const std::vector<ir::Expr>& roots) {
  PushedMoves out;
  const std::unordered_map<const ir::Node*, ir::Expr> owned = ir::owners(roots);
  Pusher pusher;
  for (const ir::Node* n : ir::topoOrder(roots)) {
    ir::Expr self = owned.at(n);
    if (isLeafView(n)) {
      out.rebuilt[n] = self;
      continue;
    }
    std::vector<ir::Expr> args;
    bool changed = false;
    for (const ir::Expr& a : n->args()) {
      args.push_back(out.rebuilt.at(a.get()));
      changed = changed || args.back() != a;
    }
    if (n->prim()->kind == prims::PrimKind::Move && !isMovedLeaf(n))
      out.rebuilt[n] = pusher.push(n->prim(), args[0]);
    else
      out.rebuilt[n] = changed ? ir::Node::makeCall(n->prim(), std::move(args)) : self;
  }
  for (const ir::Expr& r : roots)
    out.values.push_back(r ? out.rebuilt.at(r.get()) : nullptr);
  out.failure = pusher.failure;
  return out;
}

} // namespace fusegen::opt
