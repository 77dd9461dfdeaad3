// Translation of Clang ASTs of scalar device functions into spec-language formulas.
#include "cxx/FunctionImporter.h"

#include <clang/AST/ASTContext.h>
#include <clang/AST/Attr.h>
#include <clang/AST/Decl.h>
#include <clang/AST/Expr.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/Stmt.h>
#include <clang/Frontend/ASTUnit.h>
#include <clang/Tooling/Tooling.h>

#include <cctype>

namespace fusegen::cxx {

namespace {

// The standard math functions a body may call, and the primitives they become.
const std::map<std::string, std::string> kMath = {
    {"expf", "exp"},     {"exp", "exp"},     {"expm1f", "expm1"}, {"expm1", "expm1"},
    {"logf", "log"},     {"log", "log"},     {"log1pf", "log1p"}, {"log1p", "log1p"},
    {"tanhf", "tanh"},   {"tanh", "tanh"},   {"erff", "erf"},     {"erf", "erf"},
    {"sqrtf", "sqrt"},   {"sqrt", "sqrt"},   {"rsqrtf", "rsqrt"}, {"rsqrt", "rsqrt"},
    {"fabsf", "abs"},    {"fabs", "abs"},    {"powf", "pow"},     {"pow", "pow"},
    {"fmaxf", "max"},    {"fmax", "max"},    {"fminf", "min"},    {"fmin", "min"},
    {"sinf", "sin"},     {"sin", "sin"},     {"cosf", "cos"},     {"cos", "cos"},
    {"floorf", "floor"}, {"floor", "floor"}, {"ceilf", "ceil"},   {"ceil", "ceil"},
    {"rintf", "round"},  {"rint", "round"},  {"truncf", "trunc"}, {"trunc", "trunc"}};

constexpr const char* kDerivativeTag = "fusegen_derivative:";

// Declarations of the math functions, so headers need no system or CUDA includes, and
// FUSEGEN_DERIVATIVE as an annotation Clang keeps in the AST. (Headers that other compilers
// also see define FUSEGEN_DERIVATIVE(...) as nothing when it is not defined.)
std::string prelude() {
  std::string p = std::string("#define FUSEGEN_DERIVATIVE(...) __attribute__((annotate(\"") +
                  kDerivativeTag + "\" #__VA_ARGS__)))\n";
  for (const auto& [name, prim] : kMath) {
    bool binary = prim == "pow" || prim == "max" || prim == "min";
    const char* t = name.back() == 'f' ? "float" : "double";
    p += std::string(t) + " " + name + "(" + t + (binary ? std::string(", ") + t : "") + ");\n";
  }
  return p;
}

class Translator {
public:
  Translator(clang::ASTUnit& unit, const std::string& path, Diagnostics& diags,
             const std::map<std::string, const clang::FunctionDecl*>& headerFunctions)
      : unit_(unit), path_(path), diags_(diags), headerFunctions_(headerFunctions) {}

  SourceLoc loc(clang::SourceLocation l) const {
    clang::PresumedLoc p = unit_.getSourceManager().getPresumedLoc(l);
    if (p.isInvalid()) return SourceLoc{path_, 0, 0};
    return SourceLoc{path_, static_cast<int>(p.getLine()), static_cast<int>(p.getColumn())};
  }

