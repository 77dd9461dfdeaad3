// Data preparation for the op and package templates.
#include "emit/Emitters.h"

#include "emit/CodeFormatter.h"
#include "emit/CodePrinter.h"
#include "emit/api/Spellings.h"
#include "ir/Interpreter.h"
#include "opt/Moves.h"
#include "plan/KernelPlan.h"
#include "plan/OpInterface.h"
#include "support/Format.h"
#include "support/Version.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace fusegen::emit {

namespace {

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? sep : "") + items[i];
  return out;
}

std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

std::string docstring(const std::string& doc) {
  std::string out;
  for (char c : oneLine(doc)) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

// The distribution (pip's) name of a package: '_' spelled '-', as pip normalizes it.
std::string distributionName(std::string package) {
  std::replace(package.begin(), package.end(), '_', '-');
  return package;
}

bool uses(const std::vector<ir::Expr>& roots, ir::NodeKind kind) {
  for (const ir::Node* n : ir::topoOrder(roots))
    if (n->kind() == kind) return true;
  return false;
}

// The shape class of an input as the Python side spells it (SPEC and the generated bodies
// alike): its own shape for one that omits some of the op's leading dims ("[S, D]",
// _support.is_mapped) or is packed ("[..., 2*D]", _support.chunks_of), else its class's.
std::string inputClass(const spec::OpSpec& spec, const spec::Input& in) {
  return spec::isMapped(spec, in) || in.chunks > 1 ? spec::inputShapeSpelling(in)
                                                   : spec::shapeClassSpelling(in.shape);
}
std::string pythonClass(const OpModel& op, size_t i) {
  return inputClass(op.spec, op.spec.inputs[i]);
}

// An output's shape as the Python side spells it: its class, or [..., n*D] for cat's.
std::string outputSpelling(const ir::FunctionOutput& o) {
  return o.parts.empty() ? spec::shapeClassSpelling(o.value->shape())
                         : "[..., " + std::to_string(o.parts.size()) + "*D]";
}

// The Python expression of D, from the full input (a packed one is [..., n*D]).
std::string pythonD(const OpModel& op) {
  const ir::FunctionInput& full = op.fn.inputs[op.plan.fullInput];
  return full.name + ".shape[-1]" +
         (full.chunks > 1 ? " // " + std::to_string(full.chunks) : std::string()) + " if " +
         full.name + ".dim() else 1";
}

// Whether the Python formulas take input i as int64: int8 and uint8 values, whose sums and
// differences torch would wrap in their own type (uint8 3 - 128 is 131), where the kernels
// compute integers exactly in the compute type.
bool pythonWidened(const OpModel& op, size_t i) {
  const spec::InputType t = op.spec.inputs[i].type;
  return t == spec::InputType::Int8 || t == spec::InputType::UInt8;
}

// Input i as a Python body uses it, broadcasting against the op's [..., D] values: per-row
// inputs as [..., 1], mapped ones aligned with the op's dims (_support.align), int8 and uint8
// ones widened (pythonWidened).
std::string pythonAligned(const OpModel& op, size_t i) {
  const spec::Input& in = op.spec.inputs[i];
  const std::string wide = pythonWidened(op, i) ? ".long()" : "";
  if (spec::isMapped(op.spec, in))
    return "_support.align(" + in.name + wide + ", \"" + pythonClass(op, i) + "\", SPEC.dims)";
  return in.name + wide + (in.shape == ir::ShapeClass::Row ? ".unsqueeze(-1)" : "");
}

// Whether the Python formulas rebind input i (pythonAligned differs from its name).
bool pythonRebound(const OpModel& op, size_t i) {
  return op.spec.inputs[i].shape == ir::ShapeClass::Row ||
         spec::isMapped(op.spec, op.spec.inputs[i]) || pythonWidened(op, i);
}

// ", dims=SPEC.dims" where input i is mapped: the Python helpers that sum its gradient.
std::string pythonDimsArg(const OpModel& op, size_t i) {
  return spec::isMapped(op.spec, op.spec.inputs[i]) ? ", dims=SPEC.dims" : "";
}

// Whether a with_surrogate_grad states a gradient that is not the derivative of the forward:
// the generated tests then compare no finite differences of the forward with it.
bool statesSurrogateGradient(const OpModel& op) {
  std::vector<ir::Expr> roots;
  for (const ir::FunctionOutput& o : op.fn.outputs)
    roots.push_back(o.value);
  for (const ir::Node* n : ir::topoOrder(roots))
    if (n->kind() == ir::NodeKind::Call && n->prim()->surrogateGradient) return true;
  return false;
}

// What the op's forward or backward moves that needs an even D, as the message for an odd one
// says it ("exchanges the halves of each row (rotate_half, swap_halves)"; a roll takes any D),
// or "" where nothing does. (rotate_half and rotate_pairs are expanded into swap_halves and
// swap_pairs before the IR: the message names both spellings.)
std::string evenDMoves(const OpModel& op) {
  std::vector<ir::Expr> roots;
  for (const ir::FunctionOutput& o : op.fn.outputs)
    roots.push_back(o.value);
  for (const ir::Expr& g : op.grad.inputGrads)
    if (g) roots.push_back(g);
  bool halves = false, pairs = false;
  for (const ir::Node* n : ir::topoOrder(roots))
    if (n->kind() == ir::NodeKind::Call && n->prim()->kind == prims::PrimKind::Move &&
        prims::moveNeedsEvenD(n->prim()->move)) {
      halves = halves || n->prim()->move == prims::Move::SwapHalves;
      pairs = pairs || n->prim()->move == prims::Move::SwapPairs;
    }
  const std::string h = "the halves of each row (rotate_half, swap_halves)";
  const std::string p = "adjacent columns (rotate_pairs, swap_pairs)";
  if (!halves && !pairs) return "";
  return "exchanges " + (halves && pairs ? h + " and " + p : halves ? h : p);
}

// The random streams the formulas read, in stream order.
std::vector<int> randomStreams(const std::vector<ir::Expr>& roots) {
  std::set<int> streams;
  for (const ir::Node* n : ir::topoOrder(roots))
    if (n->kind() == ir::NodeKind::Random) streams.insert(n->index());
  return {streams.begin(), streams.end()};
}

// The Python lines defining _D, _j (the column index) and _u<k> (random stream k's numbers,
// drawn with the (seed, offset) tensor `rng`; `wrap` around each, as "_r.exact(%)") where the
// formulas use them.
std::string pythonLeaves(const OpModel& op, const std::vector<ir::Expr>& roots,
                         const std::string& full, const std::string& rng,
                         const std::string& wrapBefore = "", const std::string& wrapAfter = "",
                         const std::string& firstRow = "", bool defineD = true) {
  const bool column = uses(roots, ir::NodeKind::Column);
  std::string out;
  if (defineD && (column || uses(roots, ir::NodeKind::Dim)))
    out += "    _D = " + pythonD(op) + "\n";
  // (the bounds, over chunks of rows too: the whole tensor's count, which Rounding keeps)
  if (uses(roots, ir::NodeKind::Rows))
    out += wrapBefore.empty() ? "    _R = _support.rows_of(" + full + ")\n" : "    _R = _r.rows\n";
  if (column)
    out += "    _j = " + wrapBefore + "torch.arange(_D, device=" + full + ".device)" + wrapAfter +
           "\n";
  std::set<std::pair<int, std::string>> positions; // pos(S): the index along named dim S
  for (const ir::Node* n : ir::topoOrder(roots))
    if (n->kind() == ir::NodeKind::Position) positions.insert({n->index(), n->name()});
  for (const auto& [dim, name] : positions)
    out += "    _pos_" + name + " = " + wrapBefore + "_support.position(" + full + ", SPEC.dims, " +
           std::to_string(dim) + ")" + wrapAfter + "\n";
  for (int k : randomStreams(roots))
    out += "    _u" + std::to_string(k) + " = " + wrapBefore + "_support.uniform(" + rng + ", " +
           std::to_string(k) + ", " + full + (firstRow.empty() ? "" : ", " + firstRow) + ")" +
           wrapAfter + "\n";
  return out;
}

// The body of error_bounds() in op_init.py.mustache: the forward, then the derived backward,
// printed from the IR the kernels are generated from, over testing.Rounding's bounded
// numbers (templates/package/testing.py states the error model). The per-row values a row
// plan's backward reads back from its forward (plan.saved) are used as computed: the forward
// stores them in the compute type.
std::string boundsBody(const OpModel& op) {
  const ir::Function& fn = op.fn;
  const std::string full = fn.inputs[op.plan.fullInput].name;
  std::string out = "    _D = " + pythonD(op) + "\n";
  std::vector<ir::Expr> all;
  for (const ir::FunctionOutput& o : fn.outputs)
    all.push_back(o.value);
  for (const ir::Expr& g : op.grad.inputGrads)
    if (g) all.push_back(g);
  if (op.plan.randomStreams)
    out +=
        "    _rng = _support.draw_rng(SPEC, " + full + ", generator) if _rng is None else _rng\n";
  out += pythonLeaves(op, all, full, "_rng", "_r.exact(", ")", "_row0", /*defineD=*/false);
  // Bool inputs are conditions, not bounded numbers.
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    const ir::FunctionInput& in = fn.inputs[i];
    const std::string value = pythonAligned(op, i);
    out += "    " + in.name + " = " +
           (in.type == spec::InputType::Bool ? value : "_r.exact(" + value + ")") + "\n";
  }
  std::vector<Assignment> forward;
  std::vector<std::string> outputs, grads;
  for (const ir::FunctionOutput& o : fn.outputs) {
    forward.push_back({o.name, o.value});
    // [] values computed from whole-tensor values, [D] ones from sums over rows: each stored
    // as computed.
    if (o.value->shape() == ir::ShapeClass::Scalar || o.value->shape() == ir::ShapeClass::Col) {
      outputs.push_back("_r.whole(" + o.name +
                        (o.differentiable()
                             ? std::string("")
                             : std::string(", \"") + spec::outputTypeName(o.type) + "\"") +
                        ")");
      continue;
    }
    outputs.push_back(
        "_r.result(" + o.name + ", \"" + outputSpelling(o) + "\"" +
        (o.differentiable() ? "" : std::string(", \"") + spec::outputTypeName(o.type) + "\"") +
        ")");
  }
  Bindings saved;
  std::vector<plan::SavedStat> stats = op.plan.saved; // (per-row values, then whole-tensor ones)
  stats.insert(stats.end(), op.plan.savedTotals.begin(), op.plan.savedTotals.end());
  stats.insert(stats.end(), op.plan.savedColumns.begin(), op.plan.savedColumns.end());
  for (size_t i = 0; i < stats.size(); ++i) {
    const std::string name = "_s" + std::to_string(i);
    forward.push_back({name, stats[i].value});
    saved[stats[i].value.get()] = name;
  }
  out += printPythonBounds(forward, 4, {}, "_t");
  out += "    _outputs = (" + join(outputs, ", ") + ",)\n";
  out += "    if _grads is None:\n        return _outputs, None\n";
  for (size_t m = 0; m < fn.outputs.size(); ++m)
    if (fn.outputs[m].differentiable()) // (the others have none)
      out += "    " + plan::gradArgName(fn.outputs[m].name) + " = _r.exact(_grads[" +
             std::to_string(m) + "]" +
             (fn.outputs[m].value->shape() == ir::ShapeClass::Row ? ".unsqueeze(-1)" : "") + ")\n";
  std::vector<Assignment> backward;
  for (size_t k = 0; k < fn.inputs.size(); ++k) {
    const ir::Expr& g = op.grad.inputGrads[k];
    const std::string name = "_g" + std::to_string(k);
    if (g) backward.push_back({name, g});
    grads.push_back(g ? "_r.result(" + name + ", \"" + pythonClass(op, k) + "\"" +
                            pythonDimsArg(op, k) + ")"
                      : "None");
  }
  out += printPythonBounds(backward, 4, saved, "_b");
  return out + "    return _outputs, (" + join(grads, ", ") + ",)\n";
}

