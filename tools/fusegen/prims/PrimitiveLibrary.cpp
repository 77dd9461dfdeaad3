// Loading and checking the primitive library (templates/primitives.yaml).
#include "prims/PrimitiveLibrary.h"

#include "expr/Parser.h"
#include "prims/Builtins.h"
#include "specfile/SpecLoader.h"
#include "support/FileWriter.h"
#include "support/FormulaLocator.h"
#include "support/Identifier.h"
#include "support/SourceFile.h"

#include <yaml-cpp/yaml.h>

#include <functional>
#include <optional>
#include <set>
#include <sstream>

namespace fusegen::prims {

const char* combineName(Combine c) {
  switch (c) {
  case Combine::Sum:
    return "sum";
  case Combine::Max:
    return "max";
  case Combine::Min:
    break;
  }
  return "min";
}

const char* moveName(Move m) {
  switch (m) {
  case Move::SwapHalves:
    return "swap_halves";
  case Move::SwapPairs:
    return "swap_pairs";
  case Move::Roll:
    return "roll";
  case Move::None:
    break;
  }
  return "none";
}

long long moveColumn(Move m, long long j, long long D, long long shift) {
  switch (m) {
  case Move::SwapHalves:
    return j < D / 2 ? j + D / 2 : j - D / 2;
  case Move::SwapPairs:
    return j ^ 1;
  case Move::Roll: {
    if (D <= 0) return j;
    const long long c = (j - shift % D) % D;
    return c < 0 ? c + D : c;
  }
  case Move::None:
    break;
  }
  return j;
}

bool moveNeedsEvenD(Move m) {
  return m == Move::SwapHalves || m == Move::SwapPairs;
}

bool moveSelfInverse(Move m) {
  return m == Move::SwapHalves || m == Move::SwapPairs;
}

bool movesCompose(Move outer, Move inner) {
  auto rollLike = [](Move m) { return m == Move::Roll || m == Move::SwapHalves; };
  return (outer == inner && moveSelfInverse(outer)) || (rollLike(outer) && rollLike(inner));
}

int Primitive::paramIndex(const std::string& n) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == n) return static_cast<int>(i);
  return -1;
}

size_t Primitive::arity() const {
  size_t n = 0;
  for (const Param& p : params)
    n += p.kind != ParamKind::Random;
  return n;
}

std::string Primitive::signature() const {
  std::string s = name + "(";
  for (size_t i = 0; i < params.size(); ++i) {
    s += (i ? ", " : "") + params[i].name;
    if (params[i].kind == ParamKind::Bool) s += ": bool";
    if (params[i].kind == ParamKind::Const) s += ": const";
    if (params[i].kind == ParamKind::Random) s += ": random";
  }
  return s + ")";
}

namespace {

SourceLoc locOf(const std::string& path, const YAML::Node& n) {
  return SourceLoc{path, n.Mark().line + 1, n.Mark().column + 1};
}

// "name(a, b: bool, p: const)" -> name and params.
bool parseSignature(const std::string& text, Primitive& p) {
  size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close != text.size() - 1) return false;
  p.name = text.substr(0, open);
  if (!isIdentifier(p.name)) return false;
  std::string inner = text.substr(open + 1, close - open - 1);
  size_t start = 0;
  while (start <= inner.size()) {
    size_t comma = inner.find(',', start);
    std::string part =
        inner.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(' '));
      s.erase(s.find_last_not_of(' ') + 1);
      return s;
    };
    Param param;
    size_t colon = part.find(':');
    param.name = trim(part.substr(0, colon));
    if (colon != std::string::npos) {
      std::string kind = trim(part.substr(colon + 1));
      if (kind == "bool")
        param.kind = ParamKind::Bool;
      else if (kind == "const")
        param.kind = ParamKind::Const;
      else if (kind == "random")
        param.kind = ParamKind::Random;
      else
        return false;
    }
    if (param.kind != ParamKind::Random && !p.params.empty() &&
        p.params.back().kind == ParamKind::Random)
      return false; // random parameters come last: the caller passes the others
    if (!isIdentifier(param.name)) return false;
    p.params.push_back(param);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

