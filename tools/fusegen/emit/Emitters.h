// Emitters: turn a planned op into its generated files, and the set of ops in an output
// directory into the package files (setup.py, the Python package, the runtime).
// Everything specific to an op is computed here as strings and lists; the templates only
// place them.
#pragma once

#include "autodiff/ReverseMode.h"
#include "autodiff/SecondOrder.h"
#include "emit/Templates.h"
#include "ir/Function.h"
#include "plan/KernelPlan.h"
#include "specfile/SpecModel.h"
#include "support/FileWriter.h"
#include "support/PackageLayout.h"

#include <string>
#include <vector>

namespace fusegen::emit {

struct OpModel {
  const spec::OpSpec& spec;
  const ir::Function& fn;
  const autodiff::Gradient& grad;
  const autodiff::SecondOrder& grad2;
  const plan::KernelPlan& plan;
  const PackageNames& names; // the package and op namespace the op is generated into
};

// Files of one op, under "<op>/".
std::vector<GeneratedFile> emitOp(const OpModel& op, const Templates& templates);

// Package files for the ops `opNames` (sorted), at the root of the output directory: the
// package's folder is names.package, and the names are recorded (kPackageNamesFile).
std::vector<GeneratedFile> emitPackage(const std::vector<std::string>& opNames,
                                       const PackageNames& names, const Templates& templates);

} // namespace fusegen::emit
