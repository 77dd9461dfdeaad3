// The builtin table. Operators of the formula language appear here under the names the
// parser gives them (add, lt, neg, ...).
#include "prims/Builtins.h"

#include <cmath>

namespace fusegen::prims {

namespace {
// clang-format off
const Builtin kBuiltins[] = {
  {"add",    2, false, [](const double* a) { return a[0] + a[1]; }},
  {"sub",    2, false, [](const double* a) { return a[0] - a[1]; }},
  {"mul",    2, false, [](const double* a) { return a[0] * a[1]; }},
  {"div",    2, false, [](const double* a) { return a[0] / a[1]; }},
  {"neg",    1, false, [](const double* a) { return -a[0]; }},
  {"lt",     2, true,  [](const double* a) { return a[0] < a[1] ? 1.0 : 0.0; }},
  {"le",     2, true,  [](const double* a) { return a[0] <= a[1] ? 1.0 : 0.0; }},
  {"gt",     2, true,  [](const double* a) { return a[0] > a[1] ? 1.0 : 0.0; }},
  {"ge",     2, true,  [](const double* a) { return a[0] >= a[1] ? 1.0 : 0.0; }},
  {"eq",     2, true,  [](const double* a) { return a[0] == a[1] ? 1.0 : 0.0; }},
  {"ne",     2, true,  [](const double* a) { return a[0] != a[1] ? 1.0 : 0.0; }},
  {"select", 3, false, [](const double* a) { return a[0] != 0 ? a[1] : a[2]; }},
  {"exp",    1, false, [](const double* a) { return std::exp(a[0]); }},
  {"expm1",  1, false, [](const double* a) { return std::expm1(a[0]); }},
  {"log",    1, false, [](const double* a) { return std::log(a[0]); }},
  {"log1p",  1, false, [](const double* a) { return std::log1p(a[0]); }},
  {"tanh",   1, false, [](const double* a) { return std::tanh(a[0]); }},
  {"erf",    1, false, [](const double* a) { return std::erf(a[0]); }},
  {"sqrt",   1, false, [](const double* a) { return std::sqrt(a[0]); }},
  {"rsqrt",  1, false, [](const double* a) { return 1.0 / std::sqrt(a[0]); }},
  {"abs",    1, false, [](const double* a) { return std::fabs(a[0]); }},
  {"pow",    2, false, [](const double* a) { return std::pow(a[0], a[1]); }},
  {"sin",    1, false, [](const double* a) { return std::sin(a[0]); }},
  {"cos",    1, false, [](const double* a) { return std::cos(a[0]); }},
  {"floor",  1, false, [](const double* a) { return std::floor(a[0]); }},
  {"ceil",   1, false, [](const double* a) { return std::ceil(a[0]); }},
  {"round",  1, false, [](const double* a) { return std::nearbyint(a[0]); }}, // halves to even
  {"trunc",  1, false, [](const double* a) { return std::trunc(a[0]); }},
};
// clang-format on
} // namespace

const Builtin* findBuiltin(const std::string& name) {
  for (const Builtin& b : kBuiltins)
    if (name == b.name) return &b;
  return nullptr;
}

std::vector<std::string> builtinNames() {
  std::vector<std::string> out;
  for (const Builtin& b : kBuiltins)
    out.push_back(b.name);
  return out;
}

} // namespace fusegen::prims
