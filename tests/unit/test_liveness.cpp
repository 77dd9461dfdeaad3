// Where a program reads its element inputs (plan/Liveness.h), checked against the row
// interpreter: wherever the analysis says an input is not read, any value there (NaN, huge;
// any finite one where it is unread because a factor multiplying it is 0 there) leaves every
// root's value on every column as it was; and the conditions are not vacuous: a causal mask
// leaves the columns past the row's position unread, in the forward and in the backward.
#include "RowInterpreter.h"
#include "TestUtil.h"
#include "plan/Liveness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace fusegen {
namespace {

using test::call;
using test::evalRow;
using test::RowEnv;

// Whether live holds at each column of the row env describes.
std::vector<bool> liveColumns(const plan::LiveWhen& live, const RowEnv& env) {
  std::vector<bool> out(static_cast<size_t>(env.D), live.always);
  for (const auto& conjunction : live.any) {
    std::vector<bool> all(out.size(), true);
    for (const auto& [c, holds] : conjunction) {
      const std::vector<double> v = evalRow(c, env);
      for (size_t j = 0; j < out.size(); ++j)
        all[j] = all[j] && ((v[j] != 0) == holds);
    }
    for (size_t j = 0; j < out.size(); ++j)
      out[j] = out[j] || all[j];
  }
  return out;
}

bool sameValue(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

// Every root unchanged where `input` is not read, whatever it holds there (`finite`: whatever
// finite value); returns the number of columns not read.
int checkUnreadColumns(const std::vector<ir::Expr>& roots, const ir::Expr& input, RowEnv env,
                       bool finite = false) {
  const auto live = plan::liveness(roots);
  const std::vector<bool> read = liveColumns(live.at(input.get()), env);
  std::vector<std::vector<double>> before;
  for (const ir::Expr& r : roots)
    before.push_back(evalRow(r, env));
  int unread = 0;
  for (double junk : {std::numeric_limits<double>::quiet_NaN(), 1e300, -7.0, 0.0}) {
    if (finite && !std::isfinite(junk)) continue;
    RowEnv changed = env;
    unread = 0;
    for (size_t j = 0; j < read.size(); ++j)
      if (!read[j]) {
        changed.inputs[input->name()][j] = junk;
        ++unread;
      }
    for (size_t i = 0; i < roots.size(); ++i) {
      const std::vector<double> after = evalRow(roots[i], changed);
      for (size_t j = 0; j < after.size(); ++j)
        EXPECT_TRUE(sameValue(after[j], before[i][j]))
            << "root " << i << " column " << j << ": " << after[j] << " against " << before[i][j]
            << " with " << input->name() << " = " << junk << " where it is not read";
    }
  }
  return unread;
}

struct Leaves {
  ir::Expr x = ir::Node::makeInput("x", 0, ir::ShapeClass::Full);
  ir::Expr y = ir::Node::makeInput("y", 1, ir::ShapeClass::Full);
  ir::Expr s = ir::Node::makeInput("s", 2, ir::ShapeClass::Row); // a per-row position
  ir::Expr j = ir::Node::makeColumn();
  ir::Expr inf = ir::Node::makeConst(-INFINITY);
  RowEnv env() const {
    RowEnv e;
    e.D = 8;
    e.inputs["x"] = {0.3, -1.2, 2.2, 0.9, -0.4, 1.7, 0.05, -2.5};
    e.inputs["y"] = {1.5, 0.5, -2.0, 0.25, 3.0, -1.0, 0.75, 2.0};
    e.inputs["s"] = std::vector<double>(8, 3.0);
    return e;
  }
};

TEST(Liveness, CausalSoftmaxReadsNoColumnPastThePosition) {
  Leaves l;
  // z = where(j > s, -inf, x * 0.5); m = max(z); e = exp(z - m); y = e / sum(e)
  const ir::Expr z =
      call("where", {call("gt", {l.j, l.s}), l.inf, call("mul", {l.x, ir::Node::makeConst(0.5)})});
  const ir::Expr e = call("exp", {call("sub", {z, call("max", {z})})});
  const ir::Expr out = call("div", {e, call("sum", {e})});
  EXPECT_EQ(checkUnreadColumns({out}, l.x, l.env()), 4); // columns 4 ... 7
  // Its backward's term, g * y: y is exp(-inf - m) / sum = 0 past the position (primitives'
  // `neg_inf` and `zero` claims: sub, exp, div), so g is read where x is, and its value
  // elsewhere, if finite, changes nothing (the row plan loads 0 there).
  const ir::Expr g = ir::Node::makeInput("y", 1, ir::ShapeClass::Full);
  const ir::Expr term = call("mul", {g, out});
  const std::vector<ir::Expr> roots{call("sum", {term}), term};
  EXPECT_EQ(checkUnreadColumns(roots, g, l.env(), /*finite=*/true), 4);
  EXPECT_EQ(checkUnreadColumns(roots, l.x, l.env()), 4);
}

TEST(Liveness, FactorsThatVanishLeaveTheOtherFactorUnread) {
  Leaves l;
  const ir::Expr c = call("lt", {l.j, ir::Node::makeConst(3, ir::ValueType::Int)});
  const ir::Expr w = call("where", {c, ir::Node::makeConst(0), call("exp", {l.y})});
  // x * w and w * x: x only where j >= 3; a quotient by x does not vanish with w.
  EXPECT_EQ(checkUnreadColumns({call("mul", {l.x, w})}, l.x, l.env(), true), 3);
  EXPECT_EQ(checkUnreadColumns({call("mul", {w, l.x})}, l.x, l.env(), true), 3);
  EXPECT_EQ(checkUnreadColumns({call("div", {w, l.x})}, l.x, l.env()), 0);
  // Nor does a sum with it, or a factor that is not the input itself (exp(x) may be inf where
  // x is finite: 0 * inf is NaN), or a where with no literal 0.
  EXPECT_EQ(checkUnreadColumns({call("mul", {call("add", {w, l.y}), l.x})}, l.x, l.env()), 0);
  EXPECT_TRUE(plan::liveness({call("mul", {w, call("exp", {l.x})})}).at(l.x.get()).always);
  const ir::Expr notZero = call("where", {c, ir::Node::makeConst(1), l.y});
  EXPECT_TRUE(plan::liveness({call("mul", {notZero, l.x})}).at(l.x.get()).always);
  // A product that vanishes vanishes further: (w * y) * x.
  EXPECT_EQ(checkUnreadColumns({call("mul", {call("mul", {w, l.y}), l.x})}, l.x, l.env(), true), 3);
}

TEST(Liveness, BothBranchesOrOtherUsesReadEverywhere) {
  Leaves l;
  const ir::Expr c = call("lt", {l.j, ir::Node::makeConst(2, ir::ValueType::Int)});
  // x in both branches: (c) or (not c) is everywhere.
  const ir::Expr both = call("where", {c, call("exp", {l.x}), call("mul", {l.x, l.y})});
  EXPECT_TRUE(plan::liveness({both}).at(l.x.get()).always);
  EXPECT_EQ(checkUnreadColumns({both}, l.x, l.env()), 0);
  EXPECT_EQ(checkUnreadColumns({both}, l.y, l.env()), 2); // y only where j >= 2
  // A condition that reads an element input is no index condition.
  const ir::Expr byValue = call("where", {call("gt", {l.y, l.x}), l.x, ir::Node::makeConst(0)});
  EXPECT_TRUE(plan::liveness({byValue}).at(l.x.get()).always);
  // A reduction or a move reads every column of its argument, whose own conditions still
  // hold at its own columns.
  const ir::Expr masked = call("where", {c, l.x, ir::Node::makeConst(0)});
  EXPECT_EQ(checkUnreadColumns({call("add", {call("sum", {masked}), masked})}, l.x, l.env()), 6);
  EXPECT_EQ(checkUnreadColumns({call("swap_halves", {masked})}, l.x, l.env()), 6);
  const ir::Expr movedFirst = call("where", {c, call("swap_halves", {l.x}), l.y});
  EXPECT_TRUE(plan::liveness({movedFirst}).at(l.x.get()).always);
  EXPECT_EQ(checkUnreadColumns({movedFirst}, l.x, l.env()), 0);
}

TEST(Liveness, NestedConditionsConjoinAndDisjoin) {
  Leaves l;
  const ir::Expr two = ir::Node::makeConst(2, ir::ValueType::Int);
  const ir::Expr five = ir::Node::makeConst(5, ir::ValueType::Int);
  // x where 2 <= j and j <= s (s = 3): two columns; or where j >= 5 through another root.
  const ir::Expr inner = call("where", {call("gt", {l.j, l.s}), ir::Node::makeConst(0), l.x});
  const ir::Expr outer = call("where", {call("lt", {l.j, two}), l.y, inner});
  const ir::Expr other = call("where", {call("ge", {l.j, five}), call("square", {l.x}), l.y});
  EXPECT_EQ(checkUnreadColumns({outer}, l.x, l.env()), 6);
  EXPECT_EQ(checkUnreadColumns({outer, other}, l.x, l.env()), 3); // read at 2, 3, 5, 6, 7
  EXPECT_EQ(checkUnreadColumns({outer, other}, l.y, l.env()), 3); // read at 0 ... 4
}

} // namespace
} // namespace fusegen
