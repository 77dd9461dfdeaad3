// SpecLoader implementation. Each top-level section has its own small reader; all of them
// report through Diagnostics and keep going, so one run shows every structural mistake.
#include "specfile/SpecLoader.h"

#include "support/FormulaLocator.h"
#include "support/Identifier.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

namespace fusegen::spec {

namespace {

// Names that cannot name an input, attr, let or output, because the generated code prints
// those names verbatim (C++ parameters and locals, Python parameters and locals, the schema)
// next to these: Python and C++ keywords (isKeyword), standard C macros the generated C++ sees, and
// the names the generated code itself uses where the spec's names are in scope. (Primitives' names
// are free: calls have parentheses. Names beginning with '_' are reserved as well.)
const std::set<std::string> kReservedNames = {
    // standard C macros (object-like) the generated C++ includes
    "EOF", "INFINITY", "NAN", "NULL", "errno",
    // the formula language, and names of the generated code: T, kFast and kPass (template
    // parameters of the element functions), the Python module's torch, F, Tensor, SPEC, tuple
    "D", "j", "rows", "inf", "grad", "result", "self", "ctx", "output_mask", "T", "kFast", "kPass",
    "torch", "F", "Tensor", "SPEC", "tuple"};

// Names the formulas read besides D (the column index, the row count, infinity): no dim takes
// them.
const std::set<std::string> kFormulaNames = {"j", "rows", "inf"};

// Whether `text` has an ASCII control character (or DEL) other than those in `allowed`.
bool hasControlChar(const std::string& text, std::string_view allowed) {
  for (char c : text)
    if ((static_cast<unsigned char>(c) < 0x20 || c == 0x7f) &&
        allowed.find(c) == std::string_view::npos)
      return true;
  return false;
}

// A name as messages quote it: long ones cut, so a 5,000-character name is not repeated.
std::string shown(const std::string& name) {
  return name.size() <= 40 ? name : name.substr(0, 32) + "...";
}

std::string tooLong(const std::string& what, const std::string& name) {
  return what + " name '" + shown(name) + "' is " + std::to_string(name.size()) +
         " characters long; the limit is " + std::to_string(kMaxNameLength);
}

// Walks the YAML events, counting nesting; stops at the first collection too deep.
class DepthChecker : public YAML::EventHandler {
public:
  struct TooDeep {
    YAML::Mark mark;
  };
  std::optional<YAML::Mark> firstDocument, secondDocument;

  void OnDocumentStart(const YAML::Mark& mark) override {
    (firstDocument ? secondDocument : firstDocument) = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    enter(mark);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    enter(mark);
  }
  void OnMapEnd() override { --depth_; }

private:
  void enter(const YAML::Mark& mark) {
    if (++depth_ > kMaxYamlDepth) throw TooDeep{mark};
  }
  int depth_ = 0;
};

// The offset of the first byte of `text` that is not part of valid UTF-8 (or is NUL), or
// npos. yaml-cpp would decode UTF-16 and UTF-32 and pass broken bytes into names and docs,
// and diagnostics count columns in bytes of UTF-8 lines.
size_t firstNonUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80             ? 1
               : (c & 0xE0) == 0xC0 ? 2
               : (c & 0xF0) == 0xE0 ? 3
               : (c & 0xF8) == 0xF0 ? 4
                                    : 0;
    if (c == 0 || n == 0 || i + n > text.size()) return i;
    unsigned cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return i;
    i += n;
  }
  return std::string_view::npos;
}

SourceLoc locOfOffset(const std::string& path, std::string_view text, size_t offset) {
  const size_t lineStart = text.rfind('\n', offset == 0 ? 0 : offset - 1);
  const size_t begin = lineStart == std::string_view::npos || offset == 0 ? 0 : lineStart + 1;
  int line = 1;
  for (size_t i = 0; i < begin; ++i)
    line += text[i] == '\n';
  return SourceLoc{path, line, static_cast<int>(offset - begin) + 1};
}

SourceLoc locOfMark(const std::string& path, const YAML::Mark& m) {
  if (m.line < 0) return SourceLoc{path, 0, 0};
  return SourceLoc{path, m.line + 1, m.column + 1};
}

