// fusegen autograd: the Autograd kernel of every generated op, in C++. The forward runs
// below autograd; when an input requires grad, a graph node saves the inputs and the
// per-row statistics that the forward returns after its outputs, and its backward calls
// <op>_backward through the dispatcher, below autograd. No Python runs between the op and
// its backward (register_autograd cost about 30 us per forward+backward on the CPU side,
// which decided small shapes). With create_graph the call goes through <op>_backward's own
// autograd formula, registered in Python by the op's module: the second derivatives. The implementation (fusegen_autograd.cpp) is one shared translation unit,
// so each op's registration file stays free of the autograd headers and compiles faster.
#pragma once

#include <torch/library.h>

namespace fg::glue {

struct AutogradInfo {
  const char* backwardOp; // "fusegen::<op>_backward"
  int inputs;             // tensor arguments, first in the schema
  int attrs;              // scalar arguments after them
  int outputs;            // differentiable results, first; the rest are saved statistics
};

torch::CppFunction autogradKernel(const AutogradInfo& info);

} // namespace fg::glue
