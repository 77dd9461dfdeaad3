// FormulaLocator: where each character of a YAML scalar's value sits in its file. A formula
// may be quoted, contain escapes, be a block scalar (`|`, `>`) or a plain scalar folded over
// several lines; yaml-cpp gives only the scalar's start, so the value's characters are
// matched against the source text from there. Diagnostics inside formulas use the result.
#pragma once

#include "support/SourceLoc.h"

#include <string>
#include <vector>

namespace fusegen {

// `lines` is the file's text split into lines; `start` is the scalar's start as yaml-cpp
// reports it (the opening quote or block indicator, if any). Returns one location per
// character of `value`, plus one for the end of the value.
std::vector<SourceLoc> locateChars(const std::vector<std::string>& lines, const SourceLoc& start,
                                   const std::string& value);

} // namespace fusegen
