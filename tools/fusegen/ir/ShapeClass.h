// ShapeClass: how a value broadcasts against the [rows, D] view of an op (DESIGN.md §2). The
// IR's own vocabulary, so it lives here; the spec model re-exports it for the spec's inputs.
#pragma once

namespace fusegen::ir {

enum class ShapeClass {
  Scalar, // []        one value for the whole op
  Col,    // [D]       one value per column, broadcast over rows
  Row,    // [...]     one value per row, broadcast over D
  Full,   // [..., D]  one value per element
};

const char* shapeClassSpelling(ShapeClass s); // "[..., D]", "[D]", "[...]", "[]"

} // namespace fusegen::ir
