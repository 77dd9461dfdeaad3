// What may name an input, attr, let, output, primitive parameter, package or namespace.
#include "support/Identifier.h"

#include <cctype>
#include <set>

namespace fusegen {

bool isIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

bool isKeyword(const std::string& s) {
  static const std::set<std::string> keywords = {
      // Python
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
      "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if",
      "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
      "while", "with", "yield",
      // C++, with the alternative tokens
      "alignas", "alignof", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "case", "catch",
      "char", "char8_t", "char16_t", "char32_t", "co_await", "co_return", "co_yield", "compl",
      "concept", "const", "const_cast", "consteval", "constexpr", "constinit", "decltype",
      "default", "delete", "do", "double", "dynamic_cast", "enum", "explicit", "export", "extern",
      "false", "float", "friend", "goto", "inline", "int", "long", "mutable", "namespace", "new",
      "noexcept", "not_eq", "nullptr", "operator", "or_eq", "private", "protected", "public",
      "register", "reinterpret_cast", "requires", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual",
      "void", "volatile", "wchar_t", "xor", "xor_eq"};
  return keywords.count(s) != 0;
}

} // namespace fusegen