// A Python string literal of one line of text.
std::string pythonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text)
    out += c == '"' || c == '\\' ? std::string("\\") + c
           : c == '\n'           ? std::string(" ")
                                 : std::string(1, c);
  return out + "\"";
}

// The body of the backward's backward in op_init.py.mustache (registered as the autograd
// formula of <op>_backward): the second-order DAG (autodiff/SecondOrder.h) in PyTorch, over
// the output gradients and inputs the backward received (its statistics are recomputed
// from the inputs inside the DAG) and the cotangents of its outputs; each adjoint summed
// into the shape of its argument. Returns one value per argument of <op>_backward.
std::string secondOrderBody(const OpModel& op) {
  const ir::Function& fn = op.fn;
  const autodiff::SecondOrder& g2 = op.grad2;
  const std::string qual = "fusegen::" + op.spec.name + "_backward";
  if (!g2.failure.empty())
    return "    raise RuntimeError(" +
           pythonString(qual + ": no second derivative: fusegen cannot differentiate the " +
                        "derived backward (" + g2.failure + ")") +
           ")\n";
  const size_t nIn = fn.inputs.size();
  size_t nOut = 0; // the differentiable outputs, whose gradients the backward takes
  const std::string full = fn.inputs[op.plan.fullInput].name;
  const std::string typed = fn.inputs[op.plan.dtypeInput].name; // (of the op's dtype)
  std::vector<std::string> saved;
  for (const ir::FunctionOutput& o : fn.outputs)
    if (o.differentiable()) {
      saved.push_back(plan::gradArgName(o.name));
      ++nOut;
    }
  for (const ir::FunctionInput& in : fn.inputs)
    saved.push_back(in.name);
  std::string out =
      "    _dtype = ctx.saved_tensors[" + std::to_string(nOut + op.plan.dtypeInput) + "].dtype\n";
  out += "    " + join(saved, ", ") + (saved.size() == 1 ? "," : "") +
         " = _support.compute_type(ctx.saved_tensors)\n";
  for (size_t a = 0; a < fn.attrs.size(); ++a)
    out += "    " + fn.attrs[a].attr.name + " = ctx.attrs[" + std::to_string(a) + "]\n";
  // Per-row values are [..., 1], as in the reference.
  for (const ir::FunctionOutput& o : fn.outputs)
    if (o.differentiable() && o.value->shape() == ir::ShapeClass::Row)
      out += "    " + plan::gradArgName(o.name) + " = " + plan::gradArgName(o.name) +
             ".unsqueeze(-1)\n";
  for (size_t i = 0; i < nIn; ++i)
    if (pythonRebound(op, i))
      out += "    " + fn.inputs[i].name + " = " + pythonAligned(op, i) + "\n";
  for (size_t k = 0; k < nIn; ++k)
    if (g2.cotangents[k])
      out += "    " + g2.cotangents[k]->name() + " = _support.cotangent(_gg[" + std::to_string(k) +
             "], ctx.mask[" + std::to_string(k) + "], \"" + pythonClass(op, k) + "\", " + typed +
             pythonDimsArg(op, k) + ")\n";
  std::vector<ir::Expr> roots;
  std::vector<Assignment> assignments;
  std::vector<std::string> results;
  // Arguments of <op>_backward: output gradients, inputs, statistics, attrs, output_mask.
  // (spelling: a mapped input's own shape, else the class's; dimsArg: ", dims=SPEC.dims" then)
  auto add = [&](const ir::Expr& e, spec::ShapeClass cls, const std::string& spelling,
                 const std::string& dimsArg) {
    if (!e) {
      results.push_back("None");
      return;
    }
    const std::string name = "_d" + std::to_string(assignments.size());
    assignments.push_back({name, e});
    roots.push_back(e);
    results.push_back("_support.grad_to(" + name + ", \"" + spelling + "\", _full, _dtype" +
                      (cls == ir::ShapeClass::Scalar && e->shape() == ir::ShapeClass::Row
                           ? ", rowlike=True"
                           : "") +
                      dimsArg + ")");
  };
  for (size_t m = 0; m < fn.outputs.size(); ++m)
    if (fn.outputs[m].differentiable())
      add(g2.gradOutGrads[m], fn.outputs[m].value->shape(), outputSpelling(fn.outputs[m]), "");
  for (size_t k = 0; k < nIn; ++k)
    add(g2.inputGrads[k], fn.inputs[k].shape, pythonClass(op, k), pythonDimsArg(op, k));
  for (size_t i = 0; i < op.plan.saved.size() + op.plan.savedTotals.size() +
                             op.plan.savedColumns.size() + fn.attrs.size() + 1;
       ++i)
    results.push_back("None");
  if (op.plan.randomStreams) results.push_back("None"); // (_saved_rng)
  out += pythonLeaves(op, roots, full, "ctx.rng");
  out += printPython(assignments, 4, typed, full);
  out += "    _full = list(" + full + ".shape)\n";
  if (fn.inputs[op.plan.fullInput].chunks > 1) // (the op's shape: D, not the packed last dim)
    out += "    _full[-1] //= " + std::to_string(fn.inputs[op.plan.fullInput].chunks) + "\n";
  return out + "    return (" + join(results, ",\n            ") + ",)\n";
}

