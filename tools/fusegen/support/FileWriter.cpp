// FileWriter implementation: temp-file staging, write-if-changed and stale-file removal.
#include "support/FileWriter.h"

#include <filesystem>
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

WriteReport writeFiles(const std::string& root, const std::vector<GeneratedFile>& files,
                       const std::vector<std::string>& ownedDirs) {
  WriteReport report;
  std::vector<std::pair<fs::path, fs::path>> staged; // temp -> target
  auto cleanup = [&] {
    std::error_code ec;
    for (auto& [tmp, target] : staged)
      fs::remove(tmp, ec);
  };
  try {
    for (const GeneratedFile& f : files) {
      fs::path target = fs::path(root) / f.path;
      if (sameContent(target, f.text)) {
        report.unchanged.push_back(f.path);
        continue;
      }
      fs::create_directories(target.parent_path());
      fs::path tmp = target;
      tmp += ".fusegen-tmp";
      std::ofstream out(tmp, std::ios::binary);
      out << f.text;
      out.close();
      if (!out) throw std::runtime_error("cannot write '" + tmp.string() + "'");
      staged.emplace_back(tmp, target);
      report.written.push_back(f.path);
    }
  } catch (...) {
    cleanup();
    throw;
  }
  for (auto& [tmp, target] : staged)
    fs::rename(tmp, target);

  std::set<std::string> keep;
  for (const GeneratedFile& f : files)
    keep.insert((fs::path(root) / f.path).lexically_normal().string());
  for (const std::string& dir : ownedDirs) {
    fs::path d = fs::path(root) / dir;
    if (!fs::is_directory(d)) continue;
    for (const auto& entry : fs::directory_iterator(d)) {
      if (!entry.is_regular_file() || keep.count(entry.path().lexically_normal().string()))
        continue;
      std::string head = readFile(entry.path().string()).substr(0, 200);
      if (head.find("@generated") != std::string::npos) {
        fs::remove(entry.path());
        report.removed.push_back(fs::relative(entry.path(), root).string());
      }
    }
  }
  return report;
}

} // namespace fusegen
