// Identifier rules shared by the spec loader and the primitive library: what may name an
// input, attr, let, output or primitive parameter.
#pragma once

#include <string>

namespace fusegen {

// A C/Python identifier: a letter or '_', then letters, digits and '_'.
bool isIdentifier(const std::string& s);

} // namespace fusegen
