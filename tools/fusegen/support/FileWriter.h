// FileWriter: writes a batch of generated files all-or-nothing. Every file is first written
// to a temporary next to its target; only when all temporaries exist are they renamed into
// place, and files whose content did not change are left untouched (timestamps preserved,
// so incremental builds stay incremental).
#pragma once

#include <string>
#include <vector>

namespace fusegen {

struct GeneratedFile {
  std::string path; // relative to the output root
  std::string text;
};

struct WriteReport {
  std::vector<std::string> written;   // created or changed
  std::vector<std::string> unchanged; // identical content, not touched
  std::vector<std::string> removed;   // stale generated files deleted
};

// Writes `files` under `root`. `ownedDirs` are directories (relative to root) wholly owned
// by the generator: stale files in them that carry the @generated stamp are removed.
// Throws std::runtime_error (after removing its temporaries) if any write fails.
WriteReport writeFiles(const std::string& root, const std::vector<GeneratedFile>& files,
                       const std::vector<std::string>& ownedDirs);

std::string readFile(const std::string& path); // throws std::runtime_error

} // namespace fusegen
