// ColumnPasses: a direction whose values use reductions over the rows (colsum; colmean is
// colsum / rows) as a list of programs run in order. A column reduction is known only once every
// row is done, so the values that use it run after a pass over the rows of its own:
//   pass k      the column reductions of depth k + 1 (their arguments need k earlier ones),
//               as [D] sums in the compute type (ColSum outputs: partials + finalize,
//               deterministic);
//   columns k   the [D] values made of them that later programs or the op's outputs read
//               (mean, rsqrt(var + eps)), computed once per column: a program over one row of
//               D (Program::columns), its outputs [D] in the compute type;
// A sum of the squared deviations of an element value from its column mean (a variance:
// colsum(square(e - colmean(e)))) runs in the pass of the mean, not one after it: each thread
// keeps a running mean and sum of squared deviations over its rows (Welford), merged across
// threads and chunks with Chan et al.'s formula in a fixed order (OutKind::ColM2; the colwise
// plan's, so only where every input is one the colwise plan reads). BatchNorm's forward reads x
// twice, not three times.
// Then the direction's main program, which reads those [D] values as inputs. Each program's
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
