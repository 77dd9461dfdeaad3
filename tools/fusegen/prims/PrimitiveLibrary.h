// PrimitiveLibrary: the functions a spec can call, loaded from templates/primitives.yaml.
// Each entry is data: signature, forward formula over builtins (`eval`), the PyTorch
// spelling for the generated reference, and one derivative rule per differentiable
// parameter written in the formula language (`grad`, `result` and the parameters in scope).
// Adding a primitive is adding one entry to that file.
#pragma once

#include "expr/Ast.h"
#include "support/Diagnostics.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fusegen::prims {

enum class ParamKind {
  Value, // a differentiable tensor value
  Bool,  // a condition (result of a comparison); no gradient
  Const, // must not depend on tensors (a literal or an attr); no gradient
  // A uniform random number in [0, 1) per element, which the caller does not pass: each call
  // gets a stream of its own (ir::Node::makeRandom), so dropout(x, p) is a primitive whose
  // `eval` and derivative rule read the same draw. Last in the signature; no gradient.
  Random,
};

struct Param {
  std::string name;
  ParamKind kind = ParamKind::Value;
};

enum class PrimKind {
  Elementwise,
  Reduction, // over the last dim: [..., D] -> [...]
  // Over the whole tensor, every row (and column): [..., D] or [...] -> []. Its value is known
  // only once every row is done, so only a [] output may use it (expr/Sema.cpp), computed by
  // the program's `finish` after the rows (fusegen_program.h).
  Total,
  // Over the rows, per column (`column` in primitives.yaml, colsum): [..., D] -> [D]. Its value
  // is known only once every row is done: the planner computes it in a pass over the rows of its
  // own (a program of its own, plan/KernelPlan.h), after which any value may use it.
  Column,
  // A permutation of the columns of a row (`move` in primitives.yaml): its value at column j is
  // its argument's at another column of the same row (fusegen_runtime.h fg::Move). The
  // planner pushes moves down to the inputs (opt/Moves.h), which the runtime then reads at
  // the moved columns; its derivative rule is the inverse move of `grad`.
  Move,
  // A view between a packed last dim [..., n*D] and its chunks of D (`view` in primitives.yaml):
  // chunk(x, c, n), which formulas write chunk(gu, c) of a packed input, and place(g, c, n), its
  // adjoint, which only derivative rules produce: the planner splits a packed input's gradient
  // into its chunks (a place of another chunk is 0 there), which the runtime stores at their
  // offsets in the packed gradient.
  View,
};

// The column permutations the runtime reads inputs through (fg::Move in fusegen_runtime.h):
//   SwapHalves  column j reads (j + D/2) mod D: the halves of the row exchanged (D even)
//   SwapPairs   column j reads j xor 1: adjacent columns exchanged (D even)
//   Roll        column j reads (j - k) mod D, k the move's const parameter: torch.roll(x, k, -1)
//               (any D; k any integer, a call-time value: a literal, an int attr, D, ...)
enum class Move { None, SwapHalves, SwapPairs, Roll };
const char* moveName(Move m); // as primitives.yaml spells it: swap_halves, swap_pairs, roll
// The column a move reads at column j of a row of D (D even for the swaps; `shift`: a roll's k,
// any integer).
long long moveColumn(Move m, long long j, long long D, long long shift = 0);
// Whether a move permutes the columns only of an even D (the swaps: the call checks D).
bool moveNeedsEvenD(Move m);
// Whether a move is its own inverse (the swaps). A roll by k is undone by a roll by -k.
bool moveSelfInverse(Move m);
// Whether `outer` of a value moved by `inner` is one move (opt/Moves.h composes them): moves of
// one self-inverse kind (they cancel), and rolls with rolls and with swap_halves (a roll by D/2,
// D even): roll(roll(x, a), b) = roll(x, a + b).
bool movesCompose(Move outer, Move inner);

// How a reduction combines the values of a row.
enum class Combine { Sum, Max, Min };
const char* combineName(Combine c); // sum, max, min (as primitives.yaml spells them)

