// Builder: builds the package in the output directory with the active Python's torch
// (torch.utils.cpp_extension + ninja) and optionally installs it or writes a wheel. The
// compiler's output goes to a log file; the terminal shows the stage, ninja's object count
// and the elapsed time, and on failure the log's tail and the generated file and spec of
// the first compile error. A build key (a hash of the generated sources, fusegen, torch,
// CUDA, the arch list and the Python) is recorded in the built package: when it matches,
// nothing is rebuilt.
#pragma once

#include <ostream>
#include <string>

namespace fusegen::build {

struct BuildOptions {
  std::string outputDir = "generated";
  std::string python = "python3";
  std::string arch; // TORCH_CUDA_ARCH_LIST value; empty: the GPU present, else 9.0
  int jobs = 0;     // 0: the number of cores
  bool install = false;
  bool wheel = false; // write a wheel to <outputDir>/dist instead of building in place
  bool cpuOnly = false;
};

// Returns the process exit code (0 on success).
int buildPackage(const BuildOptions& opts, std::ostream& out);

} // namespace fusegen::build
