// FileWriter: writes a batch of generated files all-or-nothing. Files whose content did not
// change are left untouched (timestamps preserved, so incremental builds stay incremental).
// The others are written in three phases:
//   1. check, changing nothing: no path is listed twice, every target is absent or a regular
//      file (or a symlink to one), and the nearest existing ancestor of each is a directory;
//   2. stage: create the missing directories and write each file to `<target>.fusegen-tmp`;
//   3. commit: per file, rename an existing target to `<target>.fusegen-old`, then rename the
//      temporary onto the target.
// If any step fails, the call undoes what it did in reverse order: backups are renamed back
// (same inode, contents and timestamps), targets it created are removed, its temporaries and
// the directories it created are removed; then it throws. The tree is then as it was before
// the call, except that leftovers of a killed run (`*.fusegen-tmp`, `*.fusegen-old`) at the
// paths it needed may be gone. Only after the commit succeeded are the backups and the stale
// generated files in `ownedDirs` removed; those removals never throw (a file that cannot be
// removed stays).
#pragma once

#include <filesystem>
#include <functional>
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

// Test seam: called before each step of phases 2 and 3 with the step's name ("mkdir",
// "write", "close", "backup", "rename") and the path it changes; an exception it throws makes
// that step fail.
using FileStepHook = std::function<void(const char* step, const std::filesystem::path& path)>;

// Writes `files` under `root`. `ownedDirs` are directories (relative to root) wholly owned
// by the generator: stale files in them that carry the @generated stamp are removed.
// Throws std::runtime_error naming the path and the reason if any step fails (see above).
WriteReport writeFiles(const std::string& root, const std::vector<GeneratedFile>& files,
                       const std::vector<std::string>& ownedDirs,
                       const FileStepHook& beforeStep = {});

std::string readFile(const std::string& path); // throws std::runtime_error

} // namespace fusegen
