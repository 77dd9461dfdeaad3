// fusegen autograd: the Autograd kernel of every generated op, in C++. The forward runs
// below autograd; when an input requires grad, a graph node saves the inputs and the
// per-row statistics that the forward returns after its outputs, and its backward calls
// <op>_backward through the dispatcher, below autograd. No Python runs between the op and
// its backward (register_autograd cost about 30 us per forward+backward on the CPU side,
// which decided small shapes). With create_graph the call goes through <op>_backward's own
// autograd formula, registered in Python by the op's module: the second derivatives.
// Registered by the shared glue (fusegen_glue.cpp); AutogradInfo is in fusegen_glue.h.
#pragma once

#include "fusegen_glue.h"

#include <torch/library.h>

namespace fg::glue {

torch::CppFunction autogradKernel(const AutogradInfo& info);

} // namespace fg::glue
