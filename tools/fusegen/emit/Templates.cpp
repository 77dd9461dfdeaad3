// Mustache rendering with the error checks kainjow leaves to the caller.
#include "emit/Templates.h"

#include "support/FileWriter.h"

#include <stdexcept>

namespace fusegen::emit {

std::string Templates::read(const std::string& relPath) const {
  return readFile(dir_ + "/" + relPath);
}

std::string Templates::render(const std::string& relPath, const Data& data) const {
  kainjow::mustache::mustache tmpl{read(relPath)};
  if (!tmpl.is_valid())
    throw std::runtime_error("template " + relPath + ": " + tmpl.error_message());
  tmpl.set_custom_escape([](const std::string& s) { return s; });
  std::string out = tmpl.render(data);
  if (!tmpl.is_valid())
    throw std::runtime_error("template " + relPath + ": " + tmpl.error_message());
  return out;
}

Data list(const std::vector<Data>& items) {
  Data l{Data::type::list};
  for (const Data& d : items)
    l.push_back(d);
  return l;
}

} // namespace fusegen::emit