class Reader {
public:
  Reader(std::string path, const std::string& text, Diagnostics& diags)
      : path_(std::move(path)), diags_(diags), errorsBefore_(diags.errorCount()) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
      lines_.push_back(line);
  }

  SourceLoc loc(const YAML::Node& n) const { return loc(n.Mark()); }
  SourceLoc loc(const YAML::Mark& m) const {
    if (m.line < 0) return SourceLoc{path_, 0, 0};
    return SourceLoc{path_, m.line + 1, m.column + 1};
  }

  // The location of each character of a scalar's value (past quotes, over folded lines).
  std::vector<SourceLoc> charLocs(const YAML::Node& n) const {
    return locateChars(lines_, loc(n), n.Scalar());
  }

  void error(const YAML::Node& n, const std::string& msg) { diags_.error(loc(n), msg); }
  // A missing value (`key:` with nothing after it) is reported at its key: yaml-cpp places
  // the empty value at the next token, which may be lines further down.
  void error(const YAML::Node& value, const YAML::Node& key, const std::string& msg) {
    diags_.error(loc(value.IsNull() ? key : value), msg);
  }
  bool errorsSinceStart() const { return diags_.errorCount() != errorsBefore_; }

  // Iterates a mapping in document order, rejecting duplicate keys and non-scalar keys.
  std::vector<std::pair<YAML::Node, YAML::Node>> entries(const YAML::Node& map,
                                                         const std::string& what) {
    std::vector<std::pair<YAML::Node, YAML::Node>> out;
    std::map<std::string, YAML::Node> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      YAML::Node key = it->first;
      if (!key.IsScalar()) {
        error(key, what + " keys must be plain names");
        continue;
      }
      std::string k = key.Scalar();
      if (seen.count(k)) {
        error(key, "duplicate key '" + k + "' in " + what);
        diags_.note(loc(seen[k]), "first defined here");
        continue;
      }
      seen[k] = key;
      out.emplace_back(key, it->second);
    }
    return out;
  }

  bool expectKind(const YAML::Node& n, const YAML::Node& key, YAML::NodeType::value kind,
                  const std::string& what) {
    if (n.Type() == kind) return true;
    const char* expected = kind == YAML::NodeType::Map        ? "a mapping"
                           : kind == YAML::NodeType::Sequence ? "a list"
                                                              : "a single value";
    error(n, key, what + " must be " + expected);
    return false;
  }

  Diagnostics& diags() { return diags_; }
  const std::string& path() const { return path_; }

private:
  std::string path_;
  Diagnostics& diags_;
  int errorsBefore_;
  std::vector<std::string> lines_;
};

// Whether e spells a packed last dim, N*D (N digits; spaces around '*' allowed).
bool isPackedD(const std::string& e) {
  const size_t star = e.find('*');
  if (star == std::string::npos) return false;
  std::string n = e.substr(0, star), d = e.substr(star + 1);
  auto trim = [](std::string& s) {
    while (!s.empty() && s.back() == ' ')
      s.pop_back();
    while (!s.empty() && s.front() == ' ')
      s.erase(s.begin());
  };
  trim(n);
  trim(d);
  return d == "D" && !n.empty() && n.size() <= 2 &&
         n.find_first_not_of("0123456789") == std::string::npos;
}

// A shape list: `...` first (the batch), named leading dims, `D` last (the row's length);
// which of them are there makes its class in the [rows, D] view. Fills in's shape fields.
bool parseShape(Reader& r, const YAML::Node& n, const YAML::Node& key, Input& in) {
  const std::string name = key.Scalar();
  if (!r.expectKind(n, key, YAML::NodeType::Sequence, "the shape of input '" + name + "'"))
    return false;
  in.shapeLoc = r.loc(n);
  bool hasD = false;
  const size_t count = n.size();
  for (size_t i = 0; i < count; ++i) {
    const YAML::Node d = n[i];
    if (!d.IsScalar()) {
      r.error(d, "shape entries must be '...', a dim name or 'D'");
      return false;
    }
    const std::string e = d.Scalar();
    if (e == "...") {
      if (i != 0) {
        r.error(d, "'...' must be the first entry of the shape of input '" + name + "'");
        return false;
      }
      in.batch = true;
    } else if (e == "D" || isPackedD(e)) {
      if (i + 1 != count) {
        r.error(d, "'" + e + "' must be the last entry of the shape of input '" + name + "'");
        return false;
      }
      hasD = true;
      if (e != "D") {
        in.chunks = std::stoi(e.substr(0, e.find('*')));
        if (in.chunks >= 2 && in.chunks <= 8 && !in.batch) {
          // (the plans read a packed row of the op's full shape; a [B, 6*D] modulation or a
          // [2*D] weight and bias would need its chunks' gradients summed over the dims it
          // omits and packed again)
          r.error(d, "only an input with '...' may be packed ([..., " + e + "]); input '" + name +
                         "' has some of the op's dims or none: pass its chunks as "
                         "inputs of their own (x.chunk(" +
                         std::to_string(in.chunks) + ", -1) in the caller, views with no copy)");
          return false;
        }
        if (in.chunks < 2 || in.chunks > 8) {
          r.error(d, "a packed last dim '" + e +
                         "' takes 2 to 8 chunks of D, in an input of "
                         "shape [..., N*D] (input '" +
                         name + "')");
          return false;
        }
      }
    } else if (!isIdentifier(e) || isKeyword(e) || e[0] == '_') {
      r.error(d, "'" + e + "' in the shape of input '" + name +
                     "' is not a dim name; expected '...', a dim name (an identifier such as S "
                     "or H) or 'D'");
      return false;
    } else if (kFormulaNames.count(e)) {
      // (A dim's name is only ever printed with a prefix or as a string: the generated code's
      // names, T among them (time, as in [B, T, C]), are free for dims. These are not: a
      // formula reading pos(j) or a dim named rows would say something else.)
      r.error(d, "'" + e + "' in the shape of input '" + name +
                     "' names a value of every formula; a dim takes another name");
      return false;
    } else {
      for (size_t k = 0; k < in.dims.size(); ++k)
        if (in.dims[k] == e) {
          r.error(d, "dim '" + e + "' appears twice in the shape of input '" + name + "'");
          return false;
        }
      in.dims.push_back(e);
      in.dimLocs.push_back(r.loc(d));
    }
  }
  const bool leading = in.batch || !in.dims.empty();
  in.shape = hasD ? (leading ? ShapeClass::Full : ShapeClass::Col)
                  : (leading ? ShapeClass::Row : ShapeClass::Scalar);
  return true;
}

