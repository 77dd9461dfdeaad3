// Pipeline: the stages from spec files to generated files, as used by the CLI and the
// golden check. A run either produces every file or reports errors and produces none.
#pragma once

#include "emit/Templates.h"
#include "prims/PrimitiveLibrary.h"
#include "support/Diagnostics.h"
#include "support/FileWriter.h"
#include "support/PackageLayout.h"

#include <optional>
#include <string>
#include <vector>

namespace fusegen::driver {

struct Options {
  std::string templatesDir;
  std::string outputDir = "generated";
  // --package, --namespace as given (empty: not given). See packageNames.
  std::string package, ns;
};

// The names to generate into opts.outputDir with: those recorded there, else the given ones
// over the defaults. Throws std::runtime_error when given names differ from the recorded ones
// (regenerating in place would leave the old package behind) or the record is invalid.
PackageNames packageNames(const Options& opts);

// Loads templates/primitives.yaml.
std::optional<prims::PrimitiveLibrary> loadLibrary(const Options& opts, Diagnostics& diags);

// Every file for `specPaths` plus the package files for those ops and the ops already in
// the output directory, in the package packageNames(opts). Returns nothing when a spec had
// errors (an op named as the package is one).
std::optional<std::vector<GeneratedFile>> generate(const std::vector<std::string>& specPaths,
                                                   const prims::PrimitiveLibrary& lib,
                                                   const Options& opts, Diagnostics& diags,
                                                   std::vector<std::string>* opNames = nullptr);

// The files of one spec given as text, as `generate` makes them (without the package
// files), having run every stage: load, lower, differentiate, plan, emit. Nothing is
// written; `path` locates diagnostics and the spec's `functions:` header. The fuzz target
// (tests/fuzz) drives the compiler through this.
std::optional<std::vector<GeneratedFile>>
generateOne(const std::string& path, const std::string& text, const prims::PrimitiveLibrary& lib,
            const emit::Templates& templates, Diagnostics& diags);

// The starter spec of `fusegen new NAME` (templates/spec/starter.yaml.mustache), to be written
// at `path`; checked through every stage first: nothing when it has errors (a bad NAME).
std::optional<std::string> starterSpec(const std::string& name, const std::string& path,
                                       const prims::PrimitiveLibrary& lib, const Options& opts,
                                       Diagnostics& diags);

// A textual dump of one stage for one spec: "ir", "grad" or "plan".
std::optional<std::string> dump(const std::string& stage, const std::string& specPath,
                                const prims::PrimitiveLibrary& lib, Diagnostics& diags);

} // namespace fusegen::driver
