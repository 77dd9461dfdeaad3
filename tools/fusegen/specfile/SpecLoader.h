// SpecLoader: reads a spec file with yaml-cpp into an OpSpec. Loading is strict: unknown and
// duplicate keys, wrong node kinds, malformed shapes, names and dtypes are all diagnostics
// at the offending key or value. Formulas are kept as text here; expr/ parses them.
#pragma once

#include "specfile/SpecModel.h"
#include "support/Diagnostics.h"

#include <cstddef>
#include <optional>
#include <string>

namespace fusegen::spec {

// Returns the spec (`text`, read from `path`), or nothing when errors were reported.
std::optional<OpSpec> loadSpecFromString(const std::string& path, const std::string& text,
                                         Diagnostics& diags);

// The longest name a spec may give its op, inputs, attrs, lets and outputs. Names become
// file names (generated/<op>/test_<op>.py) and C++ and Python identifiers; 64 is far more
// than any real name and keeps every generated path well below the file system's limits.
constexpr size_t kMaxNameLength = 64;

// How deeply a spec (or the primitive library) may nest YAML mappings and lists, the
// top-level mapping counting as the first level. A spec needs three (the top level,
// `attrs`, one attr's fields); yaml-cpp gives up at 500 levels without saying where.
constexpr int kMaxYamlDepth = 32;

// Checks what yaml-cpp's loader does not report well: that `text` holds one YAML document,
// nested at most kMaxYamlDepth levels, and its syntax. Reports a located error to `diags`
// (which must already know `text` as `path` to quote it) and returns false on the first
// problem.
bool checkYamlStructure(const std::string& path, const std::string& text, Diagnostics& diags);

} // namespace fusegen::spec
