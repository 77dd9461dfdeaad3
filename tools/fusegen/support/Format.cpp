// formatDouble: shortest round-trip decimal spelling.
#include "support/Format.h"

#include <cstdio>
#include <cstdlib>

namespace fusegen {

std::string formatDouble(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}

} // namespace fusegen
