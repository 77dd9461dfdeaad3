// Builder: builds the package in the output directory for the active Python's torch and
// optionally installs it or writes a wheel. It compiles with ninja from a file it writes,
// using the compilers and flags torch.utils.cpp_extension would use: those are asked of torch
// once per torch install, CUDA toolkit and arch list and cached, so a build imports no torch
// (about 4 s per import). setup.py only packages the built library. The compilers' output
// goes to a log file; the terminal shows the stage, each object as ninja finishes it and the
// elapsed time, and on failure the log's tail and the generated file and spec of the first
// compile error. A build key (a hash of the generated sources, fusegen, torch, CUDA, the
// arch list and the Python) is recorded in the built package: when it matches, nothing is
// rebuilt.
#pragma once

#include <ostream>
#include <string>

namespace fusegen::packaging {

struct BuildOptions {
  std::string outputDir = "generated";
  std::string python = "python3";
  std::string templatesDir = "templates"; // templates/build/: the ninja file, the torch probe
  std::string arch; // TORCH_CUDA_ARCH_LIST value; empty: the GPU present, else 9.0
  int jobs = 0;     // 0: the number of cores
  bool install = false;
  bool wheel = false; // write a wheel to <outputDir>/dist instead of building in place
  bool cpuOnly = false;
};

// Returns the process exit code (0 on success).
int buildPackage(const BuildOptions& opts, std::ostream& out);

} // namespace fusegen::packaging
