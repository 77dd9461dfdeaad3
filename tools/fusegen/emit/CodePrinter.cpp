// SSA printing of IR for C++ and Python.
#include "emit/CodePrinter.h"

#include "emit/api/Spellings.h"
#include "ir/UniformBranches.h"
#include "support/Format.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_set>
#include <utility>

namespace fusegen::emit {

namespace {

enum class Target { Cpp, Python, Bounds };

// A formula over builtins as Python over testing.Rounding's bounded numbers: operators for
// the arithmetic and comparisons (the class defines them), _r.<builtin>(...) otherwise.
std::string boundsFormula(const expr::AstPtr& a,
                          const std::function<std::string(const std::string&)>& name) {
  switch (a->kind) {
  case expr::Ast::Kind::Number:
    return pythonLiteral(a->number);
  case expr::Ast::Kind::Name:
    return name(a->name);
  case expr::Ast::Kind::Call: {
    std::vector<std::string> args;
    for (const expr::AstPtr& x : a->args)
      args.push_back(boundsFormula(x, name));
    static const std::map<std::string, const char*> infix = {
        {"add", "+"}, {"sub", "-"}, {"mul", "*"}, {"div", "/"}, {"lt", "<"},
        {"le", "<="}, {"gt", ">"},  {"ge", ">="}, {"eq", "=="}, {"ne", "!="}};
    auto it = infix.find(a->name);
    if (it != infix.end()) return "(" + args[0] + " " + it->second + " " + args[1] + ")";
    if (a->name == "neg") return "(-" + args[0] + ")";
    std::string s = "_r." + a->name + "(";
    for (size_t i = 0; i < args.size(); ++i)
      s += (i ? ", " : "") + args[i];
    return s + ")";
  }
  }
  return "";
}

class Printer {
public:
  Printer(Target target, const Bindings& bindings, std::string prefix = "_t",
          UniformConditions* uniforms = nullptr, std::string like = "", std::string full = "")
      : target_(target), bindings_(bindings), prefix_(std::move(prefix)), uniforms_(uniforms),
        like_(std::move(like)), full_(std::move(full)) {}

  std::string run(const std::vector<Assignment>& assignments, int indent) {
    std::vector<ir::Expr> roots;
    for (const Assignment& a : assignments)
      if (a.value) roots.push_back(a.value);
    nodes_ = order(roots);
    if (target_ == Target::Cpp) planLazyBranches(roots);
    std::ostringstream out;
    emit(Level{}, indent, out);
    std::string pad(indent, ' ');
    for (const Assignment& a : assignments) {
      std::string value =
          a.value ? names_.at(a.value.get()) : (target_ == Target::Cpp ? "T(0)" : "0.0");
      if (a.value && isUniformCondition(*a.value)) value = uniform(a.value, value);
      out << pad << a.target << " = " << value << (target_ == Target::Cpp ? ";\n" : "\n");
    }
    return out.str();
  }

private:
  // Where a node is computed in the C++: at the top (where null), or inside branch `arg` (1 or
  // 2) of a lazy where (planLazyBranches).
  struct Level {
    const ir::Node* where = nullptr;
    int arg = 0;
    bool operator==(const Level& o) const { return where == o.where && arg == o.arg; }
  };

  bool opaque(const ir::Node* n) const { return target_ != Target::Python && bindings_.count(n); }

  bool isUniformCondition(const ir::Node& n) const {
    return uniforms_ && n.type() == ir::ValueType::Bool && n.isConstant() &&
           n.kind() != ir::NodeKind::Const;
  }
  // A uniform condition's value as the code reads it (UniformConditions).
  std::string uniform(const ir::Expr& condition, const std::string& value) const {
    if (!uniforms_) return value;
    return "fg::uniform<U>(" + std::to_string(uniforms_->indexOf(condition)) + ", " + value + ")";
  }

  // Lazy branches (C++ only): a where whose condition is the same for every element (attrs,
  // literals and D only, such as softcap > 0) computes the nodes only its taken branch uses
  // inside an if on the condition, so an option that is off costs nothing per element
  // (cross-entropy's softcap: a tanh and a division per element otherwise, the GPU's special
  // function units' whole budget). ir/UniformBranches.h finds those nodes.
  void planLazyBranches(const std::vector<ir::Expr>& roots) {
    std::unordered_set<const ir::Node*> external; // values the assignments read
    for (const ir::Expr& r : roots)
      external.insert(r.get());
    for (const auto& [n, owner] : ir::uniformBranchOwners(
             nodes_, external, [this](const ir::Node* x) { return opaque(x); })) {
      owner_[n] = Level{owner.where, owner.arg};
      lazy_.insert(owner.where);
    }
  }

