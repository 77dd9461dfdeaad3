// SpecLoader: reads a spec file with yaml-cpp into an OpSpec. Loading is strict: unknown and
// duplicate keys, wrong node kinds, malformed shapes, names and dtypes are all diagnostics
// at the offending key or value. Formulas are kept as text here; expr/ parses them.
#pragma once

#include "spec/SpecModel.h"
#include "support/Diagnostics.h"

#include <optional>
#include <string>

namespace fusegen::spec {

// Returns the spec, or nothing when errors were reported to `diags`.
std::optional<OpSpec> loadSpec(const std::string& path, Diagnostics& diags);
std::optional<OpSpec> loadSpecFromString(const std::string& path, const std::string& text,
                                         Diagnostics& diags);

bool isIdentifier(const std::string& s);

} // namespace fusegen::spec
