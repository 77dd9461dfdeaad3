// Number formatting shared by the IR printer and the code emitters.
#pragma once

#include <string>

namespace fusegen {

// The shortest decimal form that reads back as the same double, always with a '.', an
// exponent or a name (inf/nan) so that it reads as floating point: 0.5, 1.0, 1e-06.
std::string formatDouble(double v);

} // namespace fusegen
