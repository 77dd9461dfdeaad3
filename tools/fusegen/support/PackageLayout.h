// The layout of a generated package that its writer (driver/), its builder (packaging/) and
// the command line read: its names (the Python package, the op namespace) and its ops.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace fusegen {

// The names a package is generated with (`fusegen --package NAME --namespace NS`): the
// Python package `package` (its folder in the output directory, its C++ namespace) registers
// its ops as torch.ops.<ns>.<op>. Two packages with different names install side by side.
struct PackageNames {
  std::string package = "fusegen_ops";
  std::string ns = "fusegen";
  bool operator==(const PackageNames& o) const { return package == o.package && ns == o.ns; }
};

// The file at the root of the output directory that records the names, so that later runs
// (more specs, --build) use them: "fusegen-package.yaml".
extern const char* const kPackageNamesFile;

// Why `name` cannot name a package (a Python package that is also a C++ namespace), or ""
// when it can.
std::string packageNameProblem(const std::string& name);

// Why `ns` cannot be an op namespace (torch.ops.<ns>, "<ns>::op" in schemas), or "".
std::string namespaceProblem(const std::string& ns);

// The names recorded in `dir`; nothing when no package was generated there. Throws
// std::runtime_error (saying which file and why) when the record is unreadable or invalid.
std::optional<PackageNames> recordedPackageNames(const std::filesystem::path& dir);

// The text of kPackageNamesFile for `names`.
std::string packageNamesRecord(const PackageNames& names);

// The ops of the generated package in `dir` (the directories holding <op>/<op>_ops.cpp),
// sorted; none when `dir` is not a directory.
std::vector<std::string> packageOps(const std::filesystem::path& dir);

} // namespace fusegen
