// KernelPlan: how an op's forward and backward map onto the runtime, and the checks that
// decide whether a spec can be planned at all (with a diagnostic saying why not). Each
// direction is one Program (fusegen_program.h): stages of reductions over each row, then the
// element and per-row outputs. An elementwise op is a program with no stages. The planner
// also picks, per program, which of the runtime's kernels runs it (RuntimePlan), from the
// program's traits; the generated code carries that choice and the runtime reads it:
//   Flat:    no stages, no [...] inputs or outputs, no sums: 128-bit vectors over all elements.
//   Colwise: no stages, [D] inputs (kept in registers) or [D]/[] gradient sums.
//   Row:     reductions over the last dim, per-row inputs or outputs: the row kept on chip.
//   Groups:  no reductions, element outputs, inputs that omit the op's innermost named dims
//            (RoPE's tables): the rows reading the same rows of those run in one thread.
// Save-vs-recompute: a forward also returns the per-row statistics the backward
// needs (rstd, mean, the max and sum of a softmax); everything elementwise is recomputed.
// [] inputs are per-row values read once (rowPre): their gradients are sums
// over every element (OutKind::Total), accumulated like the [D] sums (partials + finalize),
// or over rows when the input is used only in per-row values (its adjoint is then per row).
#pragma once

#include "autodiff/ReverseMode.h"
#include "autodiff/SecondOrder.h"
#include "ir/Function.h"
#include "plan/Liveness.h"
#include "prims/PrimitiveLibrary.h"
#include "specfile/SpecModel.h"
#include "support/Diagnostics.h"

#include <optional>
#include <string>
#include <vector>

namespace fusegen::plan {

// The runtime kernel family that runs a program (fg::Plan in fusegen_runtime.h).
enum class RuntimePlan { Flat, Colwise, Row, Groups };

// How a program writes an output: one value per element, one per row, the sum over rows
// of an element value (a [D] gradient), its combination (sum, max or min) over all rows and
// columns (a [] gradient; a whole-tensor value), one value per row in the compute type (a
// statistic saved for the backward: float for half types, so the backward reads back exactly
// what the forward computed), or a [] output computed once from the Total outputs after every
// row (Scalar: the program's finish), or a result an earlier program of the direction computed
// (Passed: a [D] output or statistic from the column programs, ColumnPasses.h; the kernel does
// not write it, the glue returns that program's result converted to the output's type), or
// the sum over rows of the squared deviations of an element value from its column mean, in one
// pass with the mean (ColM2: a variance's numerator, ColumnPasses.h).
enum class OutKind { Full, Row, ColSum, Total, Stat, Scalar, Passed, ColM2 };

// One direction (forward or backward) of an op.
struct Program {
  struct Input {
    std::string name;     // argument name in the generated code
    ir::ShapeClass shape; // Full, Col, Row or Scalar
    ir::Expr leaf;        // the Input / GradOut node it binds
    bool stat = false;    // a statistic saved by the forward (OutKind::Stat): compute type
    spec::InputType type = spec::InputType::Dtype; // its elements: the dtype, or int/bool
    // A random stream (ir::NodeKind::Random, `leaf`): no tensor; the runtime draws its
    // elements (fg::Bcast::Random). Streams follow the op's inputs, in stream order.
    bool random = false;
    // Whether the program reads it. An input the backward does not read is not saved by the
    // forward's autograd node (a placeholder of its shape stands for it: memory).
    bool read = true;
    // The op's leading dims it has (spec::inputDimMask; ~0u: all of them). One with fewer
    // is read at a row of its own for each row of the op (fg::Bcast's `inDims`).
    unsigned dims = ~0u;
    // pos(S) (ir::NodeKind::Position, `leaf`): no tensor; the runtime computes the row's index
    // along the named dim `dims` has (fg::Bcast::Position).
    bool position = false;
    // A moved input (opt/Moves.h: `leaf` is move(x)): the tensor argument `arg` read at the
    // moved columns (fg::Move). Empty `arg`: the argument named `name`.
    prims::Move move = prims::Move::None;
    std::string arg = {};
    // A rolled input (prims::Move::Roll): its shift, a formula over the attrs and D, and the
    // program's roll (Program::rolls) whose slot the call fills with its value (-1: none).
    ir::Expr shift = nullptr;
    int roll = -1;
    // The outputs whose values read it (bit m: output m; all bits past the 32nd output): the
    // GPU's row plan skips its loads in a call that needs none of them (a backward asked for
    // the gradient of x alone does not read what only the gradient of a table reads).
    unsigned readers = ~0u;
    // A chunk of a packed argument ([..., chunks*D]; `leaf` is chunk(x, chunk, chunks)): its
    // row is chunks*D long and this input's columns start at chunk*D.
    int chunk = 0, chunks = 1;
    // A [D] value an earlier program of the direction computed (plan/ColumnPasses.h): the index
    // of that program's result (stat: in the compute type). -1: an argument of the op.
    int passed = -1;
    // An element input read only under index conditions (plan/Liveness.h: causal_softmax's
    // scores where j <= pos(S)): the row plan loads none of a vector whose columns all fail
    // them. Always for the others.
    LiveWhen live{true, {}};
  };
  // What a Total output's value is. Elements: an element value, summed over rows and columns
  // (elem computes it). Rows: a per-row value, summed over rows (rowOut). RowsTimesD: a per-row
  // value standing for each element of its row, so D times it is summed over rows (rowOut).
  enum class TotalOf { Elements, Rows, RowsTimesD };
  struct Output {
    std::string name;
    OutKind kind;
    ir::Expr value; // null: identically zero
    TotalOf totalOf = TotalOf::Elements;
    // What its elements are stored as: the call's dtype, or a spec output's own type (float32,
    // FP8 with saturation), converted at the store.
    spec::OutputType type = spec::OutputType::Dtype;
    prims::Combine combine = prims::Combine::Sum; // a Total output's combination
    // A Total output that is a whole-tensor value (sum_all(x)): that node, which the Scalar
    // outputs' formulas read (the program's finish gets its combined value).
    ir::Expr whole = nullptr;
    // The gradient of an input broadcast over some leading dims ([S, D] against [..., S, H,
    // D]): written per element (or row) in the compute type, then summed by the glue over the
    // dims the input omits (fg::glue: `keepDims`, the dims it has); ~0u: none summed.
    unsigned keepDims = ~0u;
    // The gradient of a packed input, chunk `chunk` of `chunks`: stored at that chunk's columns
    // of the result `result` (the program output of chunk 0, whose tensor it shares; -1: its
    // own). The glue returns one tensor per result.
    int chunk = 0, chunks = 1, result = -1;
    // OutKind::Passed: the index of the earlier program's result it is.
    int passed = -1;

