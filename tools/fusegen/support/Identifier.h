// Identifier rules shared by the spec loader, the primitive library and the command line:
// what may name an input, attr, let, output, primitive parameter, package or op namespace.
#pragma once

#include <string>

namespace fusegen {

// A C/Python identifier: a letter or '_', then letters, digits and '_'.
bool isIdentifier(const std::string& s);

// A Python or C++ keyword (C++20's too, and the alternative operator tokens): no generated
// name may be one, since the generated Python and C++ print names verbatim.
bool isKeyword(const std::string& s);

} // namespace fusegen
