// FileWriter implementation: check, stage and commit with rollback (see FileWriter.h),
// write-if-changed and stale-file removal.
#include "support/FileWriter.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace fusegen {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

static bool sameContent(const fs::path& path, const std::string& text) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) != text.size()) return false;
  return readFile(path.string()) == text;
}

// Whether the head of `path` carries the @generated stamp; false if it cannot be read.
static bool hasStamp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(200, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head.find("@generated") != std::string::npos;
}

[[noreturn]] static void fail(const std::string& what, const fs::path& path,
                              const std::string& why) {
  throw std::runtime_error("cannot " + what + " '" + path.string() + "': " + why);
}

namespace {

// One file to create or replace, and how far the call got with it (for the rollback).
struct Pending {
  fs::path target, tmp, backup;
  const std::string* text;
  bool existed;          // something is at target: it is backed up, then replaced
  bool staged = false;   // tmp may exist
  bool backedUp = false; // target renamed to backup
  bool placed = false;   // tmp renamed onto target
};

} // namespace

WriteReport writeFiles(const std::string& root, const std::vector<GeneratedFile>& files,
                       const std::vector<std::string>& ownedDirs, const FileStepHook& beforeStep) {
  WriteReport report;
  std::error_code ec;

  // 1. Check, changing nothing: what to write, and which directories are missing (parents
  // before children, each once).
  std::vector<Pending> pending;
  std::vector<fs::path> newDirs;
  std::set<fs::path> targets, dirsSeen;
  for (const GeneratedFile& f : files) {
    fs::path target = (fs::path(root) / f.path).lexically_normal();
    if (!targets.insert(target).second) fail("write", target, "it is listed twice");
    bool existed = fs::exists(fs::symlink_status(target, ec));
    fs::file_status st = fs::status(target, ec);
    if (fs::exists(st) && !fs::is_regular_file(st))
      fail("replace", target,
           fs::is_directory(st) ? "it is a directory" : "it is not a regular file");
    if (sameContent(target, f.text)) {
      report.unchanged.push_back(f.path);
      continue;
    }
    std::vector<fs::path> missing;
    for (fs::path dir = target.parent_path(); dir.has_relative_path(); dir = dir.parent_path()) {
      fs::file_status ds = fs::status(dir, ec);
      if (fs::is_directory(ds)) break;
      if (fs::exists(ds)) fail("write", target, "'" + dir.string() + "' is not a directory");
      if (ds.type() != fs::file_type::not_found) fail("access", dir, ec.message());
      missing.push_back(dir);
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it)
      if (dirsSeen.insert(*it).second) newDirs.push_back(*it);
    fs::path tmp = target, backup = target;
    tmp += ".fusegen-tmp";
    backup += ".fusegen-old";
    pending.push_back({target, tmp, backup, &f.text, existed});
    report.written.push_back(f.path);
  }

  auto step = [&](const char* name, const fs::path& path) {
    if (beforeStep) beforeStep(name, path);
  };
  std::vector<fs::path> createdDirs;
  try {
    // 2. Stage: directories, then every file's temporary.
    for (const fs::path& dir : newDirs) {
      step("mkdir", dir);
      if (fs::create_directory(dir, ec))
        createdDirs.push_back(dir);
      else if (ec)
        fail("create directory", dir, ec.message());
    }
    for (Pending& p : pending) {
      step("write", p.tmp);
      p.staged = true;
      errno = 0;
      std::ofstream out(p.tmp, std::ios::binary);
      out << *p.text;
      step("close", p.tmp);
      out.close();
      if (!out) fail("write", p.tmp, errno ? std::strerror(errno) : "stream error");
    }
    // 3. Commit: keep each existing target as a backup, then move the temporary into place.
    for (Pending& p : pending) {
      if (p.existed) {
        step("backup", p.target);
        fs::rename(p.target, p.backup, ec);
        if (ec) fail("back up", p.target, ec.message());
        p.backedUp = true;
      }
      step("rename", p.target);
      fs::rename(p.tmp, p.target, ec);
      if (ec) fail("replace", p.target, ec.message());
      p.placed = true;
    }
  } catch (...) {
    // Undo in reverse order; best effort, the original error is what is reported.
    for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
      if (it->placed && !it->existed) fs::remove(it->target, ec);
      if (it->backedUp) fs::rename(it->backup, it->target, ec);
      if (it->staged) fs::remove(it->tmp, ec);
    }
    for (auto it = createdDirs.rbegin(); it != createdDirs.rend(); ++it)
      fs::remove(*it, ec); // only if empty: never what something else put there
    throw;
  }

  // The commit is done, so from here on nothing throws: a file that cannot be removed stays.
  for (const Pending& p : pending)
    if (p.backedUp) fs::remove(p.backup, ec);
  for (const std::string& dir : ownedDirs) {
    std::error_code iterEc;
    for (fs::directory_iterator it(fs::path(root) / dir, iterEc), end; !iterEc && it != end;
         it.increment(iterEc)) {
      const fs::path& path = it->path();
      if (!it->is_regular_file(ec) || targets.count(path.lexically_normal()) || !hasStamp(path))
        continue;
      if (fs::remove(path, ec))
        report.removed.push_back((fs::path(dir) / path.filename()).lexically_normal().string());
    }
  }
  return report;
}

} // namespace fusegen