  // Prints the nodes computed at `level`, in topological order.
  void emit(const Level& level, int indent, std::ostringstream& out) {
    const std::string pad(indent, ' ');
    for (const ir::Node* n : nodes_) {
      auto o = owner_.find(n);
      if (!((o == owner_.end() ? Level{} : o->second) == level)) continue;
      if (lazy_.count(n)) {
        const std::string name = prefix_ + std::to_string(next_++);
        out << pad << "T " << name << ";\n";
        out << pad << "if (" << uniform(n->args()[0], names_.at(n->args()[0].get())) << ") {\n";
        emit(Level{n, 1}, indent + 2, out);
        out << pad << "  " << name << " = " << names_.at(n->args()[1].get()) << ";\n";
        out << pad << "} else {\n";
        emit(Level{n, 2}, indent + 2, out);
        out << pad << "  " << name << " = " << names_.at(n->args()[2].get()) << ";\n";
        out << pad << "}\n";
        names_[n] = name;
        continue;
      }
      emitNode(n, pad, out);
    }
  }

  void emitNode(const ir::Node* n, const std::string& pad, std::ostringstream& out) {
    auto bound = bindings_.find(n);
    if (bound != bindings_.end() && target_ == Target::Bounds) {
      names_[n] = bound->second;
      return;
    }
    if (bound != bindings_.end() && target_ == Target::Cpp) {
      if (n->isLeaf() && !implicitLeaf(n)) {
        names_[n] = leaf(n);
        out << pad << "const T " << names_[n] << " = " << bound->second << ";\n";
      } else {
        names_[n] = bound->second;
      }
      return;
    }
    if (n->kind() != ir::NodeKind::Call) {
      if (target_ == Target::Cpp && !implicitLeaf(n))
        throw std::logic_error("unbound leaf '" + n->name() + "' in generated C++");
      names_[n] = leaf(n);
      if (n->kind() == ir::NodeKind::Const || n->kind() == ir::NodeKind::Attr ||
          n->kind() == ir::NodeKind::Dim || n->kind() == ir::NodeKind::Rows)
        pyScalars_.insert(n);
      return;
    }
    std::string name = prefix_ + std::to_string(next_++);
    std::vector<std::string> operands;
    for (const ir::Expr& a : n->args())
      operands.push_back(names_.at(a.get()));
    // A where on a condition of numbers alone (D == 0, a test of an attr): the branch taken,
    // by Python's own test, which torch.compile guards on (torch.as_tensor of D == 0 fails
    // there: D is symbolic).
    const bool uniformWhere =
        target_ == Target::Python && n->isCall("where") && pyScalars_.count(n->args()[0].get());
    if (uniformWhere) {
      out << pad << name << " = _support.where_uniform(" << operands[0] << ", " << operands[1]
          << ", " << operands[2] << ")\n";
      if (pyScalars_.count(n->args()[1].get()) && pyScalars_.count(n->args()[2].get()))
        pyScalars_.insert(n);
      names_[n] = name;
      return;
    }
    if (target_ == Target::Python) pythonScalarOperands(*n, operands);
    // A reduction over rows (sum_all, colsum) is over every row of the op, also of a value
    // that lacks some of its dims (a mask of lengths [S] against x [..., S, D]: a tensor of S
    // rows, torch's sum of which would count each once, not once per batch and head).
    const prims::PrimKind kind = n->prim()->kind;
    if (target_ != Target::Cpp &&
        (kind == prims::PrimKind::Total || kind == prims::PrimKind::Column)) {
      const bool perRow = n->args()[0]->shape() == ir::ShapeClass::Row;
      if (target_ == Target::Python)
        operands[0] = "_support.over_rows(" + operands[0] + ", " + full_ +
                      (perRow ? ", per_row=True" : "") + ")";
      else if (perRow)
        operands[0] += ", per_row=True";
    }
    // A roll's shift computed from attrs (where(reverse, -1, 1)) is a bounded value in the
    // bounds: the move takes its number, exact.
    if (target_ == Target::Bounds && kind == prims::PrimKind::Move)
      for (size_t i = 1; i < operands.size(); ++i)
        if (n->args()[i]->kind() != ir::NodeKind::Const)
          operands[i] = "_r.number(" + operands[i] + ")";
    if (target_ == Target::Cpp)
      out << pad << "const " << (n->type() == ir::ValueType::Bool ? "bool" : "T") << " " << name
          << " = " << cppCall(*n->prim(), operands) << ";\n";
    else if (target_ == Target::Python)
      out << pad << name << " = " << torchSpelling(*n->prim(), operands) << "\n";
    else
      out << pad << name << " = " << boundsCall(*n->prim(), operands) << "\n";
    names_[n] = name;
  }

private:
  // Topological order that does not descend into bound nodes.
  std::vector<const ir::Node*> order(const std::vector<ir::Expr>& roots) const {
    std::vector<const ir::Node*> out;
    std::map<const ir::Node*, bool> seen;
    std::vector<std::pair<const ir::Node*, size_t>> stack;
    for (const ir::Expr& r : roots) {
      if (seen[r.get()]) continue;
      seen[r.get()] = true;
      stack.emplace_back(r.get(), 0);
      while (!stack.empty()) {
        auto& [node, next] = stack.back();
        if (!opaque(node) && next < node->args().size()) {
          const ir::Node* child = node->args()[next++].get();
          if (!seen[child]) {
            seen[child] = true;
            stack.emplace_back(child, 0);
          }
          continue;
        }
        out.push_back(node);
        stack.pop_back();
      }
    }
    return out;
  }