// The uniform conditions' values at the attrs' defaults (fusegen_program.h Uniforms): bit i
// of `known` is set where condition i reads no D and only attrs with a default, and bit i of
// `value` is then its value there. Kernels run code specialized for these values where a
// call's values match them (the options an op is called with most), the general code else.
struct DefaultUniforms {
  unsigned known = 0, value = 0;
};
DefaultUniforms defaultUniforms(const std::vector<ir::Expr>& conditions, const ir::Function& fn) {
  DefaultUniforms d;
  ir::Env env;
  std::set<std::string> withDefault;
  for (const ir::FunctionAttr& a : fn.attrs)
    if (a.attr.hasDefault) {
      env.attrs[a.attr.name] = a.attr.defaultValue;
      withDefault.insert(a.attr.name);
    }
  for (size_t i = 0; i < conditions.size() && i < 32; ++i) {
    bool decidable = true;
    for (const ir::Node* n : ir::topoOrder({conditions[i]}))
      decidable = decidable && n->kind() != ir::NodeKind::Dim &&
                  (n->kind() != ir::NodeKind::Attr || withDefault.count(n->name()));
    if (!decidable) continue;
    d.known |= 1u << i;
    if (ir::evaluate(conditions[i], env) != 0) d.value |= 1u << i;
  }
  return d;
}