    // Whether its value is a per-row one (rowOut computes it): a [...] output, a saved
    // statistic, a Total of per-row values; elem computes the others' (but Scalar's: finish).
    bool perRow() const {
      return kind == OutKind::Row || kind == OutKind::Stat ||
             (kind == OutKind::Total && totalOf != TotalOf::Elements);
    }
  };
  struct Stage {
    std::vector<ir::Expr> reductions; // combined in one pass over the row
    // Online max-and-sum: for each reduction, the index of the previous stage's maximum m
    // that shifts it (its term is exp(g - m) times factors free of the previous stage, g the
    // value m maximizes), or -1. When every reduction of a stage is shifted, a thread may sum
    // against its own maxima and rescale once (fusegen_program.h, accMergeShifted): the two
    // stages need one combination across threads instead of two. The previous stage's other
    // reductions (sums, minima) combine alongside.
    std::vector<int> shift;
    // For each reduction: a sum of terms never below 0 (the primitives' `sign` claims). Such a
    // sum cannot cancel, so its plain sum is accurate to n u relative (n the terms one thread
    // adds, u the compute type's roundoff); the GPU adds it plainly instead of compensated
    // (fusegen_program.h), which ran softmax's forward 8% faster on the H100.
    std::vector<bool> plain;
    // For each reduction: the row of a pick, sum(where(j == r, x, 0)) with r one value per row
    // (free of j and of this stage), stands for its only term: the runtime evaluates the term
    // at column r alone (0 where r is not a column), not over the row. `pickColumn` is r.
    std::vector<bool> pick;
    std::vector<ir::Expr> pickColumn; // per reduction: r for a pick, else null
    // For each reduction: a condition uniform over the op (attrs and literals only) under
    // which alone its value is used (every use in one branch of a where on it), or null. The
    // runtime skips its terms when the condition does not hold (`guardWhen`: the branch, true
    // for the first): cross-entropy's label smoothing costs no sum when it is 0.
    std::vector<ir::Expr> guard;
    std::vector<bool> guardWhen;
  };
  std::vector<Input> inputs;
  std::vector<Output> outputs;
  std::vector<Stage> stages;
  // Per-row values kept in registers, in computation order: the [...] nodes, and the []
  // nodes that depend on a [] input (computed once per row by rowPre, like a [...] input).
  std::vector<ir::Expr> rowValues;
  std::vector<int> rowValueStage; // -1: before the first stage; s: after stage s
  // The row's prefix (programs with passes): the element values the passes and outputs read
  // from the part of the DAG that no reduction reaches, where the element inputs are read only
  // through them (scaled_masked_softmax's x * scale + mask; causal_softmax's where(j > pos(S),
  // -inf, x * scale)). The generated code computes them once per element (`prefix`) and every
  // pass reads them as values; the row plan keeps them in the row cache, in the compute type,
  // instead of the inputs, where that takes at most a vector more (fusegen_row_cuda.cuh), so
  // the passes do not compute them again. Empty where an input is read otherwise too.
  std::vector<ir::Expr> prefix;
  // The prefix refreshed after a pass: where every later pass and the outputs read the row
  // only through element values that the row values known after pass `pass` - 1 make
  // computable (softmax's e = exp(z - m) once m is known), and they are no more than the
  // prefix's, the pass `pass` computes them from the values before it (prefix or earlier
  // refresh) once per element and puts them in their place, so the passes after it read them
  // instead of computing them again (the row plan's cache keeps them: the output pass of a
  // masked softmax takes no second exp). In pass order, one per pass at most, each before the
  // last pass (the output pass reads its own values once).
  struct Refresh {
    int pass = 0;                 // 1 .. stages.size() - 1
    std::vector<ir::Expr> values; // at most prefix.size(), in topological order
  };
  std::vector<Refresh> refreshes;
  RuntimePlan plan = RuntimePlan::Row;
  int namedDims = 0;       // the op's named leading dims (KernelPlan::namedDims)
  bool usesColumn = false; // reads j: the flat plan, which knows no columns, cannot run it
  // A column program (plan/ColumnPasses.h): [D] values computed over one row of D (the glue
  // runs it with rows = 1; its Full outputs are [D]).
  bool columns = false;
  // The distinct shifts of its rolls (of inputs, Input::roll, and of j), formulas over the
  // attrs and D: the runtime computes each once per call, reduced mod D, into an attr slot of
  // its own (fusegen_program.h withRolls).
  std::vector<ir::Expr> rolls;
};

struct SavedStat {
  std::string name; // a let's name when the value is one, else stat<i>
  ir::Expr value;   // the forward node
};

// The names fusegen derives for the backward's arguments (schema, fake, C++ parameters and
// locals, messages): the incoming gradient of output `out`, a saved per-row value. A spec's
// names cannot begin with '_', so these cannot clash with an input, attr, let or output
// (grad_y and saved_m are names a spec may use).
inline std::string gradArgName(const std::string& out) {
  return "_grad_" + out;
}
inline std::string savedArgName(const std::string& stat) {
  return "_saved_" + stat;
}
// The seed and offset a random op's forward drew with, for its backward (int64 [2]).
inline std::string rngArgName() {
  return "_saved_rng";
}

struct KernelPlan {
  // fullInput defines D and the output shape: the first float [..., D] input, else the first
  // [..., D] one. dtypeInput's dtype is the call's: fullInput where it is float, else the
  // first float input of any shape.
  int fullInput = -1;
  int dtypeInput = -1;
  int namedDims = 0; // the op's named leading dims (spec::OpSpec::dims)
  // Random streams the op draws (1 + the largest stream read): the forward takes a seed and
  // offset from torch's generator and returns them; the backward reads them back.
  int randomStreams = 0;
  // Per input: the output whose incoming gradient is this input's gradient as it is (grad_y for
  // residual in y = residual + ...), which autograd then passes on without a kernel writing a
  // copy of it, as its index among the differentiable outputs (the autograd node's gradients);
  // -1 for the others.
  std::vector<int> passthrough;
  std::vector<SavedStat> saved; // per-row values the forward returns for the backward
  // Whole-tensor values (sum_all, max_all, min_all) the forward computes for its [] outputs,
  // in the forward's Total output order: returned after the per-row ones (in the compute
  // type), and read by the backward as [] inputs where its gradients use them.
  std::vector<SavedStat> savedTotals;
  // [D] values the forward computes from reductions over rows (batch statistics) that the
  // backward reads: returned after the whole-tensor ones, in the compute type.
  std::vector<SavedStat> savedColumns;
  // Per input: whether the backward reads it, directly or through its moves and chunks (else
  // the autograd node saves a placeholder of its shape, not the tensor).
  std::vector<bool> saveInputs;
  Program forward;
  Program backward;
  // The programs run before each (plan/ColumnPasses.h: passes over the rows for reductions per
  // column, and the [D] values made of them), in run order; empty for most ops.
  std::vector<Program> forwardBefore;
  std::vector<Program> backwardBefore;
};

// `lib`: the primitives that composing moves builds (opt/Moves.h).
std::optional<KernelPlan> planOp(const spec::OpSpec& spec, const ir::Function& fn,
                                 const autodiff::Gradient& grad, const prims::PrimitiveLibrary& lib,
                                 Diagnostics& diags);

// Marks saved (KernelPlan::saveInputs) the inputs the backward's backward reads (the second
// derivatives, `grad2`'s DAG, printed into the generated _backward_backward): autograd hands
// it the backward's saved tensors, so an input that only the second derivatives read (an
// attention sink's logits, where the backward reads exp(sink - m) saved per row) must be
// saved, not stood for by a placeholder.
void saveSecondOrderInputs(KernelPlan& plan, const ir::Function& fn,
                           const autodiff::SecondOrder& grad2);

// A readable summary of the plan (fusegen dump plan).
std::string describePlan(const ir::Function& fn, const KernelPlan& plan);

} // namespace fusegen::plan
