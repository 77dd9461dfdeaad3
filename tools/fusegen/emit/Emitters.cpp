// Data preparation for the op and package templates.
#include "emit/Emitters.h"

#include "emit/CodeFormatter.h"
#include "emit/CodePrinter.h"
#include "plan/KernelPlan.h"
#include "support/Version.h"

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

const char* bcastName(spec::ShapeClass s) {
  switch (s) {
  case spec::ShapeClass::Full:
    return "fg::Bcast::Full";
  case spec::ShapeClass::Col:
    return "fg::Bcast::Col";
  case spec::ShapeClass::Row:
    return "fg::Bcast::Row";
  case spec::ShapeClass::Scalar:
    return "fg::Bcast::Scalar";
  }
  return "";
}

// "k == 0 ? A : k == 1 ? B : C" for a constexpr lookup usable on host and device.
std::string chain(const std::string& var, const std::vector<spec::ShapeClass>& shapes) {
  std::string out;
  for (size_t i = 0; i + 1 < shapes.size(); ++i)
    out += var + " == " + std::to_string(i) + " ? " + bcastName(shapes[i]) + " : ";
  out += bcastName(shapes.back());
  if (shapes.size() == 1)
    out = var + " == 0 ? " + std::string(bcastName(shapes[0])) + " : " + bcastName(shapes[0]);
  return out;
}

const char* cppDtype(spec::DType d) {
  switch (d) {
  case spec::DType::Float32:
    return "fg::DType::Float32";
  case spec::DType::Float16:
    return "fg::DType::Float16";
  case spec::DType::BFloat16:
    return "fg::DType::BFloat16";
  case spec::DType::Float64:
    return "fg::DType::Float64";
  }
  return "";
}

// An attr's default as both the schema and Python spell it (True/False, 3, 0.5).
std::string attrDefault(const spec::Attr& a) {
  if (a.type == spec::AttrType::Bool) return a.defaultValue != 0 ? "True" : "False";
  if (a.type == spec::AttrType::Int) return std::to_string(static_cast<long long>(a.defaultValue));
  return pythonLiteral(a.defaultValue);
}

std::string tupleType(const std::string& element, size_t n) {
  if (n == 1) return element;
  std::vector<std::string> items(n, element);
  return "tuple[" + join(items, ", ") + "]";
}

// A tensor argument as the registration file describes it to the glue (fusegen_glue.h).
std::string tensorInfo(const std::string& name, const char* bcast, size_t position) {
  return "{\"" + name + "\", " + bcast + ", " + std::to_string(position) + "}";
}

const char* outKindName(plan::OutKind k) {
  switch (k) {
  case plan::OutKind::Full:
    return "fg::OutKind::Full";
  case plan::OutKind::Row:
    return "fg::OutKind::Row";
  case plan::OutKind::ColSum:
    return "fg::OutKind::ColSum";
  case plan::OutKind::Total:
    return "fg::OutKind::Total";
  case plan::OutKind::Stat:
    return "fg::OutKind::Stat";
  }
  return "";
}

// "v == 0 ? A : v == 1 ? B : C" over arbitrary values (the last is the fallback).
std::string valueChain(const std::string& var, const std::vector<std::string>& values,
                       const std::string& fallback) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i)
    out += var + " == " + std::to_string(i) + " ? " + values[i] + " : ";
  return out + fallback;
}

const char* reduceName(prims::Combine c) {
  switch (c) {
  case prims::Combine::Sum:
    return "fg::Reduce::Sum";
  case prims::Combine::Max:
    return "fg::Reduce::Max";
  case prims::Combine::Min:
    return "fg::Reduce::Min";
  }
  return "";
}

bool usesDim(const std::vector<ir::Expr>& roots) {
  for (const ir::Node* n : ir::topoOrder(roots))
    if (n->kind() == ir::NodeKind::Dim) return true;
  return false;
}