// An op none of whose inputs has D, one with `...` ending in a name: the last dim given a name of
// its own (`x: [..., G, C]`, channels C), which the language reads as a leading dim (x one
// value per row of [..., G, C], as position ids [..., S] are). Said at that name, before the
// formulas' errors that would follow from it (a mean over D of a per-row value).
void checkLastDim(Reader& r, const OpSpec& spec) {
  for (const Input& in : spec.inputs)
    if (in.shape == ShapeClass::Full || in.shape == ShapeClass::Col) return;
  for (const Input& in : spec.inputs) {
    if (!in.batch || in.dims.empty()) continue;
    std::string spelled = "[...";
    for (size_t k = 0; k + 1 < in.dims.size(); ++k)
      spelled += ", " + in.dims[k];
    r.diags().error(in.dimLocs.back(),
                    "no input has the last dim D: '" + in.dims.back() +
                        "' in the shape of input '" + in.name +
                        "' is read as a named leading dim (the input then has one "
                        "value per row); the last dim is always spelled D, as in " +
                        spelled + ", D]");
    return;
  }
}

// The op's named dims, from its inputs with `...` (which name all of them, in one order), and
// every other input's against them: a subsequence, in the same order.
void checkDims(Reader& r, OpSpec& spec) {
  const Input* first = nullptr; // the first input with `...` and named dims
  for (const Input& in : spec.inputs)
    if (in.batch && !in.dims.empty() && !first) first = &in;
  if (!first) {
    for (const Input& in : spec.inputs)
      if (!in.dims.empty()) {
        r.diags().error(in.dimLocs[0],
                        "input '" + in.name + "' names dim '" + in.dims[0] +
                            "', but no input with '...' names it; name the op's dims in the "
                            "shape of its full input (e.g. [..., " +
                            in.dims[0] + ", D])");
        return;
      }
    return;
  }
  spec.dims = first->dims;
  auto list = [](const std::vector<std::string>& dims) {
    std::string out;
    for (const std::string& d : dims)
      out += (out.empty() ? "" : ", ") + d;
    return "[" + out + "]";
  };
  for (const Input& in : spec.inputs) {
    if (in.batch) {
      if (!in.dims.empty() && in.dims != spec.dims) {
        r.diags().error(in.shapeLoc, "input '" + in.name + "' has '...' and the dims " +
                                         list(in.dims) + ", but input '" + first->name + "' has " +
                                         list(spec.dims) +
                                         "; inputs with '...' name every dim of the op, in "
                                         "the same order (or none)");
        r.diags().note(first->shapeLoc, "the op's dims are set here");
        std::vector<std::string> a = in.dims, b = spec.dims;
        // Some of the op's dims in its order (position ids [..., S] against [..., S, H]):
        // broadcast over the others, which '...' cannot say.
        const bool some = in.dims.size() < spec.dims.size() && [&] {
          size_t at = 0;
          for (const std::string& d : spec.dims)
            if (at < a.size() && d == a[at]) ++at;
          return at == a.size();
        }();
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (some) {
          std::string spelled = list(in.dims); // "[S]", "[S, D]"
          spelled.insert(spelled.size() - 1, in.shape == ir::ShapeClass::Full ? ", D" : "");
          r.diags().note(in.shapeLoc,
                         "an input broadcast over some of the op's dims names the ones it has, "
                         "without '...': '" +
                             in.name + ": " + spelled +
                             "'; a leading dim of its own too (a batch) is named in the op's "
                             "full input as well, as B in [..., B, S, H, D] with [B, S]");
        } else if (a != b) // (another dim, not another order: q's H heads against k's K)
          r.diags().note(in.shapeLoc,
                         "for the same fusion over tensors whose dims differ in size (q with H "
                         "heads, k with K), write the op for one and call it with a list: "
                         "op([q, k], ...) runs it on each");
      }
      continue;
    }
    size_t at = 0; // the next of the op's dims this input may name
    for (size_t k = 0; k < in.dims.size(); ++k) {
      size_t i = at;
      while (i < spec.dims.size() && spec.dims[i] != in.dims[k])
        ++i;
      if (i < spec.dims.size()) {
        at = i + 1;
        continue;
      }
      bool known = false;
      for (const std::string& d : spec.dims)
        known = known || d == in.dims[k];
      if (known)
        r.diags().error(in.dimLocs[k], "input '" + in.name + "' names its dims in the order " +
                                           list(in.dims) + ", but the op's order is " +
                                           list(spec.dims) + " (set by input '" + first->name +
                                           "')");
      else
        r.diags().error(in.dimLocs[k], "input '" + in.name + "' names dim '" + in.dims[k] +
                                           "', which is not a dim of the op; its dims are " +
                                           list(spec.dims) + " (set by input '" + first->name +
                                           "')");
      break;
    }
  }
}

