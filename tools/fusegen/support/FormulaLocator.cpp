// Character-level mapping of scalar values back to their source text.
#include "support/FormulaLocator.h"

#include <cctype>

namespace fusegen {

std::vector<SourceLoc> locateChars(const std::vector<std::string>& lines, const SourceLoc& start,
                                   const std::string& value) {
  int line = start.line - 1, col = start.col - 1; // 0-based cursor into `lines`
  auto at = [&]() -> int {
    if (line < 0 || line >= static_cast<int>(lines.size()) ||
        col >= static_cast<int>(lines[line].size()))
      return -1;
    return static_cast<unsigned char>(lines[line][col]);
  };
  auto advance = [&] {
    if (line >= 0 && line < static_cast<int>(lines.size()) &&
        col + 1 < static_cast<int>(lines[line].size())) {
      ++col;
    } else {
      ++line;
      col = 0;
    }
  };
  const bool inFile = line >= 0 && line < static_cast<int>(lines.size());
  // Skip an opening quote or a block indicator (and the rest of its line).
  if (inFile && (at() == '"' || at() == '\'')) {
    advance();
  } else if (inFile && (at() == '|' || at() == '>')) {
    ++line;
    col = 0;
  }
  std::vector<SourceLoc> out;
  SourceLoc last{start.file, start.line, start.col};
  for (char ch : value) {
    if (std::isspace(static_cast<unsigned char>(ch))) {
      out.push_back(last.shifted(1));
      continue;
    }
    // The next source character equal to ch, skipping layout and escape characters.
    int guard = 0;
    while (line < static_cast<int>(lines.size()) && at() != static_cast<unsigned char>(ch) &&
           guard++ < 4096)
      advance();
    if (line >= static_cast<int>(lines.size())) {
      out.push_back(last.shifted(1));
      continue;
    }
    last = SourceLoc{start.file, line + 1, col + 1};
    out.push_back(last);
    advance();
  }
  out.push_back(last.shifted(1));
  return out;
}

} // namespace fusegen