// What a primitive's value is known to be never below 0 under (`sign` in primitives.yaml),
// read by the planner's sign analysis (plan/KernelPlan.cpp): the GPU adds a sum of terms that
// are never negative plainly instead of compensated (fusegen_program.h).
enum class Sign {
  Any,         // no claim
  NonNegative, // for every argument (exp, sqrt, abs, sigmoid, ...)
  OfArgs,      // when every value argument is (add, max, where, the reductions)
  Product,     // a product or quotient of two values: when both are, or both are one value
};

// Where a primitive's value is 0 or NaN (`zero` in primitives.yaml) and where it is -inf or NaN
// (`neg_inf`), from its value arguments: read by the liveness analysis (plan/Liveness.cpp), which
// does not load an element input where a factor multiplying it is known to be 0 (a causal
// softmax's gradient past the query, where the probability is exp(-inf) = 0).
enum class Zero {
  None,     // no claim
  Product,  // where either argument is 0 or NaN (mul)
  First,    // where the first argument is (div, neg)
  AtNegInf, // where its argument is -inf or NaN (exp)
};
enum class NegInf {
  None,  // no claim
  First, // where the first argument is -inf or NaN (sub)
  Any,   // where either argument is (add)
};

struct Primitive {
  std::string name;
  std::vector<Param> params;
  PrimKind kind = PrimKind::Elementwise;
  Combine combine = Combine::Sum; // reductions
  Sign sign = Sign::Any;
  Zero zero = Zero::None;
  NegInf negInf = NegInf::None;
  expr::AstPtr finish; // reductions: acc (the combined value), D -> result; null: acc
  bool returnsBool = false;
  // Integers in, integers out (ir::ValueType::Int): derived from `eval` (only + - * unary -,
  // abs, select and comparisons over the parameters and integer literals), or for a
  // reduction, a sum, max or min without a `finish`.
  bool integerClosed = false;
  // Its grad rules state a gradient that eval does not imply (with_grad: a C++ function's
  // named derivative), so finite differences of eval do not check them.
  bool declaresGradient = false;
  // ... and one that is not even value's derivative (with_surrogate_grad: a straight-through
  // estimator): it stays in the forward, so the reference computes the stated gradient too.
  bool surrogateGradient = false;
  std::string doc;
  expr::AstPtr eval;               // over builtins and params (elementwise only)
  std::string torch;               // PyTorch spelling with {param} placeholders
  std::vector<expr::AstPtr> grads; // per param; null for Bool/Const params
  Move move = Move::None;          // kind Move: which permutation
  // A primitive defined by a formula over other primitives, the parameters, j and D (`expand`
  // in primitives.yaml: rotate_half is swap_halves with the first half negated): Sema inlines
  // it, so it has no eval, torch spelling or rules of its own.
  expr::AstPtr expand;
  SourceLoc loc;

  int paramIndex(const std::string& n) const;
  // The arguments a formula passes: the parameters but the Random ones.
  size_t arity() const;
  std::string signature() const; // e.g. "where(cond: bool, a, b)"
};

class PrimitiveLibrary {
public:
  // Loads and checks the library; returns nothing when errors were reported.
  static std::optional<PrimitiveLibrary> load(const std::string& path, Diagnostics& diags);
  static std::optional<PrimitiveLibrary>
  loadFromString(const std::string& path, const std::string& text, Diagnostics& diags);

  // The overload of `name` a formula calls with `arity` arguments (Primitive::arity; null if
  // none); find(name) is the first.
  const Primitive* find(const std::string& name, size_t arity) const;
  const Primitive* find(const std::string& name) const;
  std::vector<const Primitive*> overloads(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::vector<std::shared_ptr<const Primitive>>& all() const { return prims_; }

private:
  std::vector<std::shared_ptr<const Primitive>> prims_;
  std::map<std::string, std::vector<const Primitive*>> byName_;
};

} // namespace fusegen::prims
