// Where a program reads its element inputs: the conditions on the column j and the row (its
// positions, [...] and [] inputs: what the row plan knows before it loads the row) under which
// an input's value reaches an output. A where whose condition is such an index condition reads
// its first branch only where the condition holds and its second only where it fails, so a
// causal softmax's scores, where(j > pos(S), -inf, x * scale), are read only where j <= pos(S):
// the row plan loads none of a vector whose columns all fail, as Megatron-LM's causal softmax
// reads no key after its query. A product reads an element input only where its other factor
// may be nonzero: where index conditions make that factor 0 or NaN (a where with a literal 0
// or -inf branch, carried through the primitives' `zero` and `neg_inf` claims), the row plan
// loads 0 for the input, which gives the same product for any finite value; so the causal
// softmax's backward reads no gradient past the query either, where the probability is
// exp(-inf - m) = 0 (as Megatron-LM's; a non-finite gradient there is not propagated, where
// torch's softmax backward would give NaN). Everything else reads its arguments wherever it is
// read itself; reductions, moves and views read them everywhere (their arguments' columns or
// rows are not theirs).
#pragma once

#include "ir/Node.h"

#include <unordered_map>
#include <utility>
#include <vector>

namespace fusegen::plan {

// A disjunction of conjunctions of (index condition, whether it holds); `always` where the
// value is read everywhere (the conjunctions are then empty).
struct LiveWhen {
  bool always = false;
  std::vector<std::vector<std::pair<ir::Expr, bool>>> any;

  bool never() const { return !always && any.empty(); }
};

// Whether c is an index condition: a Bool value of j, positions, per-row and [] inputs, attrs,
// D, rows and literals through elementwise primitives (no element input, no reduction).
bool isIndexCondition(const ir::Node* c);

// Where each node reachable from `roots` is read, every root everywhere.
std::unordered_map<const ir::Node*, LiveWhen> liveness(const std::vector<ir::Expr>& roots);

} // namespace fusegen::plan
