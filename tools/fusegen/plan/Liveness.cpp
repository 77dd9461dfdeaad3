// Where a program reads its element inputs (plan/Liveness.h).
#include "plan/Liveness.h"

#include "prims/PrimitiveLibrary.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_set>

namespace fusegen::plan {

namespace {

// Bounds on a condition's size: past them a value counts as read everywhere, or a conjunction
// keeps the conditions it has (a weaker condition: read in more places, never fewer).
constexpr size_t kMaxDisjuncts = 4;
constexpr size_t kMaxConjuncts = 4;

using Conjunction = std::vector<std::pair<ir::Expr, bool>>;

bool sameConjunction(const Conjunction& a, const Conjunction& b) {
  if (a.size() != b.size()) return false;
  for (const auto& literal : a)
    if (std::find_if(b.begin(), b.end(), [&](const auto& o) {
          return o.first.get() == literal.first.get() && o.second == literal.second;
        }) == b.end())
      return false;
  return true;
}

// a without its literal of condition c where b is a with that literal negated, else nothing:
// (A and c) or (A and not c) is A.
std::optional<Conjunction> resolve(const Conjunction& a, const Conjunction& b) {
  if (a.size() != b.size()) return std::nullopt;
  for (size_t i = 0; i < a.size(); ++i) {
    Conjunction rest = a, negated = a;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
    negated[i].second = !negated[i].second;
    if (sameConjunction(negated, b)) return rest;
  }
  return std::nullopt;
}

// into |= from
void join(LiveWhen& into, const LiveWhen& from) {
  if (into.always || from.never()) return;
  if (from.always) {
    into = LiveWhen{true, {}};
    return;
  }
  for (Conjunction c : from.any) {
    // (Each resolution shortens c, so this ends.)
    for (size_t i = 0; i < into.any.size();) {
      if (std::optional<Conjunction> r = resolve(into.any[i], c)) {
        into.any.erase(into.any.begin() + static_cast<std::ptrdiff_t>(i));
        c = *r;
        i = 0;
      } else {
        ++i;
      }
    }
    if (c.empty()) {
      into = LiveWhen{true, {}};
      return;
    }
    if (std::none_of(into.any.begin(), into.any.end(),
                     [&](const Conjunction& o) { return sameConjunction(o, c); }))
      into.any.push_back(c);
  }
  if (into.any.size() > kMaxDisjuncts) into = LiveWhen{true, {}};
}

// w and (c holds == holds)
LiveWhen conjoin(const LiveWhen& w, const ir::Expr& c, bool holds) {
  if (w.never()) return w;
  if (w.always) return LiveWhen{false, {{{c, holds}}}};
  LiveWhen out;
  for (Conjunction conj : w.any) {
    bool contradicts = false, present = false;
    for (const auto& [o, h] : conj) {
      contradicts = contradicts || (o.get() == c.get() && h != holds);
      present = present || (o.get() == c.get() && h == holds);
    }
    if (contradicts) continue;
    if (!present && conj.size() < kMaxConjuncts) conj.push_back({c, holds});
    join(out, LiveWhen{false, {conj}});
  }
  return out;
}

bool elementwise(const ir::Node* n) {
  return n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Elementwise;
}

// Index-condition literals any one of which makes a value 0 or NaN (or -inf or NaN) at a
// column, whatever the element inputs hold there: a disjunction, at most kMaxConjuncts long.
using Literals = std::vector<std::pair<ir::Expr, bool>>;

void addLiterals(Literals& into, const Literals& from) {
  for (const auto& l : from)
    if (into.size() < kMaxConjuncts && std::none_of(into.begin(), into.end(), [&](const auto& o) {
          return o.first.get() == l.first.get() && o.second == l.second;
        }))
      into.push_back(l);
}

// -inf as a formula writes it (Sema: neg(inf)) or as a folded constant.
bool isNegInf(const ir::Node* n) {
  return n->isConst(-INFINITY) || (n->isCall("neg") && n->args()[0]->isConst(INFINITY));
}

// Where each elementwise value is 0 or NaN (zero) and -inf or NaN (negInf), from a where of
// an index condition with a literal branch and the primitives' `zero` and `neg_inf` claims.
struct Vanishing {
  std::unordered_map<const ir::Node*, Literals> zero, negInf;