constexpr double kMaxExactInt = 9007199254740992.0; // 2^53

bool parseNumber(const std::string& text, double& value) {
  std::istringstream in(text);
  in >> value;
  return !in.fail() && in.eof() && std::isfinite(value);
}

// A float attr's default: a number, or infinity as YAML spells it (.inf, -.inf) or Python does
// (inf, -inf): an attr with no bound by default, such as Mamba's dt_max (float("inf")).
bool parseFloatDefault(const std::string& text, double& value) {
  std::string t = text;
  double sign = 1;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) {
    sign = t[0] == '-' ? -1 : 1;
    t.erase(0, 1);
  }
  if (t == "inf" || t == ".inf" || t == ".Inf" || t == ".INF") {
    value = sign * std::numeric_limits<double>::infinity();
    return true;
  }
  return parseNumber(text, value);
}

// "int64, int32, ... or bool": the dtypes an input or output may declare, for messages.
template <class Type, size_t N>
std::string spelledTypes(const Type (&types)[N], const char* (*name)(Type)) {
  std::string s;
  for (size_t i = 0; i < N; ++i)
    s += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + name(types[i]);
  return s;
}

// The values an integer input type holds that a range may name: its own limits, within
// +-2^53 (exact in the double a range is read as).
std::pair<double, double> integerLimits(InputType t) {
  switch (t) {
  case InputType::Int32:
    return {-2147483648.0, 2147483647.0};
  case InputType::Int8:
    return {-128.0, 127.0};
  case InputType::UInt8:
    return {0.0, 255.0};
  default:
    return {-9007199254740992.0, 9007199254740992.0};
  }
}

// A range on an input of type `type` (declared or not): a float input's any finite lo < hi; an
// integer input's, integers its type holds (drawn with both ends included); a bool input's,
// none. False after an error at the range's key or value.
bool checkRange(Reader& r, const Input& in, std::optional<InputType> type,
                const YAML::Node& rangeKey, const YAML::Node& rangeValue) {
  if (!type || !in.range) return true;
  if (*type == InputType::Bool) {
    r.error(rangeKey, "input '" + in.name +
                          "' is of type bool: a range is for a number input (the tests draw "
                          "bools as fair coin flips)");
    return false;
  }
  const auto [lo, hi] = *in.range;
  const auto [min, max] = integerLimits(*type);
  if (lo != std::floor(lo) || hi != std::floor(hi) || lo < min || hi > max) {
    r.error(rangeValue, rangeKey,
            "the range of " + std::string(inputTypeName(*type)) + " input '" + in.name +
                "' must be two integers its type holds, in [" +
                std::to_string(static_cast<long long>(min)) + ", " +
                std::to_string(static_cast<long long>(max)) +
                "] (the tests draw it from lo to hi, both included)");
    return false;
  }
  return true;
}