// The C++ struct of one program (templates/op/program.mustache).
std::string renderProgram(const plan::Program& p, const std::string& name,
                          const std::string& comment, const ir::Function& fn,
                          const std::string& evenDMoves, const Templates& templates) {
  Bindings attrs;
  for (size_t k = 0; k < fn.attrs.size(); ++k)
    attrs[fn.attrs[k].node.get()] = "_attr[" + std::to_string(k) + "]";
  Bindings element = attrs, rowPre = attrs;
  std::vector<Data> inputs, outputs;
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    const plan::Program::Input& in = p.inputs[k];
    Data x;
    x.set("bcast", api::programBcastEnumerator(in));
    x.set("elem", api::programElemEnumerator(in));
    x.set("dims", api::dimMaskLiteral(in.dims));
    x.set("move", api::moveEnumerator(in.move));
    x.set("roll", std::to_string(in.roll));
    x.set("readers", std::to_string(in.readers) + "u");
    x.set("guarded", in.live.always ? "false" : "true");
    // (a swapped input: the input of its tensor and chunk at its own columns, whose registers
    // the groups plan reads it from; a moved random stream: the stream, which it draws at the
    // moved elements)
    int source = -1;
    const bool sourced =
        prims::moveNeedsEvenD(in.move) || (in.random && in.move != prims::Move::None);
    for (size_t i = 0; i < p.inputs.size() && sourced; ++i) {
      const plan::Program::Input& o = p.inputs[i];
      if (o.move == prims::Move::None && o.arg.empty() && o.name == in.arg && o.chunk == in.chunk &&
          o.chunks == in.chunks && o.read)
        source = static_cast<int>(i);
    }
    x.set("source", std::to_string(source));
    x.set("chunk", std::to_string(in.chunk));
    x.set("chunks", std::to_string(in.chunks));
    x.set("description",
          in.name + " " + spec::shapeClassSpelling(in.shape) +
              (in.stat ? " (compute type)"
               : in.random
                   ? " (random stream " + (in.arg.empty() ? in.name : in.arg).substr(2) +
                         (in.move != prims::Move::None
                              ? std::string(" at the columns of ") + prims::moveName(in.move)
                              : std::string()) +
                         ", drawn)"
               : in.position ? " (the row's index along a named dim)"
               : !in.read    ? " (not read)"
               : in.move != prims::Move::None
                   ? std::string(" (") + in.arg + " read at the columns of " +
                         prims::moveName(in.move) +
                         (in.roll >= 0 ? ", shift " + std::to_string(in.roll) : "") + ")"
               : in.dims != ~0u ? " (broadcast over some leading dims)"
                                : ""));
    inputs.push_back(x);
    // [...] and [] inputs are read per row (rowPre), the others per element.
    if (in.shape == ir::ShapeClass::Row || in.shape == ir::ShapeClass::Scalar)
      rowPre[in.leaf.get()] = "_rowIn[" + std::to_string(k) + "]";
    else
      element[in.leaf.get()] = "_in[" + std::to_string(k) + "]";
  }
  for (const plan::Program::Output& o : p.outputs) {
    Data x;
    x.set("kind", api::outKindEnumerator(o.kind));
    x.set("elem", api::outElemEnumerator(o.type));
    x.set("reduce", api::reduceEnumerator(o.combine));
    x.set("keep", api::dimMaskLiteral(o.keepDims));
    x.set("chunk", std::to_string(o.chunk));
    x.set("chunks", std::to_string(o.chunks));
    // (a Passed output: the earlier program's result it is)
    x.set("result", std::to_string(o.kind == plan::OutKind::Passed ? o.passed : o.result));
    x.set("per_row", o.kind == plan::OutKind::Total && o.totalOf != plan::Program::TotalOf::Elements
                         ? "true"
                         : "false");
    x.set("description", o.name +
                             (o.kind == plan::OutKind::Passed ? " [D] (an earlier program's)"
                              : o.kind == plan::OutKind::Full && p.columns ? " [D]"
                              : o.kind == plan::OutKind::Full              ? " [..., D]"
                              : o.kind == plan::OutKind::Row               ? " [...]"
                              : o.kind == plan::OutKind::Stat              ? " [...] (compute type)"
                              : o.kind == plan::OutKind::ColSum            ? " [D] (sum over rows)"
                              : o.kind == plan::OutKind::ColM2
                                  ? " [D] (sum over rows of squared deviations from the mean)"
                              : o.kind == plan::OutKind::Scalar ? " [] (finish)"
                                                                : " [] (over all rows)") +
                             (o.type == spec::OutputType::Dtype
                                  ? ""
                                  : std::string(" stored as ") + spec::outputTypeName(o.type)));
    outputs.push_back(x);
  }
  auto rowValuesBefore = [&](Bindings b, int stage) {
    for (size_t i = 0; i < p.rowValues.size(); ++i)
      if (p.rowValueStage[i] < stage) b[p.rowValues[i].get()] = "_rv[" + std::to_string(i) + "]";
    return b;
  };
  auto assignRowValues = [&](int stage) {
    std::vector<Assignment> a;
    for (size_t i = 0; i < p.rowValues.size(); ++i)
      if (p.rowValueStage[i] == stage)
        a.push_back({"_rv[" + std::to_string(i) + "]", p.rowValues[i]});
    return a;
  };
  Data d;
  d.set("name", name);
  d.set("comment", comment);
  d.set("n_inputs", std::to_string(p.inputs.size()));
  d.set("n_outputs", std::to_string(p.outputs.size()));
  // The number of rows, where a formula reads it, in the attr slot after the spec's attrs.
  bool usesRows = false;
  for (const plan::Program::Output& o : p.outputs)
    for (const ir::Expr& e : {o.value, o.whole})
      if (e)
        for (const ir::Node* n : ir::topoOrder({e}))
          usesRows = usesRows || n->kind() == ir::NodeKind::Rows;
  // The shifts of its rolls, reduced mod D for the call, in the attr slots after those.
  const size_t rollAttr = fn.attrs.size() + (usesRows ? 1 : 0);
  d.set("n_attrs", std::to_string(rollAttr + p.rolls.size()));
  d.set("rows_attr", std::to_string(fn.attrs.size()));
  d.set("roll_attr", std::to_string(rollAttr));
  d.set("n_rolls", std::to_string(p.rolls.size()));
  std::vector<Assignment> rolls;
  for (size_t i = 0; i < p.rolls.size(); ++i)
    rolls.push_back({"_s[" + std::to_string(i) + "]", p.rolls[i]});
  d.set("rolls", printCpp(rolls, 4, attrs));
  // A rolled j: the column its roll reads, with the call's shift (its slot).
  std::vector<ir::Expr> roots;
  for (const plan::Program::Output& o : p.outputs)
    if (o.value) roots.push_back(o.value);
  for (const ir::Node* n : ir::topoOrder(roots)) {
    const ir::Expr shift = opt::rollShift(n);
    if (!shift || n->args()[0]->kind() != ir::NodeKind::Column) continue;
    for (size_t i = 0; i < p.rolls.size(); ++i)
      if (ir::sameValue(p.rolls[i].get(), shift.get()))
        element[n] =
            "fg::movedColumn(fg::Move::Roll, _j, _D, _attr[kRollAttr + " + std::to_string(i) + "])";
  }
  // The prefix (Program::prefix): computed from the inputs by `prefix`, read by the passes and
  // the outputs as the inputs after the program's own (_in[kInputs + i]).
  // After pass k's refresh (Program::refreshes), the refreshed values are in those places
  // instead: the passes from k on and the outputs read them.
  const Bindings inputsOnly = element;
  auto inPlaces = [&](const std::vector<ir::Expr>& values) {
    Bindings b = inputsOnly;
    for (size_t i = 0; i < values.size(); ++i)
      b[values[i].get()] = "_in[" + std::to_string(p.inputs.size() + i) + "]";
    return b;
  };
  auto elementAt = [&](int pass) { // the element values' places as pass `pass` reads them
    const std::vector<ir::Expr>* values = &p.prefix;
    for (const plan::Program::Refresh& r : p.refreshes)
      if (r.pass <= pass) values = &r.values;
    return inPlaces(*values);
  };
  d.set("columns", p.columns ? "true" : "false");
  d.set("n_stages", std::to_string(p.stages.size()));
  d.set("n_row_values", std::to_string(p.rowValues.size()));
  d.set("n_named_dims", std::to_string(p.namedDims));
  d.set("even_d_moves", evenDMoves);
  d.set("plan", api::planEnumerator(p.plan));
  d.set("uses_column", p.usesColumn ? "true" : "false");
  d.set("inputs", list(inputs));
  d.set("outputs", list(outputs));
  std::vector<Data> reductions, shifts, plain, picks;
  UniformConditions uniforms; // of term, guards and elem
  d.set("row_pre", printCpp(assignRowValues(-1), 4, rowPre));
  d.set("n_prefix", std::to_string(p.prefix.size()));
  {
    std::vector<Assignment> prefix;
    for (size_t i = 0; i < p.prefix.size(); ++i)
      prefix.push_back({"_in[" + std::to_string(p.inputs.size() + i) + "]", p.prefix[i]});
    d.set("prefix", printCpp(prefix, 4, rowValuesBefore(inputsOnly, 0), &uniforms));
  }
  // Each refresh computes its values from those before it into _r, then puts them in place.
  std::vector<Data> refreshes;
  unsigned refreshPasses = 0;
  for (const plan::Program::Refresh& r : p.refreshes) {
    std::vector<Assignment> values;
    std::string place;
    for (size_t i = 0; i < r.values.size(); ++i) {
      values.push_back({"_r[" + std::to_string(i) + "]", r.values[i]});
      place += "      _in[kInputs + " + std::to_string(i) + "] = _r[" + std::to_string(i) + "];\n";
    }
    Data x;
    x.set("pass", std::to_string(r.pass));
    x.set("n_values", std::to_string(r.values.size()));
    x.set("values",
          printCpp(values, 6, rowValuesBefore(elementAt(r.pass - 1), r.pass), &uniforms) + place);
    refreshes.push_back(x);
    refreshPasses |= 1u << r.pass;
  }
  d.set("refreshes", list(refreshes));
  d.set("refresh_passes", std::to_string(refreshPasses) + "u");
  // Where the inputs read under index conditions are read (plan/Liveness.h): the conditions
  // over j and the values rowPre computed, as a disjunction of conjunctions.
  std::vector<Data> guarded;
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    const plan::LiveWhen& live = p.inputs[k].live;
    if (live.always) continue;
    std::vector<Assignment> conditions;
    std::vector<const ir::Node*> seen;
    std::string formula;
    for (const auto& conjunction : live.any) {
      std::string term;
      for (const auto& [c, holds] : conjunction) {
        auto at = std::find(seen.begin(), seen.end(), c.get());
        if (at == seen.end()) {
          conditions.push_back({"_c[" + std::to_string(seen.size()) + "]", c});
          seen.push_back(c.get());
          at = seen.end() - 1;
        }
        term += std::string(term.empty() ? "" : " && ") + (holds ? "" : "!") + "_c[" +
                std::to_string(at - seen.begin()) + "]";
      }
      formula += (formula.empty() ? "(" : " || (") + (term.empty() ? "true" : term) + ")";
    }
    Data x;
    x.set("index", std::to_string(k));
    x.set("n_conditions", std::to_string(std::max<size_t>(seen.size(), 1)));
    x.set("conditions", printCpp(conditions, 6, rowValuesBefore(attrs, 0)));
    x.set("formula", formula.empty() ? "false" : formula);
    guarded.push_back(x);
  }
  d.set("guarded_inputs", list(guarded));
  std::vector<Data> stages;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const int st = static_cast<int>(s);
    std::vector<Assignment> terms;
    Bindings after = rowValuesBefore(attrs, st);
    for (size_t j = 0; j < p.stages[s].reductions.size(); ++j) {
      const ir::Expr& r = p.stages[s].reductions[j];
      terms.push_back({"_t[" + std::to_string(j) + "]", r->args()[0]});
      after[r.get()] = cppReductionResult(*r->prim(), "_red[" + std::to_string(j) + "]");
    }
    Data x;
    x.set("index", std::to_string(s));
    x.set("n_reductions", std::to_string(p.stages[s].reductions.size()));
    x.set("first", std::to_string(reductions.size()));
    for (const ir::Expr& r : p.stages[s].reductions)
      reductions.push_back(Data(api::reduceEnumerator(r->prim()->combine)));
    for (int shift : p.stages[s].shift)
      shifts.push_back(Data(std::to_string(shift)));
    for (bool n : p.stages[s].plain)
      plain.push_back(Data(n ? "true" : "false"));
    std::vector<Assignment> columns;
    for (size_t j = 0; j < p.stages[s].reductions.size(); ++j) {
      picks.push_back(Data(p.stages[s].pick[j] ? "true" : "false"));
      if (p.stages[s].pick[j])
        columns.push_back({"_c[" + std::to_string(j) + "]", p.stages[s].pickColumn[j]});
    }
    x.set("pick_columns", printCpp(columns, 6, rowValuesBefore(attrs, st)));
    std::vector<Assignment> guards;
    std::string negate;
    for (size_t j = 0; j < p.stages[s].reductions.size(); ++j) {
      const std::string target = "_g[" + std::to_string(j) + "]";
      if (!p.stages[s].guard[j]) continue;
      guards.push_back({target, p.stages[s].guard[j]});
      if (!p.stages[s].guardWhen[j]) negate += "      " + target + " = !" + target + ";\n";
    }
    x.set("guards", printCpp(guards, 6, attrs, &uniforms) + negate);
    x.set("term", printCpp(terms, 6, rowValuesBefore(elementAt(st), st), &uniforms));
    x.set("after", printCpp(assignRowValues(st), 6, after));
    stages.push_back(x);
  }
  d.set("stages", list(stages));
  d.set("reductions", list(reductions));
  d.set("shifts", list(shifts));
  d.set("plain_sums", list(plain));
  d.set("picks", list(picks));
  // Row outputs and the Total sums of per-row values are per-row values, the others element
  // values (the runtime sums a Total output's values of both; one of them is zero).
  std::vector<Assignment> elem, rowOut;
  std::string timesD;
  for (size_t m = 0; m < p.outputs.size(); ++m) {
    const plan::Program::Output& o = p.outputs[m];
    const std::string target = "_out[" + std::to_string(m) + "]";
    const bool perRow = o.perRow();
    const bool whole = o.kind == plan::OutKind::Scalar; // (finish computes it)
    elem.push_back({target, perRow || whole ? nullptr : o.value});
    rowOut.push_back({target, perRow && !whole ? o.value : nullptr});
    if (o.kind == plan::OutKind::Total && o.totalOf == plan::Program::TotalOf::RowsTimesD)
      timesD += "    // the value of each of the row's D elements (none when D == 0)\n    " +
                target + " = _D > T(0) ? " + target + " * _D : T(0);\n";
  }
  const int all = static_cast<int>(p.stages.size());
  d.set("elem", printCpp(elem, 4, rowValuesBefore(elementAt(all), all), &uniforms));
  std::vector<Assignment> uniformValues;
  for (size_t i = 0; i < uniforms.conditions().size(); ++i)
    uniformValues.push_back({"_u[" + std::to_string(i) + "]", uniforms.conditions()[i]});
  const DefaultUniforms defaults = defaultUniforms(uniforms.conditions(), fn);
  d.set("n_uniforms", std::to_string(uniforms.conditions().size()));
  d.set("n_uniforms_nonzero", !uniforms.conditions().empty());
  d.set("default_known", std::to_string(defaults.known) + "u");
  d.set("default_value", std::to_string(defaults.value) + "u");
  d.set("uniforms", printCpp(uniformValues, 4, attrs));
  d.set("row_out", printCpp(rowOut, 4, rowValuesBefore(attrs, all)) + timesD);
  // The [] outputs, from the whole-tensor values (the Total outputs standing for them).
  Bindings totals = attrs;
  std::vector<Assignment> finish;
  int totalSlot = 0; // (fusegen_program.h totalSlot)
  for (size_t m = 0; m < p.outputs.size(); ++m) {
    const plan::Program::Output& o = p.outputs[m];
    if (o.whole) totals[o.whole.get()] = "_tot[" + std::to_string(totalSlot) + "]";
    totalSlot += o.kind == plan::OutKind::Total;
    if (o.kind == plan::OutKind::Scalar)
      finish.push_back({"_out[" + std::to_string(m) + "]", o.value});
  }
  d.set("finish", printCpp(finish, 4, totals));
  return templates.render("op/program.mustache", d);
}