  // Leaves every generated function has in scope: literals, D (_D), j (_j) and the number of
  // rows (the attr slot the glue fills with it: fusegen_program.h kRowsAttr).
  static bool implicitLeaf(const ir::Node* n) {
    return n->kind() == ir::NodeKind::Const || n->kind() == ir::NodeKind::Dim ||
           n->kind() == ir::NodeKind::Column || n->kind() == ir::NodeKind::Rows;
  }

  std::string leaf(const ir::Node* n) const {
    switch (n->kind()) {
    case ir::NodeKind::Const:
      return target_ == Target::Cpp ? cppLiteral(n->value()) : pythonLiteral(n->value());
    case ir::NodeKind::Input:
      return target_ == Target::Cpp ? cppInputName(n->name()) : n->name();
    case ir::NodeKind::Attr:
      return target_ == Target::Cpp ? cppAttrName(n->name()) : n->name();
    case ir::NodeKind::GradOut:
      return "_grad_" + n->name();
    case ir::NodeKind::Dim:
      return "_D";
    case ir::NodeKind::Rows:
      return target_ == Target::Cpp ? "_attr[kRowsAttr]" : "_R";
    case ir::NodeKind::Column:
      return "_j";
    case ir::NodeKind::Random:
      return n->name(); // _u<stream>: the Python bodies draw them first; C++ binds them
    case ir::NodeKind::Position:
      return "_pos_" + n->name(); // the Python bodies define them first; C++ binds them
    case ir::NodeKind::Call:
      break;
    }
    throw std::logic_error("not a leaf");
  }

  std::string cppCall(const prims::Primitive& p, const std::vector<std::string>& operands) const {
    // A moved j (the moved inputs are bound): the column the move reads. (A rolled j is bound
    // too: it reads the call's shift from its slot, emit/Emitters.cpp.)
    if (p.kind == prims::PrimKind::Move && p.move == prims::Move::Roll)
      throw std::logic_error("a rolled value left unbound in generated C++");
    if (p.kind == prims::PrimKind::Move)
      return std::string("fg::movedColumn(") + api::moveEnumerator(p.move) + ", " + operands[0] +
             ", _D)";
    if (!p.eval)
      throw std::logic_error("'" + p.name + "' has no eval formula (an unbound reduction?)");
    std::string s = cppFormula(
        p.eval, [&](const std::string& name) { return operands.at(p.paramIndex(name)); });
    // Drop one redundant pair of outer parentheses: `a + b`, not `(a + b)`.
    if (s.size() > 2 && s.front() == '(' && s.back() == ')') {
      int depth = 0;
      bool outer = true;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
        if (depth == 0) outer = false;
      }
      if (outer) s = s.substr(1, s.size() - 2);
    }
    return s;
  }

