// Which ops a generated package holds.
#include "support/PackageLayout.h"

#include <algorithm>

namespace fs = std::filesystem;

namespace fusegen {

std::vector<std::string> packageOps(const fs::path& dir) {
  std::vector<std::string> ops;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return ops;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && fs::exists(e.path() / (name + "_ops.cpp"))) ops.push_back(name);
  }
  std::sort(ops.begin(), ops.end());
  return ops;
}

} // namespace fusegen