// The body of error_bounds() in op_init.py.mustache: the forward, then the derived backward,
// printed from the IR the kernels are generated from, over testing.Rounding's bounded
// numbers (templates/package/testing.py states the error model). The per-row values a row
// plan's backward reads back from its forward (plan.saved) are used as computed: the forward
// stores them in the compute type.
std::string boundsBody(const OpModel& op) {
  const ir::Function& fn = op.fn;
  const std::string full = fn.inputs[op.plan.fullInput].name;
  std::string out = "    _D = " + full + ".shape[-1] if " + full + ".dim() else 1\n";
  for (const ir::FunctionInput& in : fn.inputs)
    out += "    " + in.name + " = _r.exact(" + in.name +
           (in.shape == ir::ShapeClass::Row ? ".unsqueeze(-1)" : "") + ")\n";
  std::vector<Assignment> forward;
  std::vector<std::string> outputs, grads;
  for (const ir::FunctionOutput& o : fn.outputs) {
    forward.push_back({o.name, o.value});
    outputs.push_back("_r.result(" + o.name + ", \"" + spec::shapeClassSpelling(o.value->shape()) +
                      "\")");
  }
  Bindings saved;
  for (size_t i = 0; i < op.plan.saved.size(); ++i) {
    const std::string name = "_s" + std::to_string(i);
    forward.push_back({name, op.plan.saved[i].value});
    saved[op.plan.saved[i].value.get()] = name;
  }
  out += printPythonBounds(forward, 4, {}, "_t");
  out += "    _outputs = (" + join(outputs, ", ") + ",)\n";
  out += "    if _grads is None:\n        return _outputs, None\n";
  for (size_t m = 0; m < fn.outputs.size(); ++m)
    out += "    " + plan::gradArgName(fn.outputs[m].name) + " = _r.exact(_grads[" +
           std::to_string(m) + "]" +
           (fn.outputs[m].value->shape() == ir::ShapeClass::Row ? ".unsqueeze(-1)" : "") + ")\n";
  std::vector<Assignment> backward;
  for (size_t k = 0; k < fn.inputs.size(); ++k) {
    const ir::Expr& g = op.grad.inputGrads[k];
    const std::string name = "_g" + std::to_string(k);
    if (g) backward.push_back({name, g});
    grads.push_back(g ? "_r.result(" + name + ", \"" +
                            spec::shapeClassSpelling(fn.inputs[k].shape) + "\")"
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
  const size_t nIn = fn.inputs.size(), nOut = fn.outputs.size();
  const std::string full = fn.inputs[op.plan.fullInput].name;
  std::vector<std::string> saved;
  for (const ir::FunctionOutput& o : fn.outputs)
    saved.push_back(plan::gradArgName(o.name));
  for (const ir::FunctionInput& in : fn.inputs)
    saved.push_back(in.name);
  std::string out =
      "    _dtype = ctx.saved_tensors[" + std::to_string(nOut + op.plan.fullInput) + "].dtype\n";
  out += "    " + join(saved, ", ") + (saved.size() == 1 ? "," : "") +
         " = _support.compute_type(ctx.saved_tensors)\n";
  for (size_t a = 0; a < fn.attrs.size(); ++a)
    out += "    " + fn.attrs[a].attr.name + " = ctx.attrs[" + std::to_string(a) + "]\n";
  // Per-row values are [..., 1], as in the reference.
  for (const ir::FunctionOutput& o : fn.outputs)
    if (o.value->shape() == ir::ShapeClass::Row)
      out += "    " + plan::gradArgName(o.name) + " = " + plan::gradArgName(o.name) + ".unsqueeze(-1)\n";
  for (const ir::FunctionInput& in : fn.inputs)
    if (in.shape == ir::ShapeClass::Row)
      out += "    " + in.name + " = " + in.name + ".unsqueeze(-1)\n";
  for (size_t k = 0; k < nIn; ++k)
    if (g2.cotangents[k])
      out += "    " + g2.cotangents[k]->name() + " = _support.cotangent(_gg[" + std::to_string(k) +
             "], ctx.mask[" + std::to_string(k) + "], \"" +
             spec::shapeClassSpelling(fn.inputs[k].shape) + "\", " + full + ")\n";
  std::vector<ir::Expr> roots;
  std::vector<Assignment> assignments;
  std::vector<std::string> results;
  // Arguments of <op>_backward: output gradients, inputs, statistics, attrs, output_mask.
  auto add = [&](const ir::Expr& e, spec::ShapeClass cls) {
    if (!e) {
      results.push_back("None");
      return;
    }
    const std::string name = "_d" + std::to_string(assignments.size());
    assignments.push_back({name, e});
    roots.push_back(e);
    results.push_back(
        "_support.grad_to(" + name + ", \"" + spec::shapeClassSpelling(cls) + "\", _full, _dtype" +
        (cls == ir::ShapeClass::Scalar && e->shape() == ir::ShapeClass::Row ? ", rowlike=True"
                                                                            : "") +
        ")");
  };
  for (size_t m = 0; m < nOut; ++m)
    add(g2.gradOutGrads[m], fn.outputs[m].value->shape());
  for (size_t k = 0; k < nIn; ++k)
    add(g2.inputGrads[k], fn.inputs[k].shape);
  for (size_t i = 0; i < op.plan.saved.size() + fn.attrs.size() + 1; ++i)
    results.push_back("None");
  if (usesDim(roots)) out += "    _D = " + full + ".shape[-1] if " + full + ".dim() else 1\n";
  out += printPython(assignments, 4);
  out += "    _full = list(" + full + ".shape)\n";
  return out + "    return (" + join(results, ",\n            ") + ",)\n";
}

// The C++ struct of one row program (templates/op/row_program.mustache).
std::string renderProgram(const plan::RowProgram& p, const std::string& name,
                          const std::string& comment, const ir::Function& fn,
                          const Templates& templates) {
  Bindings attrs;
  for (size_t k = 0; k < fn.attrs.size(); ++k)
    attrs[fn.attrs[k].node.get()] = "_attr[" + std::to_string(k) + "]";
  Bindings element = attrs, rowPre = attrs;
  std::vector<std::string> inBcast, inputList;
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    const plan::RowProgram::Input& in = p.inputs[k];
    inBcast.push_back(in.stat ? "fg::Bcast::Stat" : bcastName(in.shape));
    inputList.push_back(in.name + " " + spec::shapeClassSpelling(in.shape));
    // [...] and [] inputs are read per row (rowPre), the others per element.
    if (in.shape == ir::ShapeClass::Row || in.shape == ir::ShapeClass::Scalar)
      rowPre[in.leaf.get()] = "_rowIn[" + std::to_string(k) + "]";
    else
      element[in.leaf.get()] = "_in[" + std::to_string(k) + "]";
  }
  std::vector<std::string> outKinds, outputList;
  for (const plan::RowProgram::Output& o : p.outputs) {
    outKinds.push_back(outKindName(o.kind));
    outputList.push_back(o.name + (o.kind == plan::OutKind::Full     ? " [..., D]"
                                   : o.kind == plan::OutKind::Row    ? " [...]"
                                   : o.kind == plan::OutKind::Stat   ? " [...] (compute type)"
                                   : o.kind == plan::OutKind::ColSum ? " [D] (sum over rows)"
                                                                     : " [] (sum over all)"));
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
  d.set("n_attrs", std::to_string(fn.attrs.size()));
  d.set("n_stages", std::to_string(p.stages.size()));
  d.set("n_row_values", std::to_string(p.rowValues.size()));
  d.set("input_list", join(inputList, ", "));
  d.set("output_list", join(outputList, ", "));
  d.set("in_chain", valueChain("k", inBcast, "fg::Bcast::Full"));
  d.set("out_chain", valueChain("m", outKinds, "fg::OutKind::Full"));
  std::vector<std::string> counts, kinds;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    counts.push_back(std::to_string(p.stages[s].reductions.size()));
    for (size_t j = 0; j < p.stages[s].reductions.size(); ++j)
      kinds.push_back("s == " + std::to_string(s) + " && j == " + std::to_string(j) + " ? " +
                      reduceName(p.stages[s].reductions[j]->prim()->combine) + " : ");
  }
  d.set("reductions_chain", valueChain("s", counts, "0"));
  d.set("reduce_kind_chain",
        (kinds.empty() ? std::string("s + j < 0 ? fg::Reduce::Sum : ") : join(kinds, "")) +
            "fg::Reduce::Sum");
  d.set("row_pre", printCpp(assignRowValues(-1), 4, rowPre));
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
    x.set("term", printCpp(terms, 6, rowValuesBefore(element, st)));
    x.set("after", printCpp(assignRowValues(st), 6, after));
    stages.push_back(x);
  }
  d.set("stages", list(stages));
  // Row outputs and the Total sums of per-row values are per-row values, the others element
  // values (the runtime sums a Total output's values of both; one of them is zero).
  std::vector<Assignment> elem, rowOut;
  std::string timesD;
  for (size_t m = 0; m < p.outputs.size(); ++m) {
    const plan::RowProgram::Output& o = p.outputs[m];
    const std::string target = "_out[" + std::to_string(m) + "]";
    const bool perRow =
        o.kind == plan::OutKind::Row || o.kind == plan::OutKind::Stat ||
        (o.kind == plan::OutKind::Total && o.totalOf != plan::RowProgram::TotalOf::Elements);
    elem.push_back({target, perRow ? nullptr : o.value});
    rowOut.push_back({target, perRow ? o.value : nullptr});
    if (o.kind == plan::OutKind::Total && o.totalOf == plan::RowProgram::TotalOf::RowsTimesD)
      timesD += "    // the value of each of the row's D elements (none when D == 0)\n    " +
                target + " = _D > T(0) ? " + target + " * _D : T(0);\n";
  }
  const int all = static_cast<int>(p.stages.size());
  d.set("elem", printCpp(elem, 4, rowValuesBefore(element, all)));
  d.set("row_out", printCpp(rowOut, 4, rowValuesBefore(attrs, all)) + timesD);
  return templates.render("op/row_program.mustache", d);
}

} // namespace

