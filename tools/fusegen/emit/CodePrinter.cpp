// SSA printing of IR for C++ and Python.
#include "emit/CodePrinter.h"

#include "support/Format.h"

#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

namespace fusegen::emit {

namespace {

enum class Target { Cpp, Python };

class Printer {
public:
  explicit Printer(Target target) : target_(target) {}

  std::string run(const std::vector<Assignment>& assignments, int indent) {
    std::vector<ir::Expr> roots;
    for (const Assignment& a : assignments)
      if (a.value)
        roots.push_back(a.value);
    std::string pad(indent, ' ');
    std::ostringstream out;
    for (const ir::Node* n : ir::topoOrder(roots)) {
      if (n->kind() != ir::NodeKind::Call) {
        names_[n] = leaf(n);
        continue;
      }
      std::string name = "_t" + std::to_string(next_++);
      std::vector<std::string> operands;
      for (const ir::Expr& a : n->args())
        operands.push_back(names_.at(a.get()));
      if (target_ == Target::Cpp)
        out << pad << "const " << (n->type() == ir::ValueType::Bool ? "bool" : "T") << " " << name
            << " = " << cppCall(*n->prim(), operands) << ";\n";
      else
        out << pad << name << " = " << pythonCall(*n->prim(), operands) << "\n";
      names_[n] = name;
    }
    for (const Assignment& a : assignments) {
      std::string value = a.value ? names_.at(a.value.get())
                                  : (target_ == Target::Cpp ? "T(0)" : "0.0");
      out << pad << a.target << " = " << value << (target_ == Target::Cpp ? ";\n" : "\n");
    }
    return out.str();
  }

private:
  std::string leaf(const ir::Node* n) const {
    switch (n->kind()) {
    case ir::NodeKind::Const:
      return target_ == Target::Cpp ? cppLiteral(n->value()) : pythonLiteral(n->value());
    case ir::NodeKind::Input:
    case ir::NodeKind::Attr:
      return n->name();
    case ir::NodeKind::GradOut:
      return "_grad_" + n->name();
    case ir::NodeKind::Call:
      break;
    }
    throw std::logic_error("not a leaf");
  }

  // Prints the primitive's eval formula with its parameters replaced by operands.
  std::string cppAst(const expr::AstPtr& a, const prims::Primitive& p,
                     const std::vector<std::string>& operands) const {
    switch (a->kind) {
    case expr::Ast::Kind::Number:
      return cppLiteral(a->number);
    case expr::Ast::Kind::Name:
      return operands.at(p.paramIndex(a->name));
    case expr::Ast::Kind::Call: {
      std::vector<std::string> args;
      for (const expr::AstPtr& x : a->args)
        args.push_back(cppAst(x, p, operands));
      static const std::map<std::string, const char*> infix = {
          {"add", "+"}, {"sub", "-"}, {"mul", "*"},  {"div", "/"},  {"lt", "<"},
          {"le", "<="}, {"gt", ">"},  {"ge", ">="}, {"eq", "=="}, {"ne", "!="}};
      auto it = infix.find(a->name);
      if (it != infix.end())
        return "(" + args[0] + " " + it->second + " " + args[1] + ")";
      if (a->name == "neg")
        return "(-" + args[0] + ")";
      if (a->name == "select")
        return "(" + args[0] + " ? " + args[1] + " : " + args[2] + ")";
      std::string s = "fg::" + a->name + "(";
      for (size_t i = 0; i < args.size(); ++i)
        s += (i ? ", " : "") + args[i];
      return s + ")";
    }
    }
    return "";
  }

  std::string cppCall(const prims::Primitive& p, const std::vector<std::string>& operands) const {
    std::string s = cppAst(p.eval, p, operands);
    // Drop one redundant pair of outer parentheses: `a + b`, not `(a + b)`.
    if (s.size() > 2 && s.front() == '(' && s.back() == ')') {
      int depth = 0;
      bool outer = true;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
        if (depth == 0)
          outer = false;
      }
      if (outer)
        s = s.substr(1, s.size() - 2);
    }
    return s;
  }

  std::string pythonCall(const prims::Primitive& p,
                         const std::vector<std::string>& operands) const {
    std::string out;
    const std::string& t = p.torch;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '{') {
        size_t close = t.find('}', i);
        std::string param = t.substr(i + 1, close - i - 1);
        int idx = p.paramIndex(param);
        if (idx < 0)
          throw std::logic_error("torch spelling of '" + p.name + "' names unknown '" + param + "'");
        out += operands[idx];
        i = close;
      } else {
        out += t[i];
      }
    }
    return out;
  }

  Target target_;
  std::map<const ir::Node*, std::string> names_;
  int next_ = 0;
};

} // namespace

std::string cppLiteral(double v) { return "T(" + formatDouble(v) + ")"; }

std::string pythonLiteral(double v) {
  if (std::isinf(v))
    return v > 0 ? "float('inf')" : "float('-inf')";
  return formatDouble(v);
}

std::string printCpp(const std::vector<Assignment>& assignments, int indent) {
  return Printer(Target::Cpp).run(assignments, indent);
}

std::string printPython(const std::vector<Assignment>& assignments, int indent) {
  return Printer(Target::Python).run(assignments, indent);
}

} // namespace fusegen::emit