  std::optional<UserFunction> function(const clang::FunctionDecl& f) {
    UserFunction out;
    out.name = f.getNameAsString();
    out.loc = loc(f.getLocation());
    bool ok = true;
    if (!f.getReturnType()->isRealFloatingType()) {
      diags_.error(out.loc, "function '" + out.name + "' must return float");
      ok = false;
    }
    for (const clang::ParmVarDecl* p : f.parameters()) {
      if (!p->getType()->isRealFloatingType()) {
        diags_.error(loc(p->getLocation()), "parameter '" + p->getNameAsString() + "' of '" +
                                                out.name + "' must be a float (not " +
                                                p->getType().getAsString() + ")");
        ok = false;
      }
      out.params.push_back(p->getNameAsString());
    }
    for (const auto* note : f.specific_attrs<clang::AnnotateAttr>()) {
      llvm::StringRef text = note->getAnnotation();
      if (!text.consume_front(kDerivativeTag)) continue;
      llvm::SmallVector<llvm::StringRef, 4> names;
      text.split(names, ',');
      for (llvm::StringRef n : names)
        if (!n.trim().empty()) out.derivatives.push_back(n.trim().str());
      ok = derivativesValid(f, out, loc(note->getLocation())) && ok;
    }
    const auto* body = llvm::dyn_cast_or_null<clang::CompoundStmt>(f.getBody());
    if (!ok || !body) return std::nullopt;
    locals_.clear();
    for (const clang::Stmt* s : body->body()) {
      if (const auto* decl = llvm::dyn_cast<clang::DeclStmt>(s)) {
        for (const clang::Decl* d : decl->decls()) {
          const auto* v = llvm::dyn_cast<clang::VarDecl>(d);
          if (!v || !v->hasInit() || !v->getType().isConstQualified() ||
              !v->getType()->isRealFloatingType()) {
            diags_.error(loc(d->getLocation()),
                         "only 'const float' locals with an initializer can be translated");
            return std::nullopt;
          }
          expr::AstPtr init = expr(v->getInit());
          if (!init) return std::nullopt;
          locals_[v] = init;
        }
      } else if (const auto* ret = llvm::dyn_cast<clang::ReturnStmt>(s)) {
        out.body = ret->getRetValue() ? expr(ret->getRetValue()) : nullptr;
        if (!out.body) return std::nullopt;
        if (s != body->body_back()) {
          diags_.error(loc(s->getBeginLoc()), "statements after the return cannot be translated");
          return std::nullopt;
        }
      } else {
        diags_.error(loc(s->getBeginLoc()),
                     std::string("cannot translate a ") + s->getStmtClassName() +
                         " (a body is const locals and one return; write a branch as a ?: "
                         "conditional)");
        return std::nullopt;
      }
    }
    if (!out.body) {
      diags_.error(out.loc, "function '" + out.name + "' has no return statement");
      return std::nullopt;
    }
    return out;
  }

private:
  // FUSEGEN_DERIVATIVE names one function of this header per parameter, each taking the
  // same number of parameters.
  bool derivativesValid(const clang::FunctionDecl& f, const UserFunction& out,
                        const SourceLoc& at) {
    if (out.derivatives.size() != out.params.size()) {
      diags_.error(at, "'" + out.name + "' has " + std::to_string(out.params.size()) +
                           " parameter(s), but FUSEGEN_DERIVATIVE names " +
                           std::to_string(out.derivatives.size()) +
                           " function(s); name one derivative per parameter");
      return false;
    }
    bool ok = true;
    for (const std::string& d : out.derivatives) {
      auto it = headerFunctions_.find(d);
      if (it == headerFunctions_.end()) {
        diags_.error(at, "FUSEGEN_DERIVATIVE of '" + out.name + "' names '" + d +
                             "', which this header does not define");
        ok = false;
      } else if (it->second->getNumParams() != f.getNumParams()) {
        diags_.error(at, "'" + d + "', a derivative of '" + out.name + "', takes " +
                             std::to_string(it->second->getNumParams()) +
                             " parameter(s); it must "
                             "take the same " +
                             std::to_string(f.getNumParams()) + " as '" + out.name + "'");
        ok = false;
      }
    }
    return ok;
  }

  expr::AstPtr fail(const clang::Stmt* e, const std::string& msg) {
    diags_.error(loc(e->getBeginLoc()), msg);
    return nullptr;
  }

  expr::AstPtr call(const char* name, std::vector<expr::AstPtr> args, const clang::Stmt* e) {
    for (const expr::AstPtr& a : args)
      if (!a) return nullptr;
    return expr::Ast::makeCall(name, std::move(args), loc(e->getBeginLoc()));
  }

