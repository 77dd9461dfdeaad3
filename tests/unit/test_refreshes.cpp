// The prefix refreshed after a pass (Program::refreshes, plan/KernelPlan.h): which element
// values the planner puts in the prefix's place, and where it puts none. (What the runtimes
// compute with them is checked by the generated ops' tests, on the CPU here and on the GPU.)
#include "TestUtil.h"

#include <gtest/gtest.h>

namespace fusegen {
namespace {

using test::Planned;
using test::planSpec;

const std::string kMaskedSoftmax = "op: t\ninputs:\n  x: [..., S, D]\n  mask: [S, D]\n"
                                   "let:\n  z: x * 0.5 + mask\n  m: detach(max(z))\n"
                                   "  e: exp(z - m)\n";

// After the max, the sum's pass and the output read z only through e = exp(z - m): the sum's
// pass computes e into z's place and the output pass divides it.
TEST(Refreshes, MaskedSoftmaxKeepsExpAfterTheMax) {
  Planned planned = planSpec(kMaskedSoftmax + "outputs:\n  y: e / sum(e)\n");
  ASSERT_TRUE(planned.plan) << planned.messages;
  const plan::Program& f = planned.plan->forward;
  ASSERT_EQ(f.prefix.size(), 1u);
  ASSERT_EQ(f.refreshes.size(), 1u);
  EXPECT_EQ(f.refreshes[0].pass, 1);
  ASSERT_EQ(f.refreshes[0].values.size(), 1u);
  EXPECT_EQ(f.refreshes[0].values[0]->prim()->name, "exp");
  // (the backward's one pass has no pass after it to refresh for)
  EXPECT_TRUE(planned.plan->backward.refreshes.empty());
}

// The variance's pass squares z - mean, which the output reads too: z - mean is refreshed
// (one value, as the prefix), its square computed from it, not the square kept beside it.
TEST(Refreshes, VariancePassReadsTheCenteredValue) {
  Planned planned = planSpec("op: t\ninputs:\n  x: [..., S, D]\n  b: [S, D]\n"
                             "let:\n  z: x * 2 + b\n  mu: mean(z)\n"
                             "  v: mean((z - mu) * (z - mu))\n"
                             "outputs:\n  y: (z - mu) / sqrt(v + 0.00001)\n");
  ASSERT_TRUE(planned.plan) << planned.messages;
  const plan::Program& f = planned.plan->forward;
  ASSERT_EQ(f.refreshes.size(), 1u);
  ASSERT_EQ(f.refreshes[0].values.size(), 1u);
  EXPECT_EQ(f.refreshes[0].values[0]->prim()->name, "sub");
}

// Nothing after the last pass reads element values (a per-row output): no refresh.
TEST(Refreshes, NoneWhereNoLaterPassReadsElements) {
  Planned planned = planSpec(kMaskedSoftmax + "outputs:\n  lse: m + log(sum(e))\n");
  ASSERT_TRUE(planned.plan) << planned.messages;
  EXPECT_TRUE(planned.plan->forward.refreshes.empty());
}

// Without a prefix (the row cache holds the inputs in their storage type) there is no place
// for computed values: none.
TEST(Refreshes, NoneWithoutAPrefix) {
  Planned planned = planSpec("op: t\ninputs:\n  x: [..., D]\n"
                             "let:\n  m: detach(max(x))\n  e: exp(x - m)\n"
                             "outputs:\n  y: e / sum(e)\n");
  ASSERT_TRUE(planned.plan) << planned.messages;
  EXPECT_TRUE(planned.plan->forward.prefix.empty());
  EXPECT_TRUE(planned.plan->forward.refreshes.empty());
}

// Two values read after the max (e and z itself, by an output) against a prefix of one: no
// room, none.
TEST(Refreshes, NoneWhereTheLaterValuesOutnumberThePrefix) {
  Planned planned = planSpec(kMaskedSoftmax + "outputs:\n  y: e / sum(e) + z\n");
  ASSERT_TRUE(planned.plan) << planned.messages;
  EXPECT_TRUE(planned.plan->forward.refreshes.empty());
}

} // namespace
} // namespace fusegen