// Checks that every name in `ast` is allowed and every call is known to `arityOf` (which
// returns -1 for unknown functions, -2 for any arity).
void checkNames(const expr::AstPtr& ast, const std::set<std::string>& names,
                const std::function<int(const std::string&)>& arityOf, Diagnostics& diags) {
  if (ast->kind == expr::Ast::Kind::Name && !names.count(ast->name))
    diags.error(ast->loc, "unknown name '" + ast->name + "' in primitive formula");
  if (ast->kind == expr::Ast::Kind::Call) {
    int arity = arityOf(ast->name);
    if (arity == -1)
      diags.error(ast->loc, "unknown function '" + ast->name + "' in primitive formula");
    else if (arity >= 0 && arity != static_cast<int>(ast->args.size()))
      diags.error(ast->loc, "'" + ast->name + "' takes " + std::to_string(arity) +
                                " argument(s), got " + std::to_string(ast->args.size()));
  }
  for (const expr::AstPtr& a : ast->args)
    checkNames(a, names, arityOf, diags);
}

// Whether a formula over builtins maps integers to integers: its calls are + - * unary -,
// abs, select and comparisons, and its numbers integers (Primitive::integerClosed).
bool integerClosedFormula(const expr::AstPtr& ast) {
  static const std::set<std::string> closed = {"add", "sub", "mul", "neg", "abs", "select",
                                               "lt",  "le",  "gt",  "ge",  "eq",  "ne"};
  if (ast->kind == expr::Ast::Kind::Number) return ast->integer;
  if (ast->kind == expr::Ast::Kind::Call && !closed.count(ast->name)) return false;
  for (const expr::AstPtr& a : ast->args)
    if (!integerClosedFormula(a)) return false;
  return true;
}

// A key whose value is one of a few spellings (kind, combine, sign, zero, neg_inf): `into` set to
// the one v spells, else the error "<key> must be a, b or c" at v.
template <class T>
void readChoice(const YAML::Node& v, const SourceLoc& vloc, const std::string& key,
                std::initializer_list<std::pair<const char*, T>> choices, T& into,
                Diagnostics& diags) {
  std::string spelled;
  size_t i = 0;
  for (const auto& [name, value] : choices) {
    if (v.Scalar() == name) {
      into = value;
      return;
    }
    spelled += std::string(i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + name;
    ++i;
  }
  diags.error(vloc, key + " must be " + spelled);
}

} // namespace

