// CodeFormatter: formats generated C++/CUDA with Clang's Format library and the style kept
// in templates/clang-format-style.yaml, so emitted files read like hand-written ones.
#pragma once

#include <string>

namespace fusegen::emit {

// Throws std::runtime_error if the style is invalid or the replacements do not apply.
std::string formatCpp(const std::string& code, const std::string& fileName,
                      const std::string& style);

} // namespace fusegen::emit
