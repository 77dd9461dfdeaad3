// The layout of a generated package that both its writer (driver/) and its builder
// (packaging/) read: which ops it holds.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace fusegen {

// The ops of the generated package in `dir` (the directories holding <op>/<op>_ops.cpp),
// sorted; none when `dir` is not a directory.
std::vector<std::string> packageOps(const std::filesystem::path& dir);

} // namespace fusegen
