// SourceLoc: a position in a user-visible file (spec, primitive library), 1-based.
// Every spec entry, AST node and IR-level diagnostic carries one so errors point at the
// exact character the user wrote.
#pragma once

#include <string>

namespace fusegen {

struct SourceLoc {
  std::string file;
  int line = 0; // 1-based; 0 means "no location"
  int col = 0;  // 1-based

  bool valid() const { return line > 0; }
  // The location `offset` characters to the right on the same line (formula text).
  SourceLoc shifted(int offset) const { return SourceLoc{file, line, col + offset}; }
};

} // namespace fusegen
