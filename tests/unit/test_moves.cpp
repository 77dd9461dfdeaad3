// Moves pushed down to the leaves (opt/Moves.h): the pushed expression equals the expression
// with its moves applied where they were, on every column of a row (the row interpreter moves
// columns itself); moves of one kind cancel; a value the same in every column is not moved;
// the primitive library's checks of move and expand entries.
#include "RowInterpreter.h"
#include "TestUtil.h"
#include "opt/Moves.h"

#include <gtest/gtest.h>

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

TEST(Moves, PushedExpressionEqualsTheOriginalOnEveryColumn) {
  const ir::Expr x = ir::Node::makeInput("x", 0, ir::ShapeClass::Full);
  const ir::Expr w = ir::Node::makeInput("w", 1, ir::ShapeClass::Col);
  const ir::Expr r = ir::Node::makeInput("r", 2, ir::ShapeClass::Row);
  const ir::Expr j = ir::Node::makeColumn();
  for (const char* move : {"swap_halves", "swap_pairs"}) {
    SCOPED_TRACE(move);
    // move(g * sin)-like: a product of inputs, a per-row value, j and a nested move of the
    // same kind (which cancels), under a where on j.
    const ir::Expr inner = call("mul", {call("add", {x, r}), w});
    const ir::Expr e = call(
        move,
        {call("where", {call("lt", {j, ir::Node::makeConst(2, ir::ValueType::Int)}),
                        call("mul", {inner, call(move, {x})}), call("exp", {call("sum", {x})})})});
    const opt::PushedMoves pushed = opt::pushMoves({e});
    ASSERT_TRUE(pushed.failure.empty()) << pushed.failure;
    EXPECT_TRUE(movesOnLeavesOnly(pushed.values[0]));
    RowEnv env;
    env.D = 6;
    env.inputs["x"] = {0.3, -1.2, 2.2, 0.9, -0.4, 1.7};
    env.inputs["w"] = {1.5, 0.5, -2.0, 0.25, 3.0, -1.0};
    env.inputs["r"] = std::vector<double>(6, 0.7);
    EXPECT_EQ(evalRow(pushed.values[0], env), evalRow(e, env));
  }
}

TEST(Moves, SameKindCancelsAndColumnInvariantValuesStay) {
  const ir::Expr x = ir::Node::makeInput("x", 0, ir::ShapeClass::Full);
  const ir::Expr r = ir::Node::makeInput("r", 1, ir::ShapeClass::Row);
  const opt::PushedMoves twice = opt::pushMoves({call("swap_halves", {call("swap_halves", {x})})});
  EXPECT_EQ(twice.values[0], x);
  // A per-row value inside: only x is moved.
  const opt::PushedMoves mixed = opt::pushMoves({call("swap_pairs", {call("mul", {x, r})})});
  const ir::Expr& m = mixed.values[0];
  ASSERT_TRUE(m->isCall("mul"));
  EXPECT_TRUE(opt::isMovedLeaf(m->args()[0].get()));
  EXPECT_EQ(m->args()[1], r);
}

TEST(Moves, DifferentKindsNestedAreAFailure) {
  const ir::Expr x = ir::Node::makeInput("x", 0, ir::ShapeClass::Full);
  const ir::Expr y = ir::Node::makeInput("y", 1, ir::ShapeClass::Full);
  const opt::PushedMoves p =
      opt::pushMoves({call("swap_halves", {call("mul", {x, call("swap_pairs", {y})})})});
  EXPECT_EQ(p.failure, "'swap_halves' of a value moved by 'swap_pairs'");
}

TEST(Moves, LibraryChecksMoveAndExpandEntries) {
  struct Case {
    std::string entry, message;
  };
  for (const Case& c : std::vector<Case>{
           {"- name: m1(x)\n  kind: move\n  move: rotate\n  torch: \"{x}\"\n  grad: {x: grad}\n",
            "move must be swap_halves or swap_pairs"},
           {"- name: m2(x)\n  kind: move\n  torch: \"{x}\"\n  grad: {x: grad}\n",
            "primitive 'm2': a move names its permutation (move: swap_halves or swap_pairs), "
            "and only a move"},
           {"- name: m3(x)\n  expand: x * 2\n  eval: x\n",
            "primitive 'm3' is an expansion: it takes no eval, torch, grad or kind"},
           {"- name: m4(x)\n  expand: x * k\n", "unknown name 'k'"}}) {
    SCOPED_TRACE(c.entry);
    int line = 0;
    std::ostringstream messages;
    EXPECT_FALSE(test::libraryWith(c.entry, line, messages));
    EXPECT_NE(messages.str().find(c.message), std::string::npos) << messages.str();
  }
}

} // namespace
} // namespace fusegen
