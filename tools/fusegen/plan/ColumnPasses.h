// ColumnPasses: a direction whose values use reductions over the rows (colsum; colmean is
// colsum / rows) as a list of programs run in order. A column reduction is known only once every
// row is done, so the values that use it run after a pass over the rows of its own:
//   pass k      the column reductions of depth k + 1 (their arguments need k earlier ones),
//               as [D] sums in the compute type (ColSum outputs: partials + finalize,
//               deterministic);
//   columns k   the [D] values made of them that later programs or the op's outputs read
//               (mean, rsqrt(var + eps)), computed once per column: a program over one row of
//               D (Program::columns), its outputs [D] in the compute type;
// then the direction's main program, which reads those [D] values as inputs. Each program's
// results are numbered in run order across the list (Program::Input::passed and
// Program::Output::passed name them); the glue runs the list and hands them on.
#pragma once

#include "plan/KernelPlan.h"

#include <unordered_map>
#include <vector>

namespace fusegen::plan {

// Moves `main`'s column reductions into programs run before it (returned in run order) and
// rewrites main's values to read their results. Every node of `keep` (values the caller returns:
// the op's [D] outputs, [D] statistics saved for the backward) is materialized; `results` maps
// each materialized node to its result's index. Programs without column reductions are left
// as they are (no programs returned).
std::vector<Program> splitColumnPasses(Program& main, const std::vector<ir::Expr>& keep,
                                       const std::string& prefix,
                                       std::unordered_map<const ir::Node*, int>& results);

} // namespace fusegen::plan
