// Moves pushed down to the leaves (opt/Moves.h): the pushed expression equals the expression
// with its moves applied where they were, on every column of a row (the row interpreter moves
// columns itself); moves of one kind cancel; rolls compose into one roll, with each other and
// with swap_halves (a roll by D/2); every move's derivative rule (primitives.yaml data) is its
// inverse; a value the same in every column is not moved; the primitive library's checks of
// move and expand entries.
#include "RowInterpreter.h"
#include "TestUtil.h"
#include "opt/Moves.h"

#include <gtest/gtest.h>

#include <numeric>

namespace fusegen {
namespace {

using test::call;
using test::evalRow;
using test::RowEnv;

bool movesOnLeavesOnly(const ir::Expr& e) {
  for (const ir::Node* n : ir::topoOrder({e}))
    if (n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Move &&
        !opt::isMovedLeaf(n))
      return false;
  return true;
}

// The moves (a node of them) reachable from e.
std::vector<const ir::Node*> movesIn(const ir::Expr& e) {
  std::vector<const ir::Node*> out;
  for (const ir::Node* n : ir::topoOrder({e}))
    if (n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Move)
      out.push_back(n);
  return out;
}

ir::Expr integer(double v) {
  return ir::Node::makeConst(v, ir::ValueType::Int);
}

// A row of D values, none equal to another.
std::vector<double> row(int D, double seed) {
  std::vector<double> v(static_cast<size_t>(D));
  for (int j = 0; j < D; ++j)
    v[static_cast<size_t>(j)] = seed + 1.37 * j - 0.21 * j * j;
  return v;
}

RowEnv env(int D) {
  RowEnv e;
  e.D = D;
  e.inputs["x"] = row(D, 0.3);
  e.inputs["y"] = row(D, -1.1);
  e.inputs["w"] = row(D, 0.8);
  e.inputs["r"] = std::vector<double>(static_cast<size_t>(D), 0.7);
  e.attrs["k"] = -3;
  return e;
}

// The ways to move a value: the swaps, and rolls by literals of either sign and past D, by an
// int attr and by a formula of it and D.
std::vector<std::function<ir::Expr(const ir::Expr&)>> moves() {
  const ir::Expr k = ir::Node::makeAttr("k", 0, ir::ValueType::Int);
  std::vector<std::function<ir::Expr(const ir::Expr&)>> out;
  for (const char* swap : {"swap_halves", "swap_pairs"})
    out.push_back([swap](const ir::Expr& e) { return call(swap, {e}); });
  for (ir::Expr shift : {integer(1), integer(-2), integer(9), k,
                         call("add", {call("neg", {k}), ir::Node::makeDim()})})
    out.push_back([shift](const ir::Expr& e) { return call("roll", {e, shift}); });
  return out;
}

TEST(Moves, PushedExpressionEqualsTheOriginalOnEveryColumn) {
  const ir::Expr x = ir::Node::makeInput("x", 0, ir::ShapeClass::Full);
  const ir::Expr w = ir::Node::makeInput("w", 1, ir::ShapeClass::Col);
  const ir::Expr r = ir::Node::makeInput("r", 2, ir::ShapeClass::Row);
  const ir::Expr j = ir::Node::makeColumn();
  int tested = 0;
  for (const auto& move : moves()) {
    SCOPED_TRACE("move " + std::to_string(tested++));
    // move(g * sin)-like: a product of inputs, a per-row value, j and a nested move of the
    // same kind (which cancels or composes), under a where on j.
    const ir::Expr inner = call("mul", {call("add", {x, r}), w});
    const ir::Expr e =
        move(call("where", {call("lt", {j, integer(2)}), call("mul", {inner, move(x)}),
                            call("exp", {call("sum", {x})})}));
    const opt::PushedMoves pushed = opt::pushMoves({e}, test::library());
    ASSERT_TRUE(pushed.failure.empty()) << pushed.failure;
    EXPECT_TRUE(movesOnLeavesOnly(pushed.values[0]));
    for (int D : {6, 8}) // (even: the swaps need it)
      EXPECT_EQ(evalRow(pushed.values[0], env(D)), evalRow(e, env(D))) << "D = " << D;
  }
}

TEST(Moves, SameKindCancelsAndColumnInvariantValuesStay) {
  const ir::Expr x = ir::Node::makeInput("x", 0, ir::ShapeClass::Full);
  const ir::Expr r = ir::Node::makeInput("r", 1, ir::ShapeClass::Row);
  const opt::PushedMoves twice =
      opt::pushMoves({call("swap_halves", {call("swap_halves", {x})})}, test::library());
  EXPECT_EQ(twice.values[0], x);
  // A per-row value inside: only x is moved.
  const opt::PushedMoves mixed =
      opt::pushMoves({call("swap_pairs", {call("mul", {x, r})})}, test::library());
  const ir::Expr& m = mixed.values[0];
  ASSERT_TRUE(m->isCall("mul"));
  EXPECT_TRUE(opt::isMovedLeaf(m->args()[0].get()));
  EXPECT_EQ(m->args()[1], r);
  // A roll by 0 is no move.
  const opt::PushedMoves zero =
      opt::pushMoves({call("mul", {call("roll", {x, integer(0)}), r})}, test::library());
  EXPECT_TRUE(movesIn(zero.values[0]).empty());
}

// roll(roll(x, a), b) is roll(x, a + b) (literals folded); a roll and its inverse cancel; a
// roll of swap_halves (and the reverse) is a roll by D/2 more; on rows of odd and even D.
TEST(Moves, RollsComposeIntoOneRoll) {
  const ir::Expr x = ir::Node::makeInput("x", 0, ir::ShapeClass::Full);
  const ir::Expr y = ir::Node::makeInput("y", 1, ir::ShapeClass::Full);
  const ir::Expr k = ir::Node::makeAttr("k", 0, ir::ValueType::Int);
  auto roll = [](const ir::Expr& e, const ir::Expr& s) { return call("roll", {e, s}); };
  auto pushed = [](const ir::Expr& e) {
    const opt::PushedMoves p = opt::pushMoves({e}, test::library());
    EXPECT_TRUE(p.failure.empty()) << p.failure;
    return p.values[0];
  };
  // Literal shifts: one roll by their sum.
  const ir::Expr lit = roll(call("mul", {roll(x, integer(2)), y}), integer(-5));
  const ir::Expr litPushed = pushed(lit);
  for (int D : {5, 6, 7})
    EXPECT_EQ(evalRow(litPushed, env(D)), evalRow(lit, env(D)));
  bool folded = false;
  for (const ir::Node* m : movesIn(litPushed))
    folded = folded || (m->args()[0] == x && m->args()[1]->isConst(-3));
  EXPECT_TRUE(folded) << "roll(roll(x, 2), -5) is roll(x, -3)";
  // A roll and its inverse: nothing moved, by literals and by an attr.
  EXPECT_EQ(pushed(roll(roll(x, integer(4)), integer(-4))), x);
  EXPECT_EQ(pushed(roll(roll(x, k), call("neg", {k}))), x);
  EXPECT_EQ(pushed(roll(roll(x, call("neg", {k})), k)), x);
  // With swap_halves, in either order: one roll (by k + D/2), equal on even rows.
  for (const ir::Expr& e : {roll(call("swap_halves", {call("exp", {x})}), k),
                            call("swap_halves", {call("exp", {roll(x, k)})})}) {
    const ir::Expr p = pushed(e);
    const std::vector<const ir::Node*> ms = movesIn(p);
    ASSERT_EQ(ms.size(), 1u);
    EXPECT_TRUE(ms[0]->isCall("roll") && ms[0]->args()[0] == x);
    for (int D : {4, 6, 10})
      EXPECT_EQ(evalRow(p, env(D)), evalRow(e, env(D))) << "D = " << D;
  }
}

// Every move's derivative rule, read from primitives.yaml and derived by reverse mode, is its
// inverse: the move of its rule's value (the gradient as the input) pushes to the gradient
// itself, and the row interpreter agrees, for D odd (rolls) and even.
TEST(Moves, EveryMoveRuleIsItsInverse) {
  std::set<std::string> tested;
  for (const auto& pp : test::library().all()) {
    const prims::Primitive& p = *pp;
    if (p.kind != prims::PrimKind::Move) continue;
    for (const std::string& args : p.params.size() > 1
                                      ? std::vector<std::string>{", 3", ", -8", ", k", ", D - k"}
                                      : std::vector<std::string>{""}) {
      SCOPED_TRACE(p.name + "(x" + args + ")");
      test::Lowered l = test::lowerSpec("op: t\ninputs:\n  x: [..., D]\nattrs:\n  k: {type: int, "
                                        "default: 2}\noutputs:\n  y: " +
                                        p.name + "(x" + args + ")\n");
      ASSERT_TRUE(l.fn) << l.messages;
      const autodiff::Gradient g = test::gradientOf(*l.fn);
      const ir::Expr& y = l.fn->outputs[0].value;
      const ir::Expr& adjoint = g.inputGrads[0]; // the rule, of the gradient of y
      ASSERT_TRUE(adjoint);
      // move(rule(g)): the move of y applied to its adjoint, g the only leaf.
      std::unordered_map<const ir::Node*, ir::Expr> swap{{y->args()[0].get(), adjoint}};
      const ir::Expr e = ir::substitute(y, swap);
      const opt::PushedMoves pushed = opt::pushMoves({e}, test::library());
      ASSERT_TRUE(pushed.failure.empty()) << pushed.failure;
      ASSERT_EQ(pushed.values[0]->kind(), ir::NodeKind::GradOut) << ir::printDag({{"e", e}});
      for (int D : moveNeedsEvenD(p.move) ? std::vector<int>{6} : std::vector<int>{5, 6}) {
        RowEnv point = env(D);
        point.attrs["k"] = 2;
        point.gradOuts["y"] = row(D, 2.5);
        EXPECT_EQ(evalRow(e, point), point.gradOuts["y"]) << "D = " << D;
      }
    }
    tested.insert(p.name);
  }
  for (const char* name : {"swap_halves", "swap_pairs", "roll"})
    EXPECT_TRUE(tested.count(name)) << name;
}

TEST(Moves, ColumnsOfTheMovesAreTorchs) {
  // roll: torch.roll(x, k, -1)[j] = x[(j - k) mod D], for any k.
  for (long long D : {1, 5, 8})
    for (long long k : {0LL, 1LL, -1LL, 3LL, -7LL, 8LL, 1000003LL, -1000003LL})
      for (long long j = 0; j < D; ++j)
        EXPECT_EQ(prims::moveColumn(prims::Move::Roll, j, D, k), (((j - k) % D) + D) % D);
  EXPECT_EQ(prims::moveColumn(prims::Move::SwapHalves, 1, 6), 4);
  EXPECT_EQ(prims::moveColumn(prims::Move::SwapPairs, 4, 6), 5);
  EXPECT_TRUE(prims::movesCompose(prims::Move::Roll, prims::Move::SwapHalves));
  EXPECT_TRUE(prims::movesCompose(prims::Move::SwapHalves, prims::Move::Roll));
  EXPECT_TRUE(prims::movesCompose(prims::Move::SwapPairs, prims::Move::SwapPairs));
  EXPECT_FALSE(prims::movesCompose(prims::Move::SwapPairs, prims::Move::Roll));
  EXPECT_FALSE(prims::movesCompose(prims::Move::SwapHalves, prims::Move::SwapPairs));
}

TEST(Moves, MovesThatDoNotComposeAreAFailure) {
  const ir::Expr x = ir::Node::makeInput("x", 0, ir::ShapeClass::Full);
  const ir::Expr y = ir::Node::makeInput("y", 1, ir::ShapeClass::Full);
  const opt::PushedMoves p = opt::pushMoves(
      {call("swap_halves", {call("mul", {x, call("swap_pairs", {y})})})}, test::library());
  EXPECT_EQ(p.failure, "'swap_halves' of a value moved by 'swap_pairs'");
  const opt::PushedMoves q = opt::pushMoves(
      {call("roll", {call("exp", {call("swap_pairs", {y})}), integer(2)})}, test::library());
  EXPECT_EQ(q.failure, "'roll' of a value moved by 'swap_pairs'");
  const opt::PushedMoves r = opt::pushMoves(
      {call("swap_pairs", {call("exp", {call("roll", {y, integer(2)})})})}, test::library());
  EXPECT_EQ(r.failure, "'swap_pairs' of a value moved by 'roll'");
}

TEST(Moves, LibraryChecksMoveAndExpandEntries) {
  struct Case {
    std::string entry, message;
  };
  for (const Case& c : std::vector<Case>{
           {"- name: m1(x)\n  kind: move\n  move: rotate\n  torch: \"{x}\"\n  grad: {x: grad}\n",
            "move must be swap_halves, swap_pairs or roll"},
           {"- name: m2(x)\n  kind: move\n  torch: \"{x}\"\n  grad: {x: grad}\n",
            "primitive 'm2': a move names its permutation (move: swap_halves, swap_pairs or "
            "roll), and only a move"},
           {"- name: m3(x)\n  expand: x * 2\n  eval: x\n",
            "primitive 'm3' is an expansion: it takes no eval, torch, grad or kind"},
           {"- name: m4(x)\n  expand: x * k\n", "unknown name 'k'"},
           {"- name: m5(x)\n  kind: move\n  move: roll\n  torch: \"{x}\"\n  grad: {x: grad}\n",
            "primitive 'm5': a move of kind roll takes the value and its shift, as roll(x, k: "
            "const)"},
           {"- name: \"m6(x, k: const)\"\n  kind: move\n  move: swap_pairs\n  torch: \"{x}\"\n"
            "  grad: {x: grad}\n",
            "primitive 'm6': a move of kind swap_pairs takes one value, as swap_pairs(x)"}}) {
    SCOPED_TRACE(c.entry);
    int line = 0;
    std::ostringstream messages;
    EXPECT_FALSE(test::libraryWith(c.entry, line, messages));
    EXPECT_NE(messages.str().find(c.message), std::string::npos) << messages.str();
  }
}

} // namespace
} // namespace fusegen
