// The layout of an op's and its backward's arguments, decided once here:
//   <op>(inputs, *, attrs) -> (outputs, saved)
//   <op>_backward(output gradients, inputs, saved, attrs, bool[n] output_mask) -> input grads
// An op that draws random numbers also takes `generator` (last, keyword-only) and returns the
// seed and offset it drew with after the saved values, which its backward takes after them.
// The backward's attrs are positional and without defaults: only autograd calls it.
#include "plan/OpInterface.h"

namespace fusegen::plan {

namespace {

ElemType attrType(spec::AttrType t) {
  switch (t) {
  case spec::AttrType::Float:
    return ElemType::Float;
  case spec::AttrType::Int:
    return ElemType::Int;
  case spec::AttrType::Bool:
    break;
  }
  return ElemType::Bool;
}

Arg arg(std::string name, Role role, ElemType type) {
  Arg a;
  a.name = std::move(name);
  a.role = role;
  a.type = type;
  return a;
}

Arg tensor(std::string name, Role role, ElemType type, ir::ShapeClass shape, bool differentiable) {
  Arg a = arg(std::move(name), role, type);
  a.shape = shape;
  a.differentiable = differentiable;
  return a;
}

} // namespace

OpInterface opInterface(const ir::Function& fn, const KernelPlan& plan,
                        const std::vector<spec::DType>& dtypes) {
  std::vector<Arg> inputs, attrs, outputs, saved, outputGrads, inputGrads;
  for (const ir::FunctionInput& in : fn.inputs) {
    const ElemType type = in.type == spec::InputType::Int64   ? ElemType::Int64
                          : in.type == spec::InputType::Int32 ? ElemType::Int32
                          : in.type == spec::InputType::Int8  ? ElemType::Int8
                          : in.type == spec::InputType::UInt8 ? ElemType::UInt8
                          : in.type == spec::InputType::Bool  ? ElemType::Bool
                                                              : ElemType::Dtype;
    inputs.push_back(tensor(in.name, Role::Input, type, in.shape, type == ElemType::Dtype));
    inputGrads.push_back(
        tensor("grad_" + in.name, Role::InputGrad, ElemType::Dtype, in.shape, false));
    inputs.back().chunks = inputGrads.back().chunks = in.chunks;
  }
  for (const ir::FunctionAttr& fa : fn.attrs) {
    Arg a = arg(fa.attr.name, Role::Attr, attrType(fa.attr.type));
    if (fa.attr.hasDefault) a.defaultValue = fa.attr.defaultValue;
    attrs.push_back(a);
  }
  for (const ir::FunctionOutput& o : fn.outputs) {
    const ElemType type = o.type == spec::OutputType::Float32      ? ElemType::Float32
                          : o.type == spec::OutputType::Float8E4M3 ? ElemType::Float8E4M3
                          : o.type == spec::OutputType::Float8E5M2 ? ElemType::Float8E5M2
                          : o.type == spec::OutputType::Int8       ? ElemType::Int8
                          : o.type == spec::OutputType::UInt8      ? ElemType::UInt8
                          : o.type == spec::OutputType::Int32      ? ElemType::Int32
                          : o.type == spec::OutputType::Int64      ? ElemType::Int64
                          : o.type == spec::OutputType::Bool       ? ElemType::Bool
                                                                   : ElemType::Dtype;
    outputs.push_back(tensor(o.name, Role::Output, type, o.value->shape(), o.differentiable()));
    outputs.back().chunks = o.parts.empty() ? 1 : static_cast<int>(o.parts.size());
    if (o.differentiable()) { // (the backward takes no gradient of an output of its own type)
      outputGrads.push_back(
          tensor(gradArgName(o.name), Role::OutputGrad, ElemType::Dtype, o.value->shape(), true));
      outputGrads.back().chunks = outputs.back().chunks;
    }
  }
  for (const SavedStat& s : plan.saved)
    saved.push_back(tensor(savedArgName(s.name), Role::Saved, ElemType::ComputeType,
                           ir::ShapeClass::Row, false));
  for (const SavedStat& s : plan.savedTotals)
    saved.push_back(tensor(savedArgName(s.name), Role::Saved, ElemType::ComputeType,
                           ir::ShapeClass::Scalar, false));
  for (const SavedStat& s : plan.savedColumns)
    saved.push_back(tensor(savedArgName(s.name), Role::Saved, ElemType::ComputeType,
                           ir::ShapeClass::Col, false));

  OpInterface op;
  op.dtypes = dtypes;
  Signature& f = op.forward;
  f.name = fn.name;
  f.params = inputs;
  for (Arg a : attrs) {
    a.keywordOnly = true; // so an attr without a default may follow one with a default
    f.params.push_back(a);
  }
  const bool random = plan.randomStreams > 0;
  Arg generator = arg("generator", Role::Generator, ElemType::Generator);
  generator.keywordOnly = true;
  const Arg rng = tensor(rngArgName(), Role::RngState, ElemType::Int64, ir::ShapeClass::Col, false);
  if (random) f.params.push_back(generator);
  f.results = outputs;
  f.results.insert(f.results.end(), saved.begin(), saved.end());
  if (random) f.results.push_back(rng);
  f.program = &plan.forward;
  f.full = plan.fullInput;
  f.dtype = plan.dtypeInput;

  Signature& b = op.backward;
  b.name = fn.name + "_backward";
  b.params = outputGrads;
  b.params.insert(b.params.end(), inputs.begin(), inputs.end());
  b.params.insert(b.params.end(), saved.begin(), saved.end());
  if (random) b.params.push_back(rng);
  for (Arg a : attrs) {
    a.defaultValue.reset();
    b.params.push_back(a);
  }
  Arg mask = arg("output_mask", Role::OutputMask, ElemType::BoolList);
  mask.length = static_cast<int>(inputs.size());
  b.params.push_back(mask);
  b.results = inputGrads;
  b.program = &plan.backward;
  b.full = plan.fullInput;
  b.dtype = plan.dtypeInput;
  return op;
}

std::vector<const Arg*> argsWith(const std::vector<Arg>& args, Role role) {
  std::vector<const Arg*> out;
  for (const Arg& a : args)
    if (a.role == role) out.push_back(&a);
  return out;
}

} // namespace fusegen::plan