// An input's mapping form, {shape: [...], dtype: int64} or {shape: [...], range: [0, 1]}: the
// shape as in the short form, and the element type of an integer or bool input, and the values
// it takes (a float input's, of the op's dtype, or an integer input's), which the generated
// tests draw from.
std::optional<Input> readTypedInput(Reader& r, const YAML::Node& n, const YAML::Node& key) {
  const std::string name = key.Scalar();
  Input in;
  in.name = name;
  in.loc = r.loc(key);
  bool shape = false;
  std::optional<InputType> type;
  YAML::Node rangeKey, rangeValue; // (reset to the range's: a Node's = would assign to it)
  bool bad = false;
  for (auto& [field, fv] : r.entries(n, "input '" + name + "'")) {
    const std::string f = field.Scalar();
    if (f == "shape") {
      shape = parseShape(r, fv, key, in);
      bad = bad || !shape;
    } else if (f == "dtype") {
      const std::string t = fv.IsScalar() ? fv.Scalar() : "";
      for (InputType c : kDeclarableInputTypes)
        if (t == inputTypeName(c)) type = c;
      if (!type) {
        r.error(fv, field,
                "unknown dtype '" + t + "' for input '" + name + "'; expected " +
                    spelledTypes(kDeclarableInputTypes, inputTypeName) +
                    " (a floating input takes the op's dtype: declare it in the short form, '" +
                    name + ": <shape>')");
        bad = true;
      }
    } else if (f == "range") {
      double lo = 0, hi = 0;
      const bool pair = fv.IsSequence() && fv.size() == 2 && fv[0].IsScalar() && fv[1].IsScalar() &&
                        parseNumber(fv[0].Scalar(), lo) && parseNumber(fv[1].Scalar(), hi);
      if (!pair || !(lo < hi)) {
        r.error(fv, field,
                "the range of input '" + name +
                    "' must be [lo, hi], two finite numbers with lo < hi (its values, which "
                    "the generated tests draw from)");
        bad = true;
      } else {
        in.range = std::make_pair(lo, hi);
        rangeKey.reset(field);
        rangeValue.reset(fv);
      }
    } else {
      r.error(field,
              "unknown key '" + f + "' in input '" + name + "'; expected shape, dtype, range");
      bad = true;
    }
  }
  if (bad) return std::nullopt;
  if (!shape || (!type && !in.range)) {
    r.error(key, std::string("input '") + name + "' needs " +
                     (!shape ? "a 'shape'"
                             : "a 'dtype' (" + spelledTypes(kDeclarableInputTypes, inputTypeName) +
                                   ") or, for a float input, a 'range'"));
    return std::nullopt;
  }
  if (!checkRange(r, in, type, rangeKey, rangeValue)) return std::nullopt;
  if (!type) return in; // a float input with a range
  if (in.chunks > 1) {
    r.error(key, "packed input '" + name +
                     "' takes the op's dtype: declare it in the short form, '" + name + ": [..., " +
                     std::to_string(in.chunks) + "*D]'");
    return std::nullopt;
  }
  in.type = *type;
  return in;
}

void readInputs(Reader& r, const YAML::Node& n, const YAML::Node& section, OpSpec& spec) {
  if (!r.expectKind(n, section, YAML::NodeType::Map, "'inputs'")) return;
  for (auto& [key, value] : r.entries(n, "'inputs'")) {
    if (value.IsMap()) {
      if (std::optional<Input> in = readTypedInput(r, value, key)) spec.inputs.push_back(*in);
      continue;
    }
    Input in;
    in.name = key.Scalar();
    in.loc = r.loc(key);
    if (parseShape(r, value, key, in)) spec.inputs.push_back(in);
  }
  checkLastDim(r, spec);
  checkDims(r, spec);
  if (spec.inputs.empty() && !r.errorsSinceStart())
    r.error(n, "'inputs' must declare at least one tensor");
}

