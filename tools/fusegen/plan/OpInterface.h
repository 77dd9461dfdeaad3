// OpInterface: the typed signatures of an op and of its backward, as the planner laid them out.
// Every argument carries its role, element type, shape and whether gradient flows through it,
// and each signature names the program (KernelPlan.h) that computes it. The emitters spell
// this one model for each target (emit/api/: the schema, C++, Python and the fake) and do not
// read the spec's lists again; a new kind of argument is a new Role or ElemType here, and one
// case in each spelling.
#pragma once

#include "ir/ShapeClass.h"
#include "plan/KernelPlan.h"
#include "specfile/SpecModel.h"

#include <optional>
#include <string>
#include <vector>

namespace fusegen::plan {

// What an argument is to the op.
enum class Role {
  Input,      // a tensor the user passes
  Attr,       // a scalar the user passes (keyword-only in the forward)
  Output,     // a tensor returned to the user
  Saved,      // a per-row value the forward also returns, for its backward
  OutputGrad, // the backward's incoming gradient of an output
  InputGrad,  // a backward result: the gradient of an input
  OutputMask, // the backward's bool[n]: which input gradients are wanted
  Generator,  // an op that draws random numbers: the forward's `Generator? generator=None`
  RngState,   // ... and the seed and offset it drew with (int64 [2]), returned after the saved
              // values and passed back to the backward after them
};

// An argument's element type.
enum class ElemType {
  Dtype,       // the call's dtype: one of the op's dtypes, the same for all such tensors
  ComputeType, // what the kernels compute in: float32 for half types, else the dtype
  Float,       // scalars: a spec's attrs
  Int,
  Bool,  // a bool attr, or a tensor of bools (a spec's bool input)
  Int64, // tensors of a spec's integer inputs
  Int32,
  Float32,    // an output of a spec's own type (OutputType): float32, FP8, integers, bool
  Float8E4M3, // (float8_e4m3fn)
  Float8E5M2,
  Int8,
  UInt8,
  BoolList,  // the output mask
  Generator, // a torch.Generator or None
};

struct Arg {
  std::string name;
  Role role = Role::Input;
  ElemType type = ElemType::Dtype;
  ir::ShapeClass shape = ir::ShapeClass::Full; // tensors only
  bool differentiable = false; // gradient flows through it (float tensor inputs and outputs)
  bool keywordOnly = false;
  std::optional<double> defaultValue; // attrs only
  int length = 0;                     // BoolList only
  int chunks = 1; // a packed tensor [..., chunks*D]: a packed input, a cat output, their grads

  bool isTensor() const {
    return role != Role::Attr && role != Role::OutputMask && role != Role::Generator;
  }
};

struct Signature {
  std::string name;         // the schema's name, without the namespace
  std::vector<Arg> params;  // in schema order
  std::vector<Arg> results; // in schema order
  const Program* program;   // what computes it: its inputs are tensor params, by name
  int full;                 // the program input that defines D and the outputs' shape
  int dtype;                // the program input whose dtype is the call's (a float one)
};

struct OpInterface {
  Signature forward;
  Signature backward;
  std::vector<spec::DType> dtypes;
};

// The interface of an op planned as `plan` (which it points into: keep `plan` alive).
OpInterface opInterface(const ir::Function& fn, const KernelPlan& plan,
                        const std::vector<spec::DType>& dtypes);

// The arguments of `args` with role `role`, in order.
std::vector<const Arg*> argsWith(const std::vector<Arg>& args, Role role);

} // namespace fusegen::plan
