// Diagnostics implementation: formatting of located messages with a source excerpt.
#include "support/Diagnostics.h"

#include <algorithm>
#include <sstream>

namespace fusegen {

void Diagnostics::addFile(const std::string& path, const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  lines_[path] = std::move(lines);
}

void Diagnostics::report(const SourceLoc& loc, const char* severity, const std::string& message) {
  if (loc.valid())
    out_ << loc.file << ":" << loc.line << ":" << loc.col << ": ";
  else if (!loc.file.empty())
    out_ << loc.file << ": ";
  out_ << severity << ": " << message << "\n";
  auto it = lines_.find(loc.file);
  if (!loc.valid() || it == lines_.end() || loc.line > static_cast<int>(it->second.size())) return;
  const std::string& text = it->second[loc.line - 1];
  out_ << text << "\n";
  // Keep tabs in the caret line so the caret lines up under the character.
  std::string caret;
  for (int i = 0; i + 1 < loc.col && i < static_cast<int>(text.size()); ++i)
    caret += text[i] == '\t' ? '\t' : ' ';
  out_ << caret << "^\n";
}

void Diagnostics::error(const SourceLoc& loc, const std::string& message) {
  ++errors_;
  report(loc, "error", message);
}

void Diagnostics::warning(const SourceLoc& loc, const std::string& message) {
  report(loc, "warning", message);
}

void Diagnostics::note(const SourceLoc& loc, const std::string& message) {
  report(loc, "note", message);
}

void Diagnostics::fatal(const SourceLoc& loc, const std::string& message) {
  error(loc, message);
  throw FatalError{};
}

static size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closestMatch(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t bestDistance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string& c : candidates) {
    size_t d = editDistance(name, c);
    // (a name replaced whole, sharing no letter with it, is no misspelling of it: z and D)
    if (d < bestDistance && (d < name.size() || c.find_first_of(name) != std::string::npos)) {
      bestDistance = d;
      best = c;
    }
  }
  return best;
}

} // namespace fusegen