void readAttrs(Reader& r, const YAML::Node& n, const YAML::Node& section, OpSpec& spec) {
  if (!r.expectKind(n, section, YAML::NodeType::Map, "'attrs'")) return;
  for (auto& [key, value] : r.entries(n, "'attrs'")) {
    const std::string name = key.Scalar();
    if (!r.expectKind(value, key, YAML::NodeType::Map, "attr '" + name + "'")) {
      // (`eps: 1e-5`, a default where the declaration goes: the note spells it)
      if (value.IsScalar()) {
        const std::string v = value.Scalar();
        double number = 0;
        const char* type = v == "true" || v == "false" ? "bool"
                           : parseNumber(v, number) && v.find_first_of(".eE") == std::string::npos
                               ? "int"
                               : "float";
        r.diags().note(r.loc(value), "an attr declares its type and default: " + name +
                                         ": {type: " + type + ", default: " + v + "}");
      }
      continue;
    }
    Attr attr{name, AttrType::Float, false, 0, r.loc(key)};
    bool typed = false, typeError = false;
    std::optional<YAML::Node> defaultNode;
    for (auto& [field, fv] : r.entries(value, "attr '" + name + "'")) {
      const std::string f = field.Scalar();
      if (f == "type") {
        std::string t = fv.IsScalar() ? fv.Scalar() : "";
        if (t == "float")
          attr.type = AttrType::Float;
        else if (t == "int")
          attr.type = AttrType::Int;
        else if (t == "bool")
          attr.type = AttrType::Bool;
        else {
          r.error(fv, field, "unknown attr type '" + t + "'; expected float, int or bool");
          typeError = true;
          continue;
        }
        typed = true;
      } else if (f == "default") {
        defaultNode = fv;
      } else {
        r.error(field, "unknown key '" + f + "' in attr '" + name + "'; expected type, default");
      }
    }
    if (!typed) {
      if (!typeError) r.error(key, "attr '" + name + "' needs a 'type' (float, int or bool)");
      continue;
    }
    if (defaultNode) {
      std::string text = defaultNode->IsScalar() ? defaultNode->Scalar() : "";
      bool ok = false;
      if (attr.type == AttrType::Bool) {
        ok = text == "true" || text == "false";
        attr.defaultValue = text == "true" ? 1 : 0;
      } else {
        ok = attr.type == AttrType::Float ? parseFloatDefault(text, attr.defaultValue)
                                          : parseNumber(text, attr.defaultValue);
        if (ok && attr.type == AttrType::Int && attr.defaultValue != std::floor(attr.defaultValue))
          ok = false;
      }
      if (!ok) {
        r.error(*defaultNode, key,
                "default '" + text + "' of attr '" + name + "' is not a valid " +
                    attrTypeName(attr.type));
        continue;
      }
      // Defaults are kept as doubles and printed as int64 literals: beyond 2^53 the value
      // is no longer exact, and past int64 its conversion is undefined.
      if (attr.type == AttrType::Int && std::fabs(attr.defaultValue) > kMaxExactInt) {
        r.error(*defaultNode, "default '" + text + "' of attr '" + name +
                                  "' is out of range; an int default is at most 2^53 "
                                  "(9007199254740992) in magnitude");
        continue;
      }
      attr.hasDefault = true;
    }
    spec.attrs.push_back(attr);
  }
}

// An output's mapping form, {value: formula, dtype: float8_e4m3fn}: the formula as in the short
// form, and the type its elements are stored as (no gradient flows through it).
std::optional<Binding> readTypedOutput(Reader& r, const YAML::Node& n, const YAML::Node& key) {
  const std::string name = key.Scalar();
  std::optional<YAML::Node> formula;
  std::optional<OutputType> type;
  bool bad = false;
  // In a flow mapping a comma ends the value: {value: dropout(x, p), ...} is the value
  // "dropout(x" and a key "p)". Said so, rather than the unknown key it makes.
  if (YAML::Node v = n["value"]; v && v.IsScalar()) {
    int depth = 0;
    for (char c : v.Scalar())
      depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (depth > 0) {
      r.error(v, "the formula of output '" + name + "' ends inside a call ('" + v.Scalar() +
                     "'): in a {value: ..., dtype: ...} mapping a comma ends the value; quote "
                     "the formula or write the mapping as a block, one key per line");
      return std::nullopt;
    }
  }
  for (auto& [field, fv] : r.entries(n, "output '" + name + "'")) {
    const std::string f = field.Scalar();
    if (f == "value") {
      if (!fv.IsScalar() || fv.Scalar().empty()) {
        r.error(fv, field, "'value' of output '" + name + "' must be a formula");
        bad = true;
      }
      formula = fv;
    } else if (f == "dtype") {
      const std::string t = fv.IsScalar() ? fv.Scalar() : "";
      for (OutputType c : kDeclarableOutputTypes)
        if (t == outputTypeName(c)) type = c;
      if (!type) {
        r.error(fv, field,
                "unknown dtype '" + t + "' for output '" + name + "'; expected " +
                    spelledTypes(kDeclarableOutputTypes, outputTypeName) +
                    " (an output in the op's dtype is written in the short form, '" + name +
                    ": <formula>')");
        bad = true;
      }
    } else {
      r.error(field, "unknown key '" + f + "' in output '" + name + "'; expected value, dtype");
      bad = true;
    }
  }
  if (bad) return std::nullopt;
  if (!formula || !type) {
    r.error(key, "output '" + name + "' needs " +
                     (!formula ? "a 'value' (its formula)"
                               : "a 'dtype' (" +
                                     spelledTypes(kDeclarableOutputTypes, outputTypeName) + ")"));
    return std::nullopt;
  }
  std::vector<SourceLoc> locs = r.charLocs(*formula);
  return Binding{name, formula->Scalar(), r.loc(key), locs.front(), locs, *type};
}