  explicit Vanishing(const std::vector<const ir::Node*>& order) {
    for (const ir::Node* n : order) {
      if (!elementwise(n)) continue;
      const std::vector<ir::Expr>& args = n->args();
      if (n->isCall("where") && isIndexCondition(args[0].get())) {
        for (bool holds : {true, false}) {
          const ir::Node* branch = args[holds ? 1 : 2].get();
          if (branch->isConst(0)) zero[n].push_back({args[0], holds});
          if (isNegInf(branch)) negInf[n].push_back({args[0], holds});
        }
        continue;
      }
      auto of = [](std::unordered_map<const ir::Node*, Literals>& m, const ir::Expr& a) {
        auto it = m.find(a.get());
        return it == m.end() ? Literals{} : it->second;
      };
      switch (n->prim()->zero) {
      case prims::Zero::Product:
        addLiterals(zero[n], of(zero, args[0]));
        addLiterals(zero[n], of(zero, args[1]));
        break;
      case prims::Zero::First:
        addLiterals(zero[n], of(zero, args[0]));
        break;
      case prims::Zero::AtNegInf:
        addLiterals(zero[n], of(negInf, args[0]));
        break;
      case prims::Zero::None:
        break;
      }
      switch (n->prim()->negInf) {
      case prims::NegInf::Any:
        addLiterals(negInf[n], of(negInf, args[1]));
        [[fallthrough]];
      case prims::NegInf::First:
        addLiterals(negInf[n], of(negInf, args[0]));
        break;
      case prims::NegInf::None:
        break;
      }
    }
  }

  // w where none of the literals that make `factor` 0 holds.
  LiveWhen whereNonZero(LiveWhen w, const ir::Node* factor) const {
    auto it = zero.find(factor);
    if (it != zero.end())
      for (const auto& [c, holds] : it->second)
        w = conjoin(w, c, !holds);
    return w;
  }
};

bool elementLeaf(const ir::Node* n) {
  return (n->kind() == ir::NodeKind::Input || n->kind() == ir::NodeKind::GradOut) &&
         n->shape() == ir::ShapeClass::Full;
}

} // namespace

bool isIndexCondition(const ir::Node* c) {
  if (c->type() != ir::ValueType::Bool) return false;
  std::vector<const ir::Node*> todo{c};
  std::unordered_set<const ir::Node*> seen{c};
  while (!todo.empty()) {
    const ir::Node* n = todo.back();
    todo.pop_back();
    for (const ir::Expr& a : n->args())
      if (seen.insert(a.get()).second) todo.push_back(a.get());
    switch (n->kind()) {
    case ir::NodeKind::Const:
    case ir::NodeKind::Attr:
    case ir::NodeKind::Dim:
    case ir::NodeKind::Rows:
    case ir::NodeKind::Column:
    case ir::NodeKind::Position:
      break;
    case ir::NodeKind::Input: // (per-row and [] inputs: read before the row)
      if (n->shape() != ir::ShapeClass::Row && n->shape() != ir::ShapeClass::Scalar) return false;
      break;
    case ir::NodeKind::Call:
      if (!elementwise(n)) return false;
      break;
    default:
      return false;
    }
  }
  return true;
}

std::unordered_map<const ir::Node*, LiveWhen> liveness(const std::vector<ir::Expr>& roots) {
  std::unordered_map<const ir::Node*, LiveWhen> live;
  for (const ir::Expr& r : roots)
    if (r) live[r.get()] = LiveWhen{true, {}};
  std::vector<const ir::Node*> order = ir::topoOrder(roots);
  const Vanishing vanishing(order);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::Node* n = *it;
    const LiveWhen here = live[n];
    if (here.never() || n->kind() != ir::NodeKind::Call) continue;
    const std::vector<ir::Expr>& args = n->args();
    if (n->isCall("where") && isIndexCondition(args[0].get())) {
      join(live[args[1].get()], conjoin(here, args[0], true));
      join(live[args[2].get()], conjoin(here, args[0], false));
      join(live[args[0].get()], here);
      continue;
    }
    const LiveWhen reads = elementwise(n) ? here : LiveWhen{true, {}};
    if (n->prim()->zero == prims::Zero::Product) { // an element input times a vanishing factor
      for (size_t i = 0; i < 2; ++i)
        join(live[args[i].get()],
             elementLeaf(args[i].get()) ? vanishing.whereNonZero(reads, args[1 - i].get()) : reads);
      continue;
    }
    for (const ir::Expr& a : args)
      join(live[a.get()], reads);
  }
  return live;
}

} // namespace fusegen::plan
