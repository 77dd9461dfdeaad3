// Diagnostics: clang-style messages `file:line:col: error: msg`, followed by the source
// line and a caret under the column. Files are registered with their text so the line can
// be shown; callers count errors and stop between stages, as a compiler does.
#pragma once

#include "support/SourceLoc.h"

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace fusegen {

// Thrown for a user error that cannot be recovered from in the current stage; the message
// has already been reported through Diagnostics when this is caught.
struct FatalError {};

class Diagnostics {
public:
  explicit Diagnostics(std::ostream& out) : out_(out) {}

  // Remembers a file's text so diagnostics can quote its lines.
  void addFile(const std::string& path, const std::string& text);

  void error(const SourceLoc& loc, const std::string& message);
  void warning(const SourceLoc& loc, const std::string& message);
  void note(const SourceLoc& loc, const std::string& message);
  // Reports an error and throws FatalError.
  [[noreturn]] void fatal(const SourceLoc& loc, const std::string& message);

  int errorCount() const { return errors_; }

private:
  void report(const SourceLoc& loc, const char* severity, const std::string& message);

  std::ostream& out_;
  std::map<std::string, std::vector<std::string>> lines_;
  int errors_ = 0;
};

// The closest candidate to `name` by edit distance, or "" when none is close enough;
// used for "did you mean 'gelu'?" notes.
std::string closestMatch(const std::string& name, const std::vector<std::string>& candidates);

} // namespace fusegen