  // An integer (not bool) subexpression has C++'s integer semantics (1 / 2 is 0, 7 % 4 is 3),
  // which the formula language, all floating point, does not have: it is folded to its value
  // by Clang's constant evaluator, then converted to the floating type `to` it is used as
  // (float rounds a large int), as C++ converts it. A ?: with integer branches keeps its
  // condition; any other integer arithmetic on values that are not constants is an error.
  expr::AstPtr integer(const clang::Expr* e, clang::QualType to) {
    e = e->IgnoreParens();
    clang::Expr::EvalResult r;
    if (e->EvaluateAsInt(r, unit_.getASTContext())) {
      const llvm::APSInt& v = r.Val.getInt();
      if (v.getBitWidth() > 64) return fail(e, "integers wider than 64 bits cannot be translated");
      const auto* b = to->getAs<clang::BuiltinType>();
      const bool toFloat = b && b->getKind() == clang::BuiltinType::Float;
      double d = v.isSigned() ? (toFloat ? static_cast<float>(v.getExtValue())
                                         : static_cast<double>(v.getExtValue()))
                              : (toFloat ? static_cast<float>(v.getZExtValue())
                                         : static_cast<double>(v.getZExtValue()));
      return expr::Ast::makeNumber(d, loc(e->getBeginLoc()));
    }
    if (const auto* c = llvm::dyn_cast<clang::ConditionalOperator>(e))
      return call("where",
                  {expr(c->getCond()), integer(c->getTrueExpr()->IgnoreParenImpCasts(), to),
                   integer(c->getFalseExpr()->IgnoreParenImpCasts(), to)},
                  e);
    return fail(e, "integer arithmetic on values that are not constants cannot be translated "
                   "(C++ would compute it in int); write it in float");
  }

  expr::AstPtr expr(const clang::Expr* e) {
    const clang::QualType to = e->IgnoreParens()->getType(); // the type a value is used as
    e = e->IgnoreParenImpCasts();
    if (e->getType()->isIntegralOrEnumerationType() && !e->getType()->isBooleanType())
      return integer(e, to);
    SourceLoc l = loc(e->getBeginLoc());
    if (const auto* f = llvm::dyn_cast<clang::FloatingLiteral>(e))
      return expr::Ast::makeNumber(f->getValueAsApproximateDouble(), l);
    if (const auto* c = llvm::dyn_cast<clang::ExplicitCastExpr>(e)) {
      if (!c->getType()->isRealFloatingType())
        return fail(e, "casts to " + c->getType().getAsString() + " cannot be translated");
      return expr(c->getSubExpr());
    }
    if (const auto* ref = llvm::dyn_cast<clang::DeclRefExpr>(e)) {
      const clang::ValueDecl* d = ref->getDecl();
      if (llvm::isa<clang::ParmVarDecl>(d)) return expr::Ast::makeName(d->getNameAsString(), l);
      auto it = locals_.find(d);
      if (it != locals_.end()) return it->second;
      return fail(e, "reads '" + d->getNameAsString() +
                         "', which is neither a parameter nor a local (globals cannot be "
                         "translated)");
    }
    if (const auto* u = llvm::dyn_cast<clang::UnaryOperator>(e)) {
      if (u->getOpcode() == clang::UO_Plus) return expr(u->getSubExpr());
      if (u->getOpcode() == clang::UO_Minus) return call("neg", {expr(u->getSubExpr())}, e);
      return fail(e, std::string("cannot translate the operator '") +
                         clang::UnaryOperator::getOpcodeStr(u->getOpcode()).str() + "'");
    }
    if (const auto* b = llvm::dyn_cast<clang::BinaryOperator>(e)) {
      static const std::map<clang::BinaryOperatorKind, const char*> ops = {
          {clang::BO_Add, "add"}, {clang::BO_Sub, "sub"}, {clang::BO_Mul, "mul"},
          {clang::BO_Div, "div"}, {clang::BO_LT, "lt"},   {clang::BO_LE, "le"},
          {clang::BO_GT, "gt"},   {clang::BO_GE, "ge"},   {clang::BO_EQ, "eq"},
          {clang::BO_NE, "ne"}};
      auto it = ops.find(b->getOpcode());
      if (it == ops.end())
        return fail(e, "cannot translate the operator '" + b->getOpcodeStr().str() + "'");
      return call(it->second, {expr(b->getLHS()), expr(b->getRHS())}, e);
    }
    if (const auto* c = llvm::dyn_cast<clang::ConditionalOperator>(e))
      return call("where", {expr(c->getCond()), expr(c->getTrueExpr()), expr(c->getFalseExpr())},
                  e);
    if (const auto* c = llvm::dyn_cast<clang::CallExpr>(e)) {
      const clang::FunctionDecl* callee = c->getDirectCallee();
      std::string name = callee ? callee->getNameAsString() : "";
      std::vector<expr::AstPtr> args;
      for (const clang::Expr* a : c->arguments())
        args.push_back(expr(a));
      for (const expr::AstPtr& a : args)
        if (!a) return nullptr;
      auto math = kMath.find(name);
      if (math != kMath.end()) return expr::Ast::makeCall(math->second, std::move(args), l);
      if (headerFunctions_.count(name)) return expr::Ast::makeCall(name, std::move(args), l);
      return fail(e, "cannot translate the call of '" + name +
                         "': only the standard math functions and this header's functions");
    }
    return fail(e, std::string("cannot translate a ") + e->getStmtClassName());
  }

