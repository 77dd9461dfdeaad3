// Pushing moves down to the leaves (opt/Moves.h).
#include "opt/Moves.h"

#include <map>
#include <tuple>

namespace fusegen::opt {

namespace {

bool columnInvariant(const ir::Node* e) {
  return e->isConstant() || e->shape() == ir::ShapeClass::Row ||
         e->shape() == ir::ShapeClass::Scalar;
}

// A move as the pusher applies it: its primitive, and its shift where it has one (a roll's k).
struct MoveOp {
  const prims::Primitive* prim;
  ir::Expr shift; // null: a move without parameters (the swaps)
};

MoveOp moveOf(const ir::Node* n) {
  return {n->prim(), n->args().size() > 1 ? n->args()[1] : nullptr};
}

class Pusher {
public:
  explicit Pusher(const prims::PrimitiveLibrary& lib) : lib_(lib) {
    for (const auto& p : lib.all())
      if (p->kind == prims::PrimKind::Move && p->move == prims::Move::Roll) roll_ = p.get();
  }

  // `m`(e), e already pushed (moves only on leaves), as a DAG with moves only on leaves.
  ir::Expr push(const MoveOp& m, const ir::Expr& e) {
    if (columnInvariant(e.get()) || identity(m)) return e;
    const auto key = std::make_tuple(m.prim, m.shift.get(), e.get());
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    ir::Expr out;
    if (e->kind() == ir::NodeKind::Call && e->prim()->kind == prims::PrimKind::Move)
      out = compose(m, e); // (e is a moved leaf)
    else if (isLeafView(e.get()))
      out = apply(m, e); // read at the moved column (Random: Sema refused)
    else {
      std::vector<ir::Expr> args;
      for (const ir::Expr& a : e->args())
        args.push_back(push(m, a));
      out = ir::Node::makeCall(e->prim(), std::move(args));
    }
    memo_[key] = out;
    return out;
  }

  std::string failure;

private:
  static ir::Expr apply(const MoveOp& m, const ir::Expr& leaf) {
    std::vector<ir::Expr> args{leaf};
    if (m.shift) args.push_back(m.shift);
    return ir::Node::makeCall(m.prim, std::move(args));
  }

  // A roll by a literal 0.
  static bool identity(const MoveOp& m) {
    return m.prim->move == prims::Move::Roll && m.shift && m.shift->isConst(0);
  }

  // m as a roll's shift: a roll's own, swap_halves' D/2 (exact: it needs an even D); null for
  // a move that is no roll (or a library without a roll to compose into).
  ir::Expr asRoll(const MoveOp& m) const {
    if (!roll_) return nullptr;
    if (m.prim->move == prims::Move::Roll) return m.shift;
    if (m.prim->move == prims::Move::SwapHalves)
      return ir::Node::makeCall(lib_.find("div", 2),
                                {ir::Node::makeDim(), ir::Node::makeConst(2, ir::ValueType::Int)});
    return nullptr;
  }

  // a + b, folded where that is plain: literals, a zero, a shift and its negation.
  ir::Expr sum(const ir::Expr& a, const ir::Expr& b) const {
    if (a->kind() == ir::NodeKind::Const && b->kind() == ir::NodeKind::Const)
      return ir::Node::makeConst(a->value() + b->value(),
                                 a->type() == ir::ValueType::Int && b->type() == ir::ValueType::Int
                                     ? ir::ValueType::Int
                                     : ir::ValueType::Value);
    if (a->isConst(0)) return b;
    if (b->isConst(0)) return a;
    auto negates = [](const ir::Expr& x, const ir::Expr& y) {
      return x->isCall("neg") && ir::sameValue(x->args()[0].get(), y.get());
    };
    if (negates(a, b) || negates(b, a)) return ir::Node::makeConst(0, ir::ValueType::Int);
    return ir::Node::makeCall(lib_.find("add", 2), {a, b});
  }

  // outer(inner(leaf)), `moved` being inner(leaf): its value at j is leaf[inner(outer(j))].
  ir::Expr compose(const MoveOp& outer, const ir::Expr& moved) {
    const MoveOp inner = moveOf(moved.get());
    const ir::Expr& leaf = moved->args()[0];
    if (outer.prim->move == inner.prim->move && prims::moveSelfInverse(outer.prim->move))
      return leaf; // (a swap twice)
    const ir::Expr a = asRoll(outer), b = asRoll(inner);
    if (prims::movesCompose(outer.prim->move, inner.prim->move) && a && b) {
      const MoveOp r{roll_, sum(a, b)}; // rolls add their shifts
      return identity(r) ? leaf : apply(r, leaf);
    }
    failure = "'" + outer.prim->name + "' of a value moved by '" + inner.prim->name + "'";
    return moved;
  }

  const prims::PrimitiveLibrary& lib_;
  const prims::Primitive* roll_ = nullptr;
  std::map<std::tuple<const prims::Primitive*, const ir::Node*, const ir::Node*>, ir::Expr> memo_;
};

} // namespace

bool isLeafView(const ir::Node* n) {
  return n->isLeaf() || (n->isCall("chunk") && n->args()[0]->isLeaf());
}

bool isMovedLeaf(const ir::Node* n) {
  return n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Move &&
         isLeafView(n->args()[0].get());
}

ir::Expr rollShift(const ir::Node* n) {
  return n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Move &&
                 n->prim()->move == prims::Move::Roll
             ? n->args()[1]
             : nullptr;
}

PushedMoves pushMoves(const std::vector<ir::Expr>& roots, const prims::PrimitiveLibrary& lib) {
  PushedMoves out;
  const std::unordered_map<const ir::Node*, ir::Expr> owned = ir::owners(roots);
  Pusher pusher(lib);
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
    // (A moved leaf stays the node it is, but a roll by 0: the leaf.)
    if (n->prim()->kind == prims::PrimKind::Move &&
        (changed || !isMovedLeaf(n) || (rollShift(n) && rollShift(n)->isConst(0))))
      out.rebuilt[n] = pusher.push({n->prim(), args.size() > 1 ? args[1] : nullptr}, args[0]);
    else
      out.rebuilt[n] = changed ? ir::Node::makeCall(n->prim(), std::move(args)) : self;
  }
  for (const ir::Expr& r : roots)
    out.values.push_back(r ? out.rebuilt.at(r.get()) : nullptr);
  out.failure = pusher.failure;
  return out;
}

} // namespace fusegen::opt
