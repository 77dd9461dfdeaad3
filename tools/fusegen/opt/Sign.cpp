// Sign analysis over the IR (opt/Sign.h).
#include "opt/Sign.h"

#include "prims/PrimitiveLibrary.h"

#include <vector>

namespace fusegen::opt {

// Whether e is never below 0 (NaN aside), from the primitives' `sign` claims
// (prims::Sign): a literal >= 0 or D; a call whose primitive is NonNegative; OfArgs with every
// value argument never below 0; a Product of two such values, or of one value with itself
// (x * x, the squares of norms). Inputs, attrs and gradients may be anything.
bool nonNegative(const ir::Node* e, std::unordered_map<const ir::Node*, bool>& memo) {
  switch (e->kind()) {
  case ir::NodeKind::Const:
    return e->value() >= 0;
  case ir::NodeKind::Dim:
  case ir::NodeKind::Rows:
  case ir::NodeKind::Column:
  case ir::NodeKind::Position:
  case ir::NodeKind::Random: // in [0, 1)
    return true;
  case ir::NodeKind::Call:
    break;
  default:
    return false;
  }
  auto it = memo.find(e);
  if (it != memo.end()) return it->second;
  const prims::Primitive& prim = *e->prim();
  std::vector<const ir::Node*> values;
  for (size_t i = 0; i < e->args().size(); ++i)
    if (prim.params[i].kind == prims::ParamKind::Value) values.push_back(e->args()[i].get());
  auto allNonNegative = [&] {
    for (const ir::Node* v : values)
      if (!nonNegative(v, memo)) return false;
    return true;
  };
  bool r = false;
  switch (prim.sign) {
  case prims::Sign::Any:
    break;
  case prims::Sign::NonNegative:
    r = true;
    break;
  case prims::Sign::OfArgs:
    r = allNonNegative();
    break;
  case prims::Sign::Product:
    r = (values.size() == 2 && values[0] == values[1]) || allNonNegative();
    break;
  }
  return memo[e] = r;
}

} // namespace fusegen::opt