std::vector<GeneratedFile> emitOp(const OpModel& op, const Templates& templates) {
  const spec::OpSpec& s = op.spec;
  const ir::Function& fn = op.fn;
  const std::string& name = s.name;
  const bool row = op.plan.kind == plan::PlanKind::Row;
  Data d;
  d.set("spec", s.path);
  d.set("op", name);
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

  std::vector<Data> inputs, attrs, outputs;
  std::vector<spec::ShapeClass> inShapes, outShapes;
  const size_t nIn = fn.inputs.size(), nOut = fn.outputs.size(), nSaved = op.plan.saved.size();
  // The backward's tensors in its schema: the outputs' gradients, the inputs, the statistics;
  // its plan reads the inputs, the statistics, then the gradients.
  std::vector<std::string> inputList, tensorNames, tensorArgs, bwdTensorArgs, schemaArgs, pyParams,
      pyCall, fakeParams;
  Bindings pointwise;
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    const ir::FunctionInput& in = fn.inputs[i];
    Data x;
    x.set("name", in.name);
    x.set("index", std::to_string(i));
    x.set("shape", spec::shapeClassSpelling(in.shape));
    inputs.push_back(x);
    inShapes.push_back(in.shape);
    inputList.push_back(in.name + " " + spec::shapeClassSpelling(in.shape));
    tensorNames.push_back(in.name);
    tensorArgs.push_back(tensorInfo(in.name, bcastName(in.shape), i));
    bwdTensorArgs.push_back(tensorInfo(in.name, bcastName(in.shape), nOut + i));
    schemaArgs.push_back("Tensor " + in.name);
    pyParams.push_back(in.name + ": Tensor");
    pyCall.push_back(in.name);
    fakeParams.push_back(in.name);
    pointwise[in.node.get()] = "_in[" + std::to_string(i) + "]";
  }
  std::vector<std::string> attrSchema, attrPy, attrNames, attrCall, attrFake;
  for (size_t i = 0; i < fn.attrs.size(); ++i) {
    const spec::Attr& a = fn.attrs[i].attr;
    Data x;
    x.set("name", a.name);
    x.set("index", std::to_string(i));
    x.set("type", spec::attrTypeName(a.type));
    x.set("py_default", a.hasDefault ? attrDefault(a) : "None");
    attrs.push_back(x);
    attrSchema.push_back(std::string(spec::attrTypeName(a.type)) + " " + a.name +
                         (a.hasDefault ? "=" + attrDefault(a) : ""));
    attrPy.push_back(a.name + ": " + spec::attrTypeName(a.type) +
                     (a.hasDefault ? " = " + attrDefault(a) : ""));
    attrNames.push_back(a.name);
    attrCall.push_back(a.name + "=" + a.name);
    // The dispatcher leaves out keyword arguments equal to their schema default.
    attrFake.push_back(a.name + (a.hasDefault ? "=" + attrDefault(a) : ""));
    pointwise[fn.attrs[i].node.get()] = "_attr[" + std::to_string(i) + "]";
  }
  std::vector<std::string> outputList, gradNames, gradTensorArgs, gradSchema, outputNames,
      returnNames;
  std::vector<Assignment> forward, reference;
  std::vector<ir::Expr> referenceRoots;
  for (size_t m = 0; m < fn.outputs.size(); ++m) {
    const ir::FunctionOutput& o = fn.outputs[m];
    Data x;
    x.set("name", o.name);
    x.set("index", std::to_string(m));
    x.set("shape", spec::shapeClassSpelling(o.value->shape()));
    outputs.push_back(x);
    outShapes.push_back(o.value->shape());
    outputList.push_back(o.name + " " + spec::shapeClassSpelling(o.value->shape()));
    outputNames.push_back(o.name);
    // Per-row values are [..., 1] in the reference, so they broadcast like the kernels'.
    returnNames.push_back(o.value->shape() == ir::ShapeClass::Row ? o.name + ".squeeze(-1)"
                                                                  : o.name);
    gradNames.push_back(plan::gradArgName(o.name));
    gradTensorArgs.push_back(tensorInfo(plan::gradArgName(o.name), bcastName(o.value->shape()), m));
    gradSchema.push_back("Tensor " + plan::gradArgName(o.name));
    forward.push_back({"_out[" + std::to_string(m) + "]", o.value});
    reference.push_back({o.name, o.value});
    referenceRoots.push_back(o.value);
    pointwise[op.grad.gradOuts[m].get()] = "_gout[" + std::to_string(m) + "]";
  }
  std::vector<Assignment> backward;
  for (size_t k = 0; k < fn.inputs.size(); ++k)
    backward.push_back({"_gin[" + std::to_string(k) + "]", op.grad.inputGrads[k]});

  d.set("inputs", list(inputs));
  d.set("attrs", list(attrs));
  d.set("outputs", list(outputs));
  d.set("n_inputs", std::to_string(nIn));
  d.set("n_outputs", std::to_string(nOut));
  d.set("n_attrs", std::to_string(fn.attrs.size()));
  d.set("input_list", join(inputList, ", "));
  d.set("output_list", join(outputList, ", "));

  std::vector<std::string> cppDtypes, pyDtypes;
  for (spec::DType t : s.dtypes) {
    cppDtypes.push_back(cppDtype(t));
    pyDtypes.push_back(std::string("\"") + spec::dtypeName(t) + "\"");
  }
  std::vector<std::string> savedNames, savedSchema, savedQuoted;
  for (const plan::SavedStat& st : op.plan.saved) {
    savedNames.push_back(plan::savedArgName(st.name));
    bwdTensorArgs.push_back(tensorInfo(plan::savedArgName(st.name), "fg::Bcast::Stat",
                                       nOut + nIn + savedNames.size() - 1));
    savedSchema.push_back("Tensor " + plan::savedArgName(st.name));
    savedQuoted.push_back("\"" + st.name + "\"");
  }
  bwdTensorArgs.insert(bwdTensorArgs.end(), gradTensorArgs.begin(), gradTensorArgs.end());
  const size_t nFwdOut = nOut + nSaved;
  d.set("forward_tensor_args", join(tensorArgs, ", "));
  d.set("full_input", std::to_string(op.plan.fullInput));
  d.set("cpp_dtypes", join(cppDtypes, ", "));
  d.set("backward_tensor_args", join(bwdTensorArgs, ", "));
  d.set("saved_list", savedNames.empty() ? std::string("none") : join(savedNames, ", "));

  // The attrs are keyword-only, in the schema as in the Python wrapper: an attr without a
  // default may then follow one with a default (positional ones could not).
  std::vector<std::string> schemaAll = schemaArgs;
  if (!attrSchema.empty()) {
    schemaAll.push_back("*");
    schemaAll.insert(schemaAll.end(), attrSchema.begin(), attrSchema.end());
  }
  std::vector<std::string> bwdSchema = gradSchema;
  bwdSchema.insert(bwdSchema.end(), schemaArgs.begin(), schemaArgs.end());
  bwdSchema.insert(bwdSchema.end(), savedSchema.begin(), savedSchema.end());
  for (const spec::Attr& a : s.attrs)
    bwdSchema.push_back(std::string(spec::attrTypeName(a.type)) + " " + a.name);
  bwdSchema.push_back("bool[" + std::to_string(nIn) + "] output_mask");
  auto returns = [](size_t n) {
    return n == 1 ? std::string("Tensor")
                  : "(" + join(std::vector<std::string>(n, "Tensor"), ", ") + ")";
  };
  d.set("schema", name + "(" + join(schemaAll, ", ") + ") -> " + returns(nFwdOut));
  d.set("backward_schema", name + "_backward(" + join(bwdSchema, ", ") + ") -> " + returns(nIn));

  std::vector<std::string> pyAll = pyParams;
  if (!attrPy.empty()) {
    pyAll.push_back("*");
    pyAll.insert(pyAll.end(), attrPy.begin(), attrPy.end());
  }
  std::vector<std::string> callAll = pyCall, fakeAll = fakeParams;
  callAll.insert(callAll.end(), attrCall.begin(), attrCall.end());
  if (!attrFake.empty()) {
    fakeAll.push_back("*");
    fakeAll.insert(fakeAll.end(), attrFake.begin(), attrFake.end());
  }
  std::vector<std::string> fakeBwd = gradNames;
  fakeBwd.insert(fakeBwd.end(), fakeParams.begin(), fakeParams.end());
  fakeBwd.insert(fakeBwd.end(), savedNames.begin(), savedNames.end());
  fakeBwd.insert(fakeBwd.end(), attrNames.begin(), attrNames.end());
  d.set("py_params", join(pyAll, ", "));
  d.set("py_call_args", join(callAll, ", "));
  d.set("py_return_type", nOut == 1 ? "Tensor" : tupleType("Tensor", nOut));
  d.set("py_wrapper_return", nFwdOut == 1 ? std::string("result")
                             : nOut == 1  ? std::string("result[0]")
                                          : "tuple(result[:" + std::to_string(nOut) + "])");
  // The reference: per-row inputs get a trailing dim of 1 to broadcast against rows.
  std::string prologue;
  for (const ir::FunctionInput& in : fn.inputs)
    if (in.shape == ir::ShapeClass::Row)
      prologue += "    " + in.name + " = " + in.name + ".unsqueeze(-1)\n";
  if (usesDim(referenceRoots))
    prologue += "    _D = " + fn.inputs[op.plan.fullInput].name + ".shape[-1]\n";
  d.set("reference_body", prologue + printPython(reference, 4));
  d.set("py_return", join(returnNames, ", "));
  d.set("bounds_body", boundsBody(op));
  d.set("second_order_body", secondOrderBody(op));
  d.set("n_backward_saved", std::to_string(nOut + nIn));
  d.set("backward_attrs_begin", std::to_string(nOut + nIn + nSaved));
  d.set("fake_params", join(fakeAll, ", "));
  d.set("fake_backward_params", join(fakeBwd, ", "));
  d.set("tensor_names", join(tensorNames, ", "));
  d.set("saved_names", join(savedNames, ", "));
  d.set("grad_names", join(gradNames, ", "));
  d.set("py_dtypes", join(pyDtypes, ", "));
  d.set("py_saved", join(savedQuoted, ", "));

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
  d.set("has_several_outputs", nOut > 1); // (its tags open lines in test_op.py.mustache: kainjow
                                          // keeps the line of a standalone tag of a false section)
  d.set("independent_return", nOut == 1 ? independent[0] : "(" + join(independent, ", ") + ")");

  const std::string dir = name + "/";
  std::vector<GeneratedFile> files;
  if (row) {
    d.set("forward_program",
          renderProgram(op.plan.forward, "Forward",
                        "The forward: outputs, then the per-row statistics saved for the backward.",
                        fn, templates));
    d.set("backward_program",
          renderProgram(op.plan.backward, "Backward",
                        "The backward, derived by reverse mode: gradients of the inputs.", fn,
                        templates));
    files = {
        {dir + name + ".h", templates.render("op/op_row.h.mustache", d)},
        {dir + name + "_cpu.cpp", templates.render("op/op_row_cpu.cpp.mustache", d)},
        {dir + name + "_cuda.cu", templates.render("op/op_row_cuda.cu.mustache", d)},
        {dir + name + "_ops.cpp", templates.render("op/op_row_ops.cpp.mustache", d)},
    };
  } else {
    d.set("bcast_chain", chain("k", inShapes));
    d.set("output_bcast_chain", chain("m", outShapes));
    d.set("forward_body", printCpp(forward, 4, pointwise));
    d.set("backward_body", printCpp(backward, 4, pointwise));
    files = {
        {dir + name + ".h", templates.render("op/op.h.mustache", d)},
        {dir + name + "_cpu.cpp", templates.render("op/op_cpu.cpp.mustache", d)},
        {dir + name + "_cuda.cu", templates.render("op/op_cuda.cu.mustache", d)},
        {dir + name + "_ops.cpp", templates.render("op/op_ops.cpp.mustache", d)},
    };
  }
  // C++ and CUDA go through clang-format with the style kept in templates/.
  const std::string style = templates.read("clang-format-style.yaml");
  for (GeneratedFile& f : files)
    f.text = formatCpp(f.text, f.path, style);
  files.push_back({dir + "__init__.py", templates.render("op/op_init.py.mustache", d)});
  files.push_back({dir + "test_" + name + ".py", templates.render("op/test_op.py.mustache", d)});
  files.push_back({dir + "bench_" + name + ".py", templates.render("op/bench_op.py.mustache", d)});
  return files;
}

std::vector<GeneratedFile> emitPackage(const std::vector<std::string>& opNames,
                                       const Templates& templates) {
  Data d;
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
      {"fusegen_ops/__init__.py", templates.render("package/fusegen_ops_init.py.mustache", d)},
  };
  for (const char* header :
       {"fusegen_runtime.h", "fusegen_row.h", "fusegen_cpu.h", "fusegen_cuda.cuh",
        "fusegen_row_cuda.cuh", "fusegen_torch.h", "fusegen_autograd.h", "fusegen_autograd.cpp",
        "fusegen_glue.h", "fusegen_glue.cpp"})
    files.push_back({std::string("runtime/") + header,
                     "// " + stamp + templates.read(std::string("runtime/") + header)});
  for (const char* module : {"_support.py", "testing.py", "benchmark.py", "test_package.py"})
    files.push_back({std::string("fusegen_ops/") + module,
                     "# " + stamp + templates.read(std::string("package/") + module)});
  return files;
}

} // namespace fusegen::emit