  clang::ASTUnit& unit_;
  const std::string& path_;
  Diagnostics& diags_;
  const std::map<std::string, const clang::FunctionDecl*>& headerFunctions_;
  std::map<const clang::ValueDecl*, expr::AstPtr> locals_;
};

// A header is self-contained: Clang would follow an #include (or answer __has_include) to
// any file on the machine, so those are refused before Clang sees the text. Directives are
// found on logical lines (backslash-newlines joined), with spaces allowed around the '#'.
bool rejectInclusions(const std::string& path, const std::string& text, Diagnostics& diags) {
  bool ok = true;
  int line = 1;
  size_t start = 0;
  while (start < text.size()) {
    // One logical line: [start, end), spanning physical lines that end in a backslash.
    size_t end = start;
    int lines = 1;
    while (end < text.size() && text[end] != '\n') {
      if (text[end] == '\\' && end + 1 < text.size() && text[end + 1] == '\n') {
        ++lines;
        ++end;
      }
      ++end;
    }
    std::string logical;
    for (size_t i = start; i < end; ++i)
      if (!(text[i] == '\\' && i + 1 < end && text[i + 1] == '\n') && text[i] != '\n')
        logical += text[i];
    size_t hash = logical.find_first_not_of(" \t");
    if (hash != std::string::npos && logical[hash] == '#') {
      size_t word = logical.find_first_not_of(" \t", hash + 1);
      std::string directive;
      while (word != std::string::npos && word < logical.size() &&
             (std::isalpha(static_cast<unsigned char>(logical[word])) || logical[word] == '_'))
        directive += logical[word++];
      if (directive == "include" || directive == "include_next" || directive == "import" ||
          directive == "embed") {
        diags.error(SourceLoc{path, line, static_cast<int>(hash) + 1},
                    "a functions header cannot #" + directive +
                        " other files; it must be self-contained (the math functions are "
                        "declared for it)");
        ok = false;
      }
    }
    size_t probe = logical.find("__has_include");
    if (probe != std::string::npos) {
      diags.error(SourceLoc{path, line, static_cast<int>(probe) + 1},
                  "a functions header cannot use __has_include; it must be self-contained");
      ok = false;
    }
    line += lines;
    start = end + 1;
  }
  return ok;
}

} // namespace

std::optional<UserFunctions> importFunctions(const std::string& path, const std::string& text,
                                             Diagnostics& diags) {
  diags.addFile(path, text);
  int errorsBefore = diags.errorCount();
  if (!rejectInclusions(path, text, diags)) return std::nullopt;
  const std::string code = prelude() + "#line 1 \"" + path + "\"\n" + text;
  std::unique_ptr<clang::ASTUnit> unit = clang::tooling::buildASTFromCodeWithArgs(
      code,
      {"-x", "c++", "-std=c++17", "-fsyntax-only",
       "-D__host__=", "-D__device__=", "-D__forceinline__=inline"},
      "fusegen-functions.cpp");
  if (!unit || unit->getDiagnostics().hasErrorOccurred()) {
    diags.error(SourceLoc{path, 0, 0}, "clang could not parse this header (its errors are above)");
    return std::nullopt;
  }
  std::vector<const clang::FunctionDecl*> defined;
  std::map<std::string, const clang::FunctionDecl*> names;
  for (const clang::Decl* d : unit->getASTContext().getTranslationUnitDecl()->decls()) {
    const auto* f = llvm::dyn_cast<clang::FunctionDecl>(d);
    if (!f || !f->hasBody()) continue;
    clang::PresumedLoc p = unit->getSourceManager().getPresumedLoc(f->getLocation());
    if (p.isInvalid() || path != p.getFilename()) continue;
    defined.push_back(f);
    names[f->getNameAsString()] = f;
  }
  Translator t(*unit, path, diags, names);
  UserFunctions out;
  for (const clang::FunctionDecl* f : defined)
    if (std::optional<UserFunction> u = t.function(*f)) out[u->name] = *u;
  if (diags.errorCount() != errorsBefore) return std::nullopt;
  return out;
}

} // namespace fusegen::cxx
