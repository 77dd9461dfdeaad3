// The spellings of the shape classes, as a spec writes them.
#include "ir/ShapeClass.h"

namespace fusegen::ir {

const char* shapeClassSpelling(ShapeClass s) {
  switch (s) {
  case ShapeClass::Scalar:
    return "[]";
  case ShapeClass::Col:
    return "[D]";
  case ShapeClass::Row:
    return "[...]";
  case ShapeClass::Full:
    return "[..., D]";
  }
  return "?";
}

} // namespace fusegen::ir