void readBindings(Reader& r, const YAML::Node& n, const YAML::Node& sectionKey,
                  const std::string& section, std::vector<Binding>& out) {
  if (!r.expectKind(n, sectionKey, YAML::NodeType::Map, "'" + section + "'")) return;
  for (auto& [key, value] : r.entries(n, "'" + section + "'")) {
    if (section == "outputs" && value.IsMap()) {
      if (std::optional<Binding> b = readTypedOutput(r, value, key)) out.push_back(*b);
      continue;
    }
    if (!value.IsScalar() || value.Scalar().empty()) {
      r.error(value, key, "'" + key.Scalar() + "' in '" + section + "' must be a formula");
      continue;
    }
    std::vector<SourceLoc> locs = r.charLocs(value);
    out.push_back(Binding{key.Scalar(), value.Scalar(), r.loc(key), locs.front(), locs});
  }
}

void readDtypes(Reader& r, const YAML::Node& n, const YAML::Node& section, OpSpec& spec) {
  if (!r.expectKind(n, section, YAML::NodeType::Sequence, "'dtypes'")) return;
  std::set<std::string> seen;
  for (const YAML::Node& d : n) {
    std::string name = d.IsScalar() ? d.Scalar() : "";
    std::optional<DType> dt;
    for (DType c : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64})
      if (name == dtypeName(c)) dt = c;
    if (!dt) {
      r.error(d,
              "unsupported dtype '" + name + "'; expected float32, float16, bfloat16 or float64");
      continue;
    }
    if (!seen.insert(name).second) {
      r.error(d, "dtype '" + name + "' is listed twice");
      continue;
    }
    spec.dtypes.push_back(*dt);
  }
  if (seen.empty() && !r.errorsSinceStart()) r.error(n, "'dtypes' must list at least one dtype");
}

void readReferences(Reader& r, const YAML::Node& n, const YAML::Node& section, OpSpec& spec) {
  if (!r.expectKind(n, section, YAML::NodeType::Map, "'reference'")) return;
  for (auto& [key, value] : r.entries(n, "'reference'")) {
    if (!value.IsScalar()) {
      r.error(value, key, "reference for '" + key.Scalar() + "' must be a PyTorch expression");
      continue;
    }
    if (hasControlChar(value.Scalar(), "\t")) {
      r.error(value,
              "reference for '" + key.Scalar() + "' must be one line, without control characters");
      continue;
    }
    spec.references.push_back(Reference{key.Scalar(), value.Scalar(), r.loc(key)});
  }
}

// `outputKeys`: every key of 'outputs', an output whose entry failed to read too (its
// reference is then not reported as one for no output).
void checkNames(Reader& r, OpSpec& spec, const std::set<std::string>& outputKeys) {
  std::map<std::string, SourceLoc> defined;
  auto define = [&](const std::string& name, const SourceLoc& loc, const char* what) {
    if (name.size() > kMaxNameLength) {
      r.diags().error(loc, tooLong(what, name));
      return;
    }
    if (!isIdentifier(name)) {
      r.diags().error(loc, std::string(what) + " name '" + name + "' is not an identifier");
      return;
    }
    if (isKeyword(name) || kReservedNames.count(name) || name[0] == '_') {
      r.diags().error(loc, std::string(what) + " name '" + name + "' is reserved");
      return;
    }
    auto [it, fresh] = defined.emplace(name, loc);
    if (!fresh) {
      r.diags().error(loc, "name '" + name + "' is already defined");
      r.diags().note(it->second, "previous definition is here");
    }
  };
  for (const Input& i : spec.inputs)
    define(i.name, i.loc, "input");
  for (const Attr& a : spec.attrs)
    define(a.name, a.loc, "attr");
  for (const Binding& b : spec.lets)
    define(b.name, b.loc, "let");
  for (const Binding& b : spec.outputs)
    define(b.name, b.loc, "output");
  for (const Reference& ref : spec.references)
    if (!outputKeys.count(ref.output))
      r.diags().error(ref.loc, "reference given for '" + ref.output + "', which is not an output");
}

} // namespace

bool checkYamlStructure(const std::string& path, const std::string& text, Diagnostics& diags) {
  if (size_t bad = firstNonUtf8(text); bad != std::string_view::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[bad]));
    diags.error(locOfOffset(path, text, bad),
                std::string("the file is not UTF-8 text (byte ") + byte + ")");
    return false;
  }
  std::istringstream in(text);
  DepthChecker checker;
  try {
    YAML::Parser parser(in);
    while (!checker.secondDocument && parser.HandleNextDocument(checker)) {
    }
  } catch (const DepthChecker::TooDeep& e) {
    diags.error(locOfMark(path, e.mark),
                "YAML nested more than " + std::to_string(kMaxYamlDepth) + " levels deep");
    return false;
  } catch (const YAML::Exception& e) {
    diags.error(locOfMark(path, e.mark), "invalid YAML: " + e.msg);
    return false;
  }
  if (checker.secondDocument) {
    diags.error(locOfMark(path, *checker.secondDocument),
                "a second YAML document; the file must hold only one");
    return false;
  }
  return true;
}