std::optional<PrimitiveLibrary> PrimitiveLibrary::loadFromString(const std::string& path,
                                                                 const std::string& text,
                                                                 Diagnostics& diags) {
  diags.addFile(path, text);
  int errorsBefore = diags.errorCount();
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    diags.error(SourceLoc{path, e.mark.line + 1, e.mark.column + 1}, "invalid YAML: " + e.msg);
    return std::nullopt;
  }
  if (!root.IsSequence()) {
    diags.error(SourceLoc{path, 1, 1}, "the primitive library must be a list of entries");
    return std::nullopt;
  }
  std::vector<std::string> lines;
  {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
      lines.push_back(line);
  }
  auto parse = [&](const YAML::Node& v) {
    return expr::parseFormula(v.Scalar(), locateChars(lines, locOf(path, v), v.Scalar()), diags);
  };
  PrimitiveLibrary lib;
  std::vector<std::pair<std::shared_ptr<Primitive>, std::optional<YAML::Node>>> pending;
  for (const YAML::Node& entry : root) {
    if (!entry.IsMap()) {
      diags.error(locOf(path, entry), "a primitive entry must be a mapping");
      continue;
    }
    auto p = std::make_shared<Primitive>();
    p->loc = locOf(path, entry);
    std::optional<YAML::Node> gradNode, expandNode;
    std::set<std::string> seen;
    bool named = false, evalGiven = false;
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      // Copies: the iterator's pair is a temporary proxy, so a reference into it dangles.
      const std::string key = it->first.Scalar();
      const YAML::Node v = it->second;
      SourceLoc vloc = locOf(path, v);
      if (!seen.insert(key).second) {
        diags.error(locOf(path, it->first), "duplicate key '" + key + "'");
        continue;
      }
      if (key == "name") {
        named = parseSignature(v.Scalar(), *p);
        if (!named)
          diags.error(
              vloc,
              "malformed signature '" + v.Scalar() +
                  "'; expected name(a, b: bool, p: const, u: random), random parameters last");
        p->loc = vloc;
      } else if (key == "doc") {
        p->doc = v.Scalar();
      } else if (key == "kind") {
        readChoice(v, vloc, key,
                   {{"elementwise", PrimKind::Elementwise},
                    {"reduction", PrimKind::Reduction},
                    {"total", PrimKind::Total},
                    {"column", PrimKind::Column},
                    {"move", PrimKind::Move},
                    {"view", PrimKind::View}},
                   p->kind, diags);
      } else if (key == "move") {
        for (Move m : {Move::SwapHalves, Move::SwapPairs, Move::Roll})
          if (v.Scalar() == moveName(m)) p->move = m;
        if (p->move == Move::None)
          diags.error(vloc, "move must be swap_halves, swap_pairs or roll");
      } else if (key == "expand") {
        expandNode = v;
      } else if (key == "returns") {
        if (v.Scalar() == "bool")
          p->returnsBool = true;
        else if (v.Scalar() != "value")
          diags.error(vloc, "returns must be value or bool");
      } else if (key == "combine") {
        readChoice(v, vloc, key,
                   {{"sum", Combine::Sum}, {"max", Combine::Max}, {"min", Combine::Min}},
                   p->combine, diags);
      } else if (key == "finish") {
        p->finish = parse(v);
      } else if (key == "eval") {
        evalGiven = true;
        p->eval = parse(v);
      } else if (key == "torch") {
        p->torch = v.Scalar();
      } else if (key == "grad") {
        gradNode = v;
      } else if (key == "sign") {
        readChoice(v, vloc, key,
                   {{"nonnegative", Sign::NonNegative},
                    {"of_args", Sign::OfArgs},
                    {"product", Sign::Product}},
                   p->sign, diags);
      } else if (key == "zero") {
        readChoice(
            v, vloc, key,
            {{"product", Zero::Product}, {"first", Zero::First}, {"at_neg_inf", Zero::AtNegInf}},
            p->zero, diags);
      } else if (key == "neg_inf") {
        readChoice(v, vloc, key, {{"first", NegInf::First}, {"any", NegInf::Any}}, p->negInf,
                   diags);
      } else if (key == "declares_gradient") {
        const std::string flag = v.Scalar();
        if (flag != "true" && flag != "false" && flag != "surrogate")
          diags.error(vloc, "declares_gradient must be true, false or surrogate");
        p->declaresGradient = flag == "true" || flag == "surrogate";
        p->surrogateGradient = flag == "surrogate";
      } else {
        diags.error(locOf(path, it->first),
                    "unknown key '" + key +
                        "'; expected name, doc, kind, returns, eval, "
                        "combine, finish, sign, zero, neg_inf, torch, grad, "
                        "declares_gradient, move, expand");
      }
    }
    if (!named) continue;
    if (lib.find(p->name, p->arity())) {
      diags.error(p->loc, "primitive '" + p->name + "' with " + std::to_string(p->arity()) +
                              " parameter(s) is defined twice");
      continue;
    }
    if (expandNode) {
      p->expand = parse(*expandNode);
      if (evalGiven || !p->torch.empty() || gradNode || p->kind != PrimKind::Elementwise)
        diags.error(p->loc, "primitive '" + p->name +
                                "' is an expansion: it takes no eval, torch, grad or kind");
      gradNode.reset();
    } else {
      if (p->torch.empty())
        diags.error(p->loc, "primitive '" + p->name + "' needs a 'torch' spelling");
      if (!evalGiven && p->kind == PrimKind::Elementwise)
        diags.error(p->loc, "primitive '" + p->name + "' needs an 'eval' formula");
    }
    if (p->kind == PrimKind::Column && (p->combine != Combine::Sum || p->finish))
      diags.error(p->loc, "primitive '" + p->name +
                              "': a reduction over rows combines by sum and takes no finish "
                              "(a mean is a formula over it: colsum(x) / rows, an expansion)");
    if ((p->kind == PrimKind::Move) != (p->move != Move::None))
      diags.error(p->loc, "primitive '" + p->name +
                              "': a move names its permutation (move: "
                              "swap_halves, swap_pairs or roll), and only a move");
    // The runtime reads a moved value with the move's own parameters: the swaps have none, a
    // roll its shift (fg::Move).
    if (p->move != Move::None) {
      const bool shifted = p->move == Move::Roll;
      const bool fits = p->params.size() == (shifted ? 2u : 1u) &&
                        p->params[0].kind == ParamKind::Value &&
                        (!shifted || p->params[1].kind == ParamKind::Const);
      if (!fits)
        diags.error(p->loc,
                    "primitive '" + p->name + "': a move of kind " + moveName(p->move) + " takes " +
                        (shifted ? "the value and its shift, as roll(x, k: const)"
                                 : "one value, as " + std::string(moveName(p->move)) + "(x)"));
    }
    p->integerClosed = p->kind != PrimKind::Elementwise ? !p->finish
                       : p->eval                        ? integerClosedFormula(p->eval)
                                                        : false;
    lib.byName_[p->name].push_back(p.get());
    lib.prims_.push_back(p);
    pending.emplace_back(p, gradNode);
  }

  // Derivative rules may call any primitive, so they are checked once all are known.
  // -1: unknown; -2: overloaded (the arity is checked when the rule is instantiated).
  auto primArity = [&](const std::string& n) {
    auto it = lib.byName_.find(n);
    if (it == lib.byName_.end()) return -1;
    return it->second.size() == 1 ? static_cast<int>(it->second.front()->arity()) : -2;
  };
  auto builtinArity = [](const std::string& n) {
    const Builtin* b = findBuiltin(n);
    return b ? b->arity : -1;
  };
  for (auto& [p, gradNode] : pending) {
    std::set<std::string> paramNames;
    for (const Param& param : p->params)
      paramNames.insert(param.name);
    if (p->eval) checkNames(p->eval, paramNames, builtinArity, diags);
    if (p->finish) checkNames(p->finish, {"acc", "D"}, builtinArity, diags);
    p->grads.assign(p->params.size(), nullptr);
    if (p->expand) {
      std::set<std::string> names = paramNames;
      names.insert("j");
      names.insert("D");
      names.insert("rows");
      checkNames(p->expand, names, primArity, diags);
      continue; // (its derivative is its expansion's)
    }
    std::set<std::string> ruleNames = paramNames;
    ruleNames.insert("grad");
    ruleNames.insert("result");
    ruleNames.insert("D");
    ruleNames.insert("rows");
    if (gradNode && !gradNode->IsMap()) {
      diags.error(locOf(path, *gradNode), "'grad' must map parameter names to rules");
      continue;
    }
    std::set<int> ruleGiven;
    if (gradNode) {
      for (auto it = gradNode->begin(); it != gradNode->end(); ++it) {
        std::string param = it->first.Scalar();
        int idx = p->paramIndex(param);
        SourceLoc kloc = locOf(path, it->first);
        if (idx < 0) {
          diags.error(kloc, "'" + param + "' is not a parameter of " + p->signature());
          continue;
        }
        if (p->params[idx].kind != ParamKind::Value) {
          diags.error(kloc, "'" + param +
                                "' is not differentiable (bool, const or random); drop its rule");
          continue;
        }
        ruleGiven.insert(idx);
        p->grads[idx] = parse(it->second);
        if (p->grads[idx]) checkNames(p->grads[idx], ruleNames, primArity, diags);
      }
    }
    for (size_t i = 0; i < p->params.size(); ++i)
      if (p->params[i].kind == ParamKind::Value && !ruleGiven.count(static_cast<int>(i)))
        diags.error(p->loc, "primitive '" + p->name + "' has no derivative rule for '" +
                                p->params[i].name + "'");
  }
  // Reverse-mode AD itself builds sums, differences, products, quotients, negations and
  // row sums of adjoints (checked once the entries themselves are valid).
  std::string missing;
  for (auto [name, arity] : std::initializer_list<std::pair<const char*, size_t>>{
           {"add", 2}, {"sub", 2}, {"mul", 2}, {"div", 2}, {"neg", 1}, {"sum", 1}})
    if (!lib.find(name, arity))
      missing += std::string(missing.empty() ? "" : ", ") + name + "/" + std::to_string(arity);
  if (!missing.empty() && diags.errorCount() == errorsBefore)
    diags.error(SourceLoc{path, 0, 0}, "the primitive library lacks " + missing +
                                           " (name/arity), which reverse-mode AD needs");
  if (diags.errorCount() != errorsBefore) return std::nullopt;
  return lib;
}

std::optional<PrimitiveLibrary> PrimitiveLibrary::load(const std::string& path,
                                                       Diagnostics& diags) {
  std::optional<std::string> text = readSourceFile(path, diags, SourceLoc{path, 0, 0});
  if (!text) return std::nullopt;
  // The nesting limit and the one-document rule of specs, reported with a location.
  diags.addFile(path, *text);
  if (!spec::checkYamlStructure(path, *text, diags)) return std::nullopt;
  return loadFromString(path, *text, diags);
}

const Primitive* PrimitiveLibrary::find(const std::string& name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : it->second.front();
}

const Primitive* PrimitiveLibrary::find(const std::string& name, size_t arity) const {
  for (const Primitive* p : overloads(name))
    if (p->arity() == arity) return p;
  return nullptr;
}

std::vector<const Primitive*> PrimitiveLibrary::overloads(const std::string& name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? std::vector<const Primitive*>{} : it->second;
}

std::vector<std::string> PrimitiveLibrary::names() const {
  std::vector<std::string> out;
  for (const auto& [name, prims] : byName_)
    out.push_back(name);
  return out;
}

} // namespace fusegen::prims