// The Python reference's body: per-row inputs get a trailing dim of 1 to broadcast against
// rows, and per-row outputs lose it again in `py_return`; int8 and uint8 inputs are widened.
std::string referenceBody(const OpModel& op) {
  const ir::Function& fn = op.fn;
  std::string out;
  for (size_t i = 0; i < fn.inputs.size(); ++i)
    if (pythonRebound(op, i))
      out += "    " + fn.inputs[i].name + " = " + pythonAligned(op, i) + "\n";
  std::vector<Assignment> reference;
  std::vector<ir::Expr> roots;
  for (const ir::FunctionOutput& o : fn.outputs) {
    reference.push_back({o.name, o.value});
    roots.push_back(o.value);
  }
  const std::string full = fn.inputs[op.plan.fullInput].name;
  if (op.plan.randomStreams)
    out +=
        "    _rng = _support.draw_rng(SPEC, " + full + ", generator) if _rng is None else _rng\n";
  out += pythonLeaves(op, roots, full, "_rng", "", "", op.plan.randomStreams ? "_row0" : "");
  out += printPython(reference, 4, fn.inputs[op.plan.dtypeInput].name, full);
  // An output of its own type is stored as the kernels store it (FP8: saturated).
  for (const ir::FunctionOutput& o : fn.outputs)
    if (!o.differentiable())
      out += "    " + o.name + " = _support.to_output(" + o.name + ", \"" +
             spec::outputTypeName(o.type) + "\")\n";
  return out;
}

