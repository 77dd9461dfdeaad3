// Shared helpers for the unit tests: the real primitive library (loaded once from
// templates/primitives.yaml) and a one-call spec -> IR lowering that keeps the diagnostics
// text so tests can assert on exact messages.
#pragma once

#include "autodiff/ReverseMode.h"
#include "expr/Sema.h"
#include "opt/Simplify.h"
#include "plan/KernelPlan.h"
#include "prims/PrimitiveLibrary.h"
#include "specfile/SpecLoader.h"
#include "support/Diagnostics.h"
#include "support/FileWriter.h"

#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace fusegen::test {

// The library every spec in the repo is checked against; aborts the test binary if it
// does not load, since nearly every test depends on it.
inline const prims::PrimitiveLibrary& library() {
  static const prims::PrimitiveLibrary lib = [] {
    std::ostringstream out;
    Diagnostics diags(out);
    auto loaded = prims::PrimitiveLibrary::load(
        std::string(FUSEGEN_TEST_TEMPLATES) + "/primitives.yaml", diags);
    if (!loaded) throw std::runtime_error("cannot load primitives.yaml:\n" + out.str());
    return *loaded;
  }();
  return lib;
}

// The overload of `name` taking `arity` arguments (min and max are both elementwise with
// two and reductions with one).
inline const prims::Primitive& prim(const std::string& name, size_t arity) {
  const prims::Primitive* p = library().find(name, arity);
  if (!p)
    throw std::runtime_error("no primitive '" + name + "' with " + std::to_string(arity) +
                             " parameter(s)");
  return *p;
}

// The IR node prim(args) of the real library, for tests that build expressions by hand.
inline ir::Expr call(const char* name, std::vector<ir::Expr> args) {
  const prims::Primitive& p = prim(name, args.size()); // before args is moved from
  return ir::Node::makeCall(&p, std::move(args));
}

// The real library with `extra` entries appended (as "lib.yaml"), for tests that need a
// primitive the shipped library does not have. `firstExtraLine` is the 1-based line where
// `extra` starts. Diagnostics go to `messages`.
inline std::optional<prims::PrimitiveLibrary>
libraryWith(const std::string& extra, int& firstExtraLine, std::ostream& messages) {
  std::string base = readFile(std::string(FUSEGEN_TEST_TEMPLATES) + "/primitives.yaml");
  if (!base.empty() && base.back() != '\n') base += '\n';
  firstExtraLine = 1;
  for (char c : base)
    firstExtraLine += c == '\n';
  Diagnostics diags(messages);
  return prims::PrimitiveLibrary::loadFromString("lib.yaml", base + extra, diags);
}

// Result of loading and lowering a spec given as text.
struct Lowered {
  std::optional<ir::Function> fn;
  bool specLoaded = false; // the YAML itself was valid (errors, if any, come from lowering)
  std::string messages;    // everything reported to Diagnostics
  int errors = 0;
};

inline Lowered lowerSpec(const std::string& text, const std::string& path = "t.yaml") {
  std::ostringstream out;
  Diagnostics diags(out);
  Lowered r;
  std::optional<spec::OpSpec> s = spec::loadSpecFromString(path, text, diags);
  r.specLoaded = s.has_value();
  if (s) r.fn = expr::lowerOp(*s, library(), diags);
  r.messages = out.str();
  r.errors = diags.errorCount();
  return r;
}

// Reverse-mode AD of `fn` against the real library; throws (failing the test) if a rule
// could not be instantiated, with the diagnostics in the message.
inline autodiff::Gradient gradientOf(const ir::Function& fn) {
  std::ostringstream out;
  Diagnostics diags(out);
  std::optional<autodiff::Gradient> g =
      autodiff::differentiate(fn, library(), diags, SourceLoc{"test", 1, 1});
  if (!g || diags.errorCount() != 0)
    throw std::runtime_error("differentiate failed:\n" + out.str());
  return *g;
}

// A spec given as text, lowered, differentiated and planned as the pipeline does; the
// diagnostics of planning in `messages`.
struct Planned {
  std::optional<plan::KernelPlan> plan;
  std::string messages;
};

inline Planned planSpec(const std::string& text) {
  Lowered l = lowerSpec(text);
  if (!l.fn) throw std::runtime_error("lowering failed:\n" + l.messages);
  std::ostringstream out;
  Diagnostics diags(out);
  std::optional<spec::OpSpec> s = spec::loadSpecFromString("t.yaml", text, diags);
  Planned p;
  autodiff::Gradient g = gradientOf(*l.fn);
  ir::Function fn = opt::dropStatedGradients(*l.fn, g.inputGrads); // as the pipeline does
  p.plan = plan::planOp(*s, fn, g, library(), diags);
  p.messages = out.str();
  return p;
}

} // namespace fusegen::test