  static std::string boundsCall(const prims::Primitive& p,
                                const std::vector<std::string>& operands) {
    if (p.kind == prims::PrimKind::Move || p.kind == prims::PrimKind::View) // (exact)
    {
      std::vector<std::string> moved = operands; // (the value as _m; a chunk's c and n stay)
      moved[0] = "_m";
      return "_r.move(lambda _m: " + torchSpelling(p, moved) + ", " + operands[0] + ")";
    }
    if (p.kind == prims::PrimKind::Total) // (over every row: testing.Rounding's sum_all, ...)
      return std::string("_r.") + prims::combineName(p.combine) + "_all(" + operands[0] + ")";
    if (p.kind == prims::PrimKind::Column) // (over every row, per column: testing.Rounding's)
      return "_r.col" + std::string(prims::combineName(p.combine)) + "(" + operands[0] + ")";
    if (p.kind == prims::PrimKind::Reduction) {
      const std::string acc =
          std::string("_r.") + prims::combineName(p.combine) + "(" + operands[0] + ")";
      if (!p.finish) return acc;
      return boundsFormula(p.finish, [&](const std::string& n) { return n == "acc" ? acc : "_D"; });
    }
    if (!p.eval) throw std::logic_error("'" + p.name + "' has no eval formula");
    return boundsFormula(p.eval,
                         [&](const std::string& n) { return operands.at(p.paramIndex(n)); });
  }

  // In Python, constants, attrs and D are numbers, and a formula over them alone stays a
  // number where its spelling is operators (D == 0 is a bool). torch's functions take tensors
  // (torch.pow(0.01, -1) and torch.where(False, t, 0.0) raise): their number operands become
  // 0-dim tensors where all operands are numbers, and a number condition always; 0-dim
  // float64 CPU tensors mix with tensors of any dtype and device as numbers do. Where the
  // values are all numbers but a condition or a random draw is a tensor (where(c, 0.1, 0.3),
  // dropout(1, p)), the result is a tensor of torch's default dtype, float32, which would round
  // 0.1 in a float64 reference: the values become 0-dim tensors of the op's dtype and device
  // (like_'s: its float input of the op's dtype, KernelPlan::dtypeInput).
  void pythonScalarOperands(const ir::Node& n, std::vector<std::string>& operands) {
    const prims::Primitive& p = *n.prim();
    const bool torchFunction = p.torch.find("torch.") != std::string::npos;
    bool allScalar = true, valuesScalar = true;
    for (size_t i = 0; i < n.args().size(); ++i) {
      const bool scalar = pyScalars_.count(n.args()[i].get()) > 0;
      allScalar = allScalar && scalar;
      if (i < p.params.size() && p.params[i].kind == prims::ParamKind::Value)
        valuesScalar = valuesScalar && scalar;
    }
    if (allScalar && !torchFunction) {
      pyScalars_.insert(&n);
      return;
    }
    const bool ofOpDtype = torchFunction && !allScalar && valuesScalar && !like_.empty();
    for (size_t i = 0; i < n.args().size(); ++i) {
      const ir::Node* a = n.args()[i].get();
      if (!pyScalars_.count(a) || !torchFunction) continue;
      if (a->type() == ir::ValueType::Bool)
        operands[i] = "torch.as_tensor(" + operands[i] + ")";
      else if (allScalar)
        operands[i] = "torch.as_tensor(" + operands[i] + ", dtype=torch.float64)";
      else if (ofOpDtype && p.params[i].kind == prims::ParamKind::Value)
        operands[i] = like_ + ".new_tensor(" + operands[i] + ")";
    }
    // An integer tensor (j, pos(S), an int input) where a floating value is computed from
    // it: the kernels convert it to the compute type; torch would make `pos / base` or
    // `exp(j)` a tensor of its default dtype (float32), also in a float64 reference.
    if (n.type() != ir::ValueType::Value || like_.empty()) return;
    for (size_t i = 0; i < n.args().size() && i < p.params.size(); ++i) {
      const ir::Node* a = n.args()[i].get();
      if (a->type() == ir::ValueType::Int && !pyScalars_.count(a) &&
          p.params[i].kind == prims::ParamKind::Value)
        operands[i] = operands[i] + ".to(torch.promote_types(" + like_ + ".dtype, torch.float32))";
    }
  }