// The chunked plan's Python function linear_<op> (templates/package/chunked.py): for an op with
// one [..., D] input (the logits), one per-row output and other inputs per row or 0-dim, whose
// names leave room for the function's own (hidden, weight, bias, ...).
void linearPlan(const plan::Signature& fwd, const std::vector<const plan::Arg*>& inputs,
                const std::vector<const plan::Arg*>& attrs, bool namedDims, Data& d) {
  const std::vector<const plan::Arg*> outputs = plan::argsWith(fwd.results, plan::Role::Output);
  // (Named leading dims: a chunk of rows is not an op of the same dims.)
  bool ok = !namedDims && outputs.size() == 1 && outputs[0]->shape == ir::ShapeClass::Row &&
            outputs[0]->differentiable;
  int full = 0;
  for (const plan::Arg* a : inputs) {
    full += a->shape == ir::ShapeClass::Full;
    ok = ok && a->shape != ir::ShapeClass::Col;
  }
  ok = ok && full == 1;
  const std::set<std::string> own = {"hidden",     "weight",         "bias",   "reduction",
                                     "normalizer", "rows_per_chunk", "chunked"};
  std::string params, names, attrParams, attrDict;
  for (const plan::Arg* a : inputs) {
    if (a->shape == ir::ShapeClass::Full) continue;
    ok = ok && !own.count(a->name);
    params += a->name + ": Tensor, ";
    names += a->name + ", ";
  }
  for (const plan::Arg* a : attrs) {
    ok = ok && !own.count(a->name);
    attrParams += a->name + ": " + api::scalarTypeName(a->type) +
                  (a->defaultValue ? " = " + api::pythonDefault(*a) : "") + ", ";
    attrDict += "\"" + a->name + "\": " + a->name + ", ";
  }
  d.set("linear", ok);
  d.set("linear_params", params);
  d.set("linear_inputs", names);
  d.set("linear_attr_params", attrParams);
  d.set("linear_attrs", "{" + attrDict + "}");
}

// Mustache items {name, shape} of tensor arguments: inputs spelled by inputClass (with the
// spec), outputs by their class ([..., n*D] for cat's); with the spec, an input's range.
Data tensorItems(const std::vector<const plan::Arg*>& args, const spec::OpSpec* spec = nullptr) {
  std::vector<Data> items;
  for (const plan::Arg* a : args) {
    Data x;
    x.set("name", a->name);
    std::string shape = a->chunks > 1 ? "[..., " + std::to_string(a->chunks) + "*D]"
                                      : spec::shapeClassSpelling(a->shape);
    std::string range; // an input's declared values, as a Python pair (ints for an int input)
    if (spec)
      for (const spec::Input& in : spec->inputs)
        if (in.name == a->name) {
          shape = inputClass(*spec, in);
          auto number = [&](double v) {
            return in.type == spec::InputType::Dtype ? formatDouble(v)
                                                     : std::to_string(static_cast<long long>(v));
          };
          if (in.range)
            range = "(" + number(in.range->first) + ", " + number(in.range->second) + ")";
        }
    x.set("shape", shape);
    x.set("ranged", !range.empty());
    x.set("range", range);
    // Integer and bool inputs and outputs of their own type: their dtype (torch's name), for
    // the Python side's checks and allocations.
    const char* dtype = a->type == plan::ElemType::Int64   ? "int64"
                        : a->type == plan::ElemType::Int32 ? "int32"
                        : a->type == plan::ElemType::Bool  ? "bool"
                                                           : api::outputDtypeName(a->type);
    x.set("typed", dtype != nullptr);
    x.set("dtype", dtype ? dtype : "");
    items.push_back(x);
  }
  return list(items);
}

Data stringItems(const std::vector<std::string>& values) {
  std::vector<Data> items;
  for (const std::string& v : values)
    items.push_back(Data(v));
  return list(items);
}

} // namespace

