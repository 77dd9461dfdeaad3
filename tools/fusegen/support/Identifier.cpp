// What may name an input, attr, let, output or primitive parameter.
#include "support/Identifier.h"

#include <cctype>

namespace fusegen {

bool isIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

} // namespace fusegen
