// SpecModel: the parsed, validated form of one YAML spec. Plain immutable data; every entry
// carries the SourceLoc of what the user wrote so later stages can report errors there.
#pragma once

#include "ir/ShapeClass.h"
#include "support/SourceLoc.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fusegen::spec {

// The shape classes of the IR (ir/ShapeClass.h), by which the spec declares its inputs.
using ir::ShapeClass;
using ir::shapeClassSpelling;

enum class AttrType { Float, Int, Bool };
const char* attrTypeName(AttrType t); // as in a torch schema: float, int, bool

enum class DType { Float32, Float16, BFloat16, Float64 };
const char* dtypeName(DType d); // float32, float16, bfloat16, float64

// What an input's elements are: values of the call's dtype (the default), or a fixed
// integer or bool type declared in the spec (`{shape: [...], dtype: int64}`). Integer and bool
// inputs carry no gradient.
enum class InputType { Dtype, Int64, Int32, Int8, UInt8, Bool };
const char* inputTypeName(InputType t); // "the op's dtype", int64, int32, int8, uint8, bool
// The types a spec may give an input (InputType less Dtype), in that order.
extern const InputType kDeclarableInputTypes[5];

// What an output's elements are stored as: the call's dtype (the default; differentiable), or a
// type of its own declared in the spec (`{value: ..., dtype: float8_e4m3fn}`): float32 for
// statistics next to half outputs, FP8 with saturating conversion (out-of-range values become
// the largest finite one). An output of its own type has no gradient.
// (Compute is not a spec's: the compute type, in which the planner has the forward save the
// whole-tensor values its backward reads.)
enum class OutputType {
  Dtype,
  Float32,
  Float8E4M3,
  Float8E5M2,
  Int8, // integers: rounded to nearest (halves to even), saturated, NaN as 0
  UInt8,
  Int32,
  Int64,
  Bool, // value != 0
  Compute
};
// "the op's dtype", float32, float8_e4m3fn, float8_e5m2, int8, uint8, int32, int64, bool
const char* outputTypeName(OutputType t);
// The types a spec may give an output (OutputType less Dtype and Compute), in that order.
extern const OutputType kDeclarableOutputTypes[8];

struct Input {
  std::string name;
  ShapeClass shape; // its class in the [rows, D] view: what it varies over
  SourceLoc loc;
  InputType type = InputType::Dtype;
  // Named leading dims (`x: [..., S, H, D]`, `cos: [S, D]`): the ones it names, outermost
  // first, with their locations, and whether it has the batch `...`. An input that omits a
  // dim of the op is broadcast over it. (The four classes name none.)
  std::vector<std::string> dims;
  std::vector<SourceLoc> dimLocs;
  bool batch = false;
  SourceLoc shapeLoc; // of the shape list
  // A packed last dim, [..., n*D] (`gu: [..., 2*D]`, one projection of a gate and an up
  // value): n chunks of D, read in formulas as chunk(gu, c); 1: a plain last dim D.
  int chunks = 1;
  // An input's values where the formulas mean them (`range: [lo, hi]`: a probability in
  // [0, 1], a variance above 0, a length of at least 1): the generated tests and benchmark
  // draw it uniformly inside (an integer input's from lo to hi, both included), not from
  // N(0, 1) or [0, D). The op computes its formulas wherever a call's values fall.
  std::optional<std::pair<double, double>> range;
};

struct Attr {
  std::string name;
  AttrType type;
  bool hasDefault = false;
  double defaultValue = 0;
  SourceLoc loc;
};

// A named formula: a `let` binding or an output.
struct Binding {
  std::string name;
  std::string formula;
  SourceLoc loc;                       // of the name
  SourceLoc formulaLoc;                // of the first character of the formula text
  std::vector<SourceLoc> charLocs;     // of each character of the formula, and of its end
  OutputType type = OutputType::Dtype; // outputs only
};

// An independent PyTorch expression for one output, used only by the generated tests.
struct Reference {
  std::string output;
  std::string python;
  SourceLoc loc;
};

struct OpSpec {
  std::string path; // as given on the command line
  std::string name;
  SourceLoc nameLoc;
  std::string doc;
  std::vector<Input> inputs;
  // The op's named leading dims, outermost first: those of its inputs with `...` (which name
  // all of them, in this order); empty for an op of [rows, D] classes only.
  std::vector<std::string> dims;
  std::vector<Attr> attrs;
  std::vector<Binding> lets;
  std::vector<Binding> outputs;
  std::vector<DType> dtypes;
  std::vector<Reference> references;
  std::string functions; // a C++ header of scalar functions, relative to the spec's folder
  SourceLoc functionsLoc;
};

// The dims input `in` has, as a mask over the op's: bit i for named dim i (spec.dims), bit
// dims.size() for the batch `...`. An input with `...` has every named dim.
unsigned inputDimMask(const OpSpec& spec, const Input& in);
// All the op's leading dims: the mask of a [..., D] or [...] input.
unsigned fullDimMask(const OpSpec& spec);
// Whether `in` is broadcast over some leading dim of the op although it varies per row (an
// [S, D] table against [..., S, H, D]): it is read at a row of its own for each row of the op,
// and its gradient is summed over the dims it omits.
bool isMapped(const OpSpec& spec, const Input& in);
// The shape as the spec writes it: "[..., S, H, D]", "[S, D]", or the class's spelling.
std::string inputShapeSpelling(const Input& in);

} // namespace fusegen::spec