std::vector<GeneratedFile> emitOp(const OpModel& op, const Templates& templates) {
  const spec::OpSpec& s = op.spec;
  const ir::Function& fn = op.fn;
  const std::string& name = s.name;
  const plan::OpInterface api = plan::opInterface(fn, op.plan, s.dtypes);
  const plan::Signature& fwd = api.forward;
  const plan::Signature& bwd = api.backward;
  Data d;
  d.set("spec", s.path);
  d.set("op", name);
  d.set("package", op.names.package);
  d.set("namespace", op.names.ns);
  d.set("backward_name", bwd.name);
  d.set("doc", docstring(s.doc.empty() ? "a fused op generated by fusegen" : s.doc));
  std::vector<Data> formulas;
  for (const auto* group : {&s.lets, &s.outputs})
    for (const spec::Binding& b : *group) {
      Data f;
      f.set("name", b.name);
      f.set("formula", oneLine(b.formula));
      formulas.push_back(f);
    }
  d.set("formulas", list(formulas));

  // The interface, spelled for each target (emit/api/).
  const std::vector<const plan::Arg*> inputs = plan::argsWith(fwd.params, plan::Role::Input);
  const std::vector<const plan::Arg*> attrs = plan::argsWith(fwd.params, plan::Role::Attr);
  const std::vector<const plan::Arg*> outputs = plan::argsWith(fwd.results, plan::Role::Output);
  const std::vector<const plan::Arg*> saved = plan::argsWith(fwd.results, plan::Role::Saved);
  d.set("schema", api::schema(fwd));
  d.set("backward_schema", api::schema(bwd));
  d.set("dim_names", stringItems(op.spec.dims));
  d.set("has_dims", !op.spec.dims.empty());
  const std::string evenD = evenDMoves(op);
  d.set("moves_columns", !evenD.empty()); // (a section: an empty string is true to mustache)
  d.set("even_d_moves", evenD);
  d.set("surrogate_gradient", statesSurrogateGradient(op));
  // Whether it rolls columns (roll(x, k)), and the attrs its shifts read: the tests vary them.
  {
    std::vector<ir::Expr> roots;
    for (const ir::FunctionOutput& o : fn.outputs)
      roots.push_back(o.value);
    bool rolls = false;
    std::set<std::string> rollAttrs;
    for (const ir::Node* n : ir::topoOrder(roots))
      if (const ir::Expr shift = opt::rollShift(n)) {
        rolls = true;
        for (const ir::Node* m : ir::topoOrder({shift}))
          if (m->kind() == ir::NodeKind::Attr) rollAttrs.insert(m->name());
      }
    std::vector<std::string> names;
    for (const ir::FunctionAttr& a : fn.attrs) // (in the spec's order)
      if (rollAttrs.count(a.attr.name)) names.push_back(a.attr.name);
    d.set("rolls", rolls);
    d.set("roll_attrs", stringItems(names));
  }
  d.set("dtypes", stringItems(api::dtypeTable(api.dtypes)));
  d.set("full_input", std::to_string(fwd.full));
  d.set("dtype_input", std::to_string(fwd.dtype));
  d.set("full_input_name", fn.inputs[op.plan.fullInput].name);
  d.set("n_inputs", std::to_string(inputs.size()));
  d.set("n_attrs", std::to_string(attrs.size()));
  d.set("n_outputs", std::to_string(outputs.size()));
  d.set("py_params", api::pythonParams(fwd, true));
  d.set("py_call_args", api::pythonCallArgs(fwd));
  // The wrapper's call of itself on each of several tensors given for the full input (_t).
  {
    std::string each;
    for (const plan::Arg& a : fwd.params) {
      const std::string value = a.name == fn.inputs[op.plan.fullInput].name ? "_t" : a.name;
      each += (each.empty() ? "" : ", ") + (a.keywordOnly ? a.name + "=" + value : value);
    }
    d.set("py_each_args", each);
  }
  d.set("py_return_type", api::pythonReturnType(fwd));
  d.set("py_wrapper_return", api::pythonUserResult(fwd));
  d.set("fake_params", api::pythonParams(fwd, false));
  d.set("fake_backward_params", api::pythonParams(bwd, false));
  d.set("inputs", tensorItems(inputs, &op.spec));
  d.set("outputs", tensorItems(outputs));
  std::vector<Data> attrItems;
  for (const plan::Arg* a : attrs) {
    Data x;
    x.set("name", a->name);
    x.set("type", api::scalarTypeName(a->type));
    x.set("py_default", a->defaultValue ? api::pythonDefault(*a) : "None");
    attrItems.push_back(x);
  }
  d.set("attrs", list(attrItems));
  linearPlan(fwd, inputs, attrs, !op.spec.dims.empty(), d);
  std::vector<std::string> savedStats, savedNames, gradNames, dtypeNames;
  for (const plan::SavedStat& st : op.plan.saved)
    savedStats.push_back(st.name);
  for (const plan::Arg* a : saved)
    savedNames.push_back(a->name);
  for (const plan::Arg* a : plan::argsWith(bwd.params, plan::Role::OutputGrad))
    gradNames.push_back(a->name);
  for (spec::DType t : api.dtypes)
    dtypeNames.push_back(spec::dtypeName(t));
  d.set("saved_stats", stringItems(savedStats));
  std::vector<std::string> savedTotals;
  for (const plan::SavedStat& st : op.plan.savedTotals)
    savedTotals.push_back(st.name);
  d.set("saved_totals", stringItems(savedTotals));
  std::vector<std::string> savedColumns;
  for (const plan::SavedStat& st : op.plan.savedColumns)
    savedColumns.push_back(st.name);
  d.set("saved_columns", stringItems(savedColumns));
  d.set("has_saved_columns", !savedColumns.empty());
  const bool overRows = !op.plan.forwardBefore.empty() || !op.plan.backwardBefore.empty();
  d.set("over_rows", overRows);
  // The columns independent of each other in every program (DTensor may shard the last dim):
  // no reduction over the row, no move, no column index, no packed chunks.
  bool columnsApart = true;
  std::vector<const plan::Program*> all{&op.plan.forward, &op.plan.backward};
  for (const std::vector<plan::Program>* before : {&op.plan.forwardBefore, &op.plan.backwardBefore})
    for (const plan::Program& p : *before)
      all.push_back(&p);
  for (const plan::Program* p : all) {
    columnsApart = columnsApart && p->stages.empty() && !p->usesColumn;
    for (const plan::Program::Input& in : p->inputs)
      columnsApart = columnsApart && in.move == prims::Move::None && in.chunks == 1;
    for (const plan::Program::Output& o : p->outputs)
      columnsApart = columnsApart && o.chunks == 1 && o.kind != plan::OutKind::Total &&
                     o.kind != plan::OutKind::Scalar;
  }
  d.set("columns_independent", columnsApart); // (a move is a moved input, or a moved j)
  // Whether a value depends on every row of the call (a column statistic, a whole-tensor value
  // of the forward, the row count `rows`): a sample of torch.vmap, or a shard of the rows, is
  // then a call of its own, not a part of one call over the batch. (The backward's sums over
  // every row, the gradients of [] inputs, add up over parts: they do not count.)
  bool allRows = overRows;
  std::vector<ir::Expr> values;
  for (const plan::Program* p : all)
    for (const plan::Program::Output& o : p->outputs) {
      allRows = allRows || (p == &op.plan.forward &&
                            (o.kind == plan::OutKind::Total || o.kind == plan::OutKind::Scalar));
      for (const ir::Expr& e : {o.value, o.whole})
        if (e) values.push_back(e);
    }
  d.set("reads_all_rows", allRows || uses(values, ir::NodeKind::Rows));
  std::set<std::string> positionDims; // the named dims pos() reads (not to be sharded)
  for (const plan::Program* p : all)
    for (const plan::Program::Input& in : p->inputs)
      if (in.position) positionDims.insert(in.leaf->name());
  d.set("has_positions", !positionDims.empty());
  d.set("position_dims",
        stringItems(std::vector<std::string>(positionDims.begin(), positionDims.end())));
  d.set("saved_names", stringItems(savedNames));
  d.set("grad_names", stringItems(gradNames));
  d.set("dtype_names", stringItems(dtypeNames));
  const bool random = op.plan.randomStreams > 0;
  d.set("random", random);
  d.set("random_cpp", random ? "true" : "false");
  d.set("random_streams", std::to_string(op.plan.randomStreams));
  // Whether the op can be built on the LibTorch stable ABI glue (fusegen_glue_stable.cpp), and
  // why not: `fusegen --build` reads it from <op>/<op>_build.yaml and the package records it.
  d.set("stable_abi", random ? "false" : "true");
  d.set("stable_abi_blocker",
        random ? "draws random numbers: its seed and offset come from torch's generator, "
                 "which the LibTorch stable ABI does not reach"
               : "");
  int rngTensor = -1, position = 0;
  for (const plan::Arg& a : bwd.params) {
    if (a.role == plan::Role::RngState) rngTensor = position;
    position += a.isTensor();
  }
  d.set("backward_rng_tensor", std::to_string(rngTensor));
  std::vector<std::string> saveInputs, saveInputsPy, passthrough;
  for (size_t k = 0; k < inputs.size(); ++k) {
    saveInputs.push_back(op.plan.saveInputs[k] ? "true" : "false");
    saveInputsPy.push_back(op.plan.saveInputs[k] ? "True" : "False");
    passthrough.push_back(std::to_string(op.plan.passthrough[k]));
  }
  d.set("save_inputs", stringItems(saveInputs));
  d.set("save_inputs_py", stringItems(saveInputsPy));
  d.set("passthrough", stringItems(passthrough));
  std::vector<std::string> differentiable;
  for (const plan::Arg* o : outputs)
    differentiable.push_back(o->differentiable ? "true" : "false");
  d.set("differentiable", stringItems(differentiable));
  const size_t grads = gradNames.size(); // the backward's first arguments
  d.set("n_backward_saved", std::to_string(grads + inputs.size()));
  d.set("backward_rng_index", std::to_string(grads + inputs.size() + saved.size()));
  d.set("backward_attrs_begin",
        std::to_string(grads + inputs.size() + saved.size() + (random ? 1 : 0)));

  // The Python bodies printed from the IR: the reference, the error bounds, the backward's
  // backward.
  std::vector<std::string> returnNames;
  for (const plan::Arg* o : outputs)
    returnNames.push_back(o->shape == ir::ShapeClass::Row ? o->name + ".squeeze(-1)" : o->name);
  d.set("reference_body", referenceBody(op));
  d.set("py_return", join(returnNames, ", "));
  d.set("bounds_body", boundsBody(op));
  d.set("second_order_body", secondOrderBody(op));
  std::vector<std::string> independent;
  bool anyIndependent = false;
  for (const ir::FunctionOutput& o : fn.outputs) {
    std::string expr = "None";
    for (const spec::Reference& r : s.references)
      if (r.output == o.name) {
        expr = oneLine(r.python);
        anyIndependent = true;
      }
    independent.push_back(expr);
  }
  d.set("has_independent", anyIndependent);
  d.set("has_attrs", !attrs.empty()); // (the test with attrs away from their defaults)
  d.set("reads_column", op.plan.forward.usesColumn || op.plan.backward.usesColumn);
  // (Their tags open lines in test_op.py.mustache: kainjow keeps the line of a standalone tag
  // of a false section.)
  d.set("has_gradient", grads > 0); // an output gradient flows through
  d.set("has_several_gradients", grads > 1);
  d.set("independent_return",
        outputs.size() == 1 ? independent[0] : "(" + join(independent, ", ") + ")");

  // The programs: each direction's main one, after those its column reductions run first
  // (plan/ColumnPasses.h), with their tensor tables.
  std::vector<Data> programs, forwardBefore, backwardBefore;
  auto addProgram = [&](const plan::Program& p, const plan::Signature& sig, const std::string& name,
                        const std::string& comment, std::vector<Data>* before) {
    Data x;
    x.set("name", name);
    std::string entry = name;
    entry[0] = static_cast<char>(std::tolower(entry[0]));
    x.set("entry", entry);
    x.set("body", renderProgram(p, name, comment, fn, evenD, templates));
    x.set("tensors", stringItems(api::tensorTable(sig, p)));
    x.set("op_name", sig.name);
    programs.push_back(x);
    if (before) before->push_back(x);
  };
  auto addBefore = [&](const std::vector<plan::Program>& list, const plan::Signature& sig,
                       const std::string& name, std::vector<Data>& before) {
    for (size_t k = 0; k < list.size(); ++k)
      addProgram(list[k], sig, name + std::to_string(k),
                 list[k].columns ? "Before the " + name + ": [D] values over one row of D."
                                 : "Before the " + name + ": sums over the rows, per column.",
                 &before);
  };
  addBefore(op.plan.forwardBefore, fwd, "Forward", forwardBefore);
  addProgram(op.plan.forward, fwd, "Forward",
             "The forward: outputs, then the per-row values saved for the backward.", nullptr);
  addBefore(op.plan.backwardBefore, bwd, "Backward", backwardBefore);
  addProgram(op.plan.backward, bwd, "Backward",
             "The backward, derived by reverse mode: gradients of the inputs.", nullptr);
  d.set("programs", list(programs));
  d.set("forward_before", list(forwardBefore));
  d.set("backward_before", list(backwardBefore));
  d.set("has_forward_before", !forwardBefore.empty());
  d.set("has_backward_before", !backwardBefore.empty());

  const std::string dir = name + "/";
  std::vector<GeneratedFile> files = {
      {dir + name + ".h", templates.render("op/op.h.mustache", d)},
      {dir + name + "_cpu.cpp", templates.render("op/op_cpu.cpp.mustache", d)},
      {dir + name + "_cuda.cu", templates.render("op/op_cuda.cu.mustache", d)},
      {dir + name + "_ops.cpp", templates.render("op/op_ops.cpp.mustache", d)},
  };
  // C++ and CUDA go through clang-format with the style kept in templates/.
  const std::string style = templates.read("clang-format-style.yaml");
  for (GeneratedFile& f : files)
    f.text = formatCpp(f.text, f.path, style);
  files.push_back({dir + "__init__.py", templates.render("op/op_init.py.mustache", d)});
  files.push_back({dir + "test_" + name + ".py", templates.render("op/test_op.py.mustache", d)});
  files.push_back({dir + "bench_" + name + ".py", templates.render("op/bench_op.py.mustache", d)});
  files.push_back({dir + name + "_build.yaml", templates.render("op/op_build.yaml.mustache", d)});
  return files;
}