std::optional<OpSpec> loadSpecFromString(const std::string& path, const std::string& text,
                                         Diagnostics& diags) {
  diags.addFile(path, text);
  int errorsBefore = diags.errorCount();
  Reader r(path, text, diags);
  if (!checkYamlStructure(path, text, diags)) return std::nullopt;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) { // not expected: checkYamlStructure parsed the same text
    diags.error(r.loc(e.mark), "invalid YAML: " + e.msg);
    return std::nullopt;
  }
  if (!root.IsMap()) {
    diags.error(SourceLoc{path, 1, 1},
                "a spec must be a YAML mapping with 'op', 'inputs' and 'outputs'");
    return std::nullopt;
  }
  OpSpec spec;
  spec.path = path;
  bool haveOp = false, haveInputs = false, haveOutputs = false, haveDtypes = false;
  std::set<std::string> outputKeys; // (every key of 'outputs', read or not: checkNames)
  for (auto& [key, value] : r.entries(root, "the spec")) {
    const std::string k = key.Scalar();
    if (k == "op") {
      haveOp = true;
      spec.name = value.IsScalar() ? value.Scalar() : "";
      spec.nameLoc = r.loc(value.IsNull() ? key : value);
      if (spec.name.size() > kMaxNameLength)
        r.error(value, key, tooLong("op", spec.name));
      else if (!isIdentifier(spec.name) || spec.name.find("__") != std::string::npos)
        r.error(value, key,
                "op name '" + spec.name + "' must be an identifier (letters, digits, _)");
    } else if (k == "doc") {
      if (r.expectKind(value, key, YAML::NodeType::Scalar, "'doc'")) {
        spec.doc = value.Scalar();
        // It is quoted into Python and C++ sources, where a NUL or other control character
        // (an escape such as "\0" in a quoted YAML string) breaks them.
        if (hasControlChar(spec.doc, "\n\t"))
          r.error(value, "'doc' must not contain control characters other than newlines and "
                         "tabs");
      }
    } else if (k == "inputs") {
      haveInputs = true;
      readInputs(r, value, key, spec);
    } else if (k == "attrs") {
      readAttrs(r, value, key, spec);
    } else if (k == "let") {
      readBindings(r, value, key, "let", spec.lets);
    } else if (k == "outputs") {
      haveOutputs = true;
      readBindings(r, value, key, "outputs", spec.outputs);
      if (value.IsMap())
        for (const auto& entry : value)
          if (entry.first.IsScalar()) outputKeys.insert(entry.first.Scalar());
    } else if (k == "dtypes") {
      haveDtypes = true;
      readDtypes(r, value, key, spec);
    } else if (k == "functions") {
      if (r.expectKind(value, key, YAML::NodeType::Scalar, "'functions'")) {
        // The folder rules (relative, inside the spec's folder) are checked where the
        // header is read (driver/Pipeline.cpp); here, what makes a sane file name at all.
        const std::string& f = value.Scalar();
        if (f.empty())
          r.error(value, "'functions' must name a header file");
        else if (hasControlChar(f, "") || f.find_first_of("\"\\") != std::string::npos)
          r.error(value, "the functions header's path must not contain control characters, "
                         "quotes or backslashes");
        spec.functions = f;
        spec.functionsLoc = r.loc(value);
      }
    } else if (k == "reference") {
      readReferences(r, value, key, spec);
    } else {
      r.error(key, "unknown key '" + k +
                       "'; expected op, doc, inputs, attrs, let, outputs, dtypes, reference, "
                       "functions");
    }
  }
  SourceLoc top{path, 1, 1};
  if (!haveOp) diags.error(top, "missing required key 'op'");
  if (!haveInputs) diags.error(top, "missing required key 'inputs'");
  if (!haveOutputs)
    diags.error(top, "missing required key 'outputs'");
  else if (spec.outputs.empty() && diags.errorCount() == errorsBefore)
    diags.error(top, "'outputs' must define at least one output");
  if (!haveDtypes) spec.dtypes = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};
  checkNames(r, spec, outputKeys);
  if (diags.errorCount() != errorsBefore) return std::nullopt;
  return spec;
}

} // namespace fusegen::spec