  static std::string torchSpelling(const prims::Primitive& p,
                                   const std::vector<std::string>& operands) {
    std::string out;
    const std::string& t = p.torch;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '{') {
        size_t close = t.find('}', i);
        std::string param = t.substr(i + 1, close - i - 1);
        int idx = p.paramIndex(param);
        if (idx < 0)
          throw std::logic_error("torch spelling of '" + p.name + "' names unknown '" + param +
                                 "'");
        out += operands[idx];
        i = close;
      } else {
        out += t[i];
      }
    }
    return out;
  }

  Target target_;
  const Bindings& bindings_;
  std::vector<const ir::Node*> nodes_;     // what run() prints, in topological order
  std::map<const ir::Node*, Level> owner_; // C++: nodes computed inside a lazy branch
  std::set<const ir::Node*> lazy_;         // C++: wheres printed as an if
  std::string prefix_;
  UniformConditions* uniforms_;
  std::string like_; // Python: a float tensor of the op's dtype and device (or none)
  std::string full_; // Python: the op's full input (the shape reductions over rows are over)
  std::map<const ir::Node*, std::string> names_;
  std::set<const ir::Node*> pyScalars_; // Python numbers in the Python target
  int next_ = 0;
};

} // namespace

std::string cppInputName(const std::string& name) {
  return "_in_" + name;
}

std::string cppAttrName(const std::string& name) {
  return "_attr_" + name;
}

std::string cppFormula(const expr::AstPtr& a,
                       const std::function<std::string(const std::string&)>& name) {
  switch (a->kind) {
  case expr::Ast::Kind::Number:
    return cppLiteral(a->number);
  case expr::Ast::Kind::Name:
    return name(a->name);
  case expr::Ast::Kind::Call: {
    std::vector<std::string> args;
    for (const expr::AstPtr& x : a->args)
      args.push_back(cppFormula(x, name));
    static const std::map<std::string, const char*> infix = {
        {"add", "+"}, {"sub", "-"}, {"mul", "*"}, {"lt", "<"}, {"le", "<="},
        {"gt", ">"},  {"ge", ">="}, {"eq", "=="}, {"ne", "!="}};
    auto it = infix.find(a->name);
    if (it != infix.end()) return "(" + args[0] + " " + it->second + " " + args[1] + ")";
    if (a->name == "neg") return "(-" + args[0] + ")";
    if (a->name == "select") return "(" + args[0] + " ? " + args[1] + " : " + args[2] + ")";
    std::string s = "fg::" + a->name + "<kFast>(";
    for (size_t i = 0; i < args.size(); ++i)
      s += (i ? ", " : "") + args[i];
    return s + ")";
  }
  }
  return "";
}

std::string cppReductionResult(const prims::Primitive& p, const std::string& acc) {
  if (!p.finish) return acc;
  return cppFormula(p.finish, [&](const std::string& n) { return n == "acc" ? acc : "_D"; });
}

std::string cppLiteral(double v) {
  if (std::isinf(v)) return v > 0 ? "T(INFINITY)" : "(-T(INFINITY))";
  return "T(" + formatDouble(v) + ")";
}

std::string pythonLiteral(double v) {
  if (std::isinf(v)) return v > 0 ? "float('inf')" : "float('-inf')";
  return formatDouble(v);
}

int UniformConditions::indexOf(const ir::Expr& condition) {
  for (size_t i = 0; i < conditions_.size(); ++i)
    if (ir::sameValue(conditions_[i].get(), condition.get())) return static_cast<int>(i);
  conditions_.push_back(condition);
  return static_cast<int>(conditions_.size() - 1);
}

std::string printCpp(const std::vector<Assignment>& assignments, int indent,
                     const Bindings& bindings, UniformConditions* uniforms) {
  return Printer(Target::Cpp, bindings, "_t", uniforms).run(assignments, indent);
}

std::string printPython(const std::vector<Assignment>& assignments, int indent,
                        const std::string& like, const std::string& full) {
  static const Bindings none;
  return Printer(Target::Python, none, "_t", nullptr, like, full).run(assignments, indent);
}

std::string printPythonBounds(const std::vector<Assignment>& assignments, int indent,
                              const Bindings& bound, const std::string& prefix) {
  return Printer(Target::Bounds, bound, prefix).run(assignments, indent);
}

} // namespace fusegen::emit