std::vector<GeneratedFile> emitPackage(const std::vector<std::string>& opNames,
                                       const PackageNames& names, const Templates& templates) {
  Data d;
  d.set("package", names.package);
  d.set("namespace", names.ns);
  d.set("distribution", distributionName(names.package));
  std::vector<Data> ops;
  for (const std::string& n : opNames) {
    Data x;
    x.set("name", n);
    ops.push_back(x);
  }
  d.set("ops", list(ops));
  d.set("op_list", join(opNames, ", "));
  d.set("version", kVersion);
  const std::string stamp = "@generated by fusegen (runtime). Do not edit: it is copied from "
                            "templates/ by every fusegen run.\n";
  std::vector<GeneratedFile> files = {
      {"setup.py", templates.render("package/setup.py.mustache", d)},
      {"pyproject.toml", templates.render("package/pyproject.toml.mustache", d)},
      {kPackageNamesFile, packageNamesRecord(names)},
      {names.package + "/__init__.py", templates.render("package/package_init.py.mustache", d)},
      {names.package + "/_names.py", templates.render("package/names.py.mustache", d)},
  };
  for (const char* header :
       {"fusegen_runtime.h", "fusegen_program.h", "fusegen_cpu.h", "fusegen_cuda.cuh",
        "fusegen_row_cuda.cuh", "fusegen_group_cuda.cuh", "fusegen_row_geometry.h",
        "fusegen_plans.cuh", "fusegen_cpu_torch.h", "fusegen_run.h", "fusegen_torch.h",
        "fusegen_torch_stable.h", "fusegen_autograd.h", "fusegen_autograd.cpp", "fusegen_glue.h",
        "fusegen_glue.cpp", "fusegen_glue_stable.cpp"})
    files.push_back({std::string("runtime/") + header,
                     "// " + stamp + templates.read(std::string("runtime/") + header)});
  for (const char* module :
       {"_support.py", "testing.py", "benchmark.py", "chunked.py", "test_package.py"})
    files.push_back({names.package + "/" + module,
                     "# " + stamp + templates.read(std::string("package/") + module)});
  return files;
}

} // namespace fusegen::emit
