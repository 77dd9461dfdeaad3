// Sema: resolves a formula's names and calls and lowers it to IR, checking arity, value
// types (conditions vs values), constant parameters and reductions. lowerOp does this for a
// whole spec and adds the op-level checks (unused inputs, outputs that depend on nothing,
// output shapes, names that clash with primitives).
#pragma once

#include "cxx/FunctionImporter.h"
#include "expr/Ast.h"
#include "ir/Function.h"
#include "prims/PrimitiveLibrary.h"
#include "specfile/SpecModel.h"
#include "support/Diagnostics.h"

#include <map>
#include <optional>
#include <unordered_set>

namespace fusegen::expr {

using Scope = std::map<std::string, ir::Expr>;

class Sema {
public:
  // `dims`: the op's named dims (spec::OpSpec::dims), which pos(S) reads.
  Sema(const prims::PrimitiveLibrary& lib, Diagnostics& diags,
       const cxx::UserFunctions* functions = nullptr, std::vector<std::string> dims = {})
      : lib_(lib), diags_(diags), functions_(functions), dims_(std::move(dims)) {}

  // Returns null when an error was reported. Walks the tree with an explicit stack, so a
  // long flat chain (a left-deep tree of any depth) cannot overflow the call stack.
  ir::Expr lower(const AstPtr& ast, const Scope& scope);
  // Lowering derivative rules, not a spec's formulas: a move of a moved value that is not one
  // move (prims::movesCompose) is left to the planner (plan/KernelPlan.cpp reports it at the op,
  // where the backward needs it), not reported at the rule in the library; place (chunk's adjoint)
  // may be called; a move's shift (folded from one checked in the spec) is not checked again.
  void lowerRules() { rules_ = true; }
  // A packed input (spec::Input::chunks): formulas read it only as chunk(name, c).
  void addPacked(const std::string& name, ir::Expr leaf, int chunks) {
    packed_[name] = {std::move(leaf), chunks};
  }
  // A name a formula may not read where it is lowered: a let defined further down (until
  // defined() is called for it) or an output. Reading one is reported as that, with a note at
  // its definition, not as an unknown name.
  void declareLater(const std::string& name, const SourceLoc& loc, bool output) {
    later_[name] = {loc, output};
  }
  void defined(const std::string& name) { later_.erase(name); }
  // A bool attr: a number (0 or 1) in a value, and where a condition is expected (where's
  // first argument) the condition attr != 0, so that where(flag, a, b) reads as written.
  void addBoolAttr(const ir::Expr& attr) { boolAttrs_.insert(attr.get()); }
  // The random streams the calls lowered so far draw (ir::NodeKind::Random), stream k at k.
  const std::vector<ir::Expr>& randomStreams() const { return randomStreams_; }

private:
  struct CallFrame; // a call whose arguments are being lowered

  ir::Expr lowerName(const AstPtr& ast, const Scope& scope);
  // Pushes a call's frame, or reports why it cannot be called and returns false.
  bool enterCall(const AstPtr& ast, std::vector<CallFrame>& stack);
  // Appends one lowered argument (null: failed) and checks it against the parameter.
  void acceptArg(CallFrame& frame, ir::Expr arg);
  ir::Expr finishCall(CallFrame& frame);
  // pos(S), the index along the named dim S, or null after reporting why not.
  ir::Expr position(const AstPtr& ast);
  // chunk(gu, c) of a packed input, or null after reporting why not.
  ir::Expr chunk(const AstPtr& ast);
  ir::Expr inlineFunction(const cxx::UserFunction& f, const AstPtr& call,
                          std::vector<ir::Expr> args);

  const prims::PrimitiveLibrary& lib_;
  Diagnostics& diags_;
  const cxx::UserFunctions* functions_;
  std::vector<std::string> dims_;
  bool rules_ = false;
  std::map<std::string, std::pair<ir::Expr, int>> packed_;
  int inlineDepth_ = 0;
  // Where the spec calls the primitive expansion being lowered (a primitive defined by a
  // formula): its arguments' errors are reported there, not in primitives.yaml.
  std::optional<SourceLoc> expansionCall_;
  std::vector<ir::Expr> randomStreams_; // random parameters filled so far, by stream
  std::unordered_set<const ir::Node*> boolAttrs_;
  std::map<std::string, std::pair<SourceLoc, bool>> later_; // declareLater: (where, an output)
};

// `functions`: the spec's C++ functions (see cxx/FunctionImporter.h), inlined where called.
std::optional<ir::Function> lowerOp(const spec::OpSpec& spec, const prims::PrimitiveLibrary& lib,
                                    Diagnostics& diags,
                                    const cxx::UserFunctions* functions = nullptr);

} // namespace fusegen::expr
