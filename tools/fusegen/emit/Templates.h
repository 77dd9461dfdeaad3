// Templates: loads Mustache templates from the templates directory and renders them with
// data the emitters prepared (kainjow::mustache, with HTML escaping turned off: the output
// is code). A template that fails to parse or render is an internal error.
#pragma once

#include <kainjow/mustache.hpp>

#include <string>

namespace fusegen::emit {

using Data = kainjow::mustache::data;

class Templates {
public:
  explicit Templates(std::string dir) : dir_(std::move(dir)) {}

  // Renders `relPath` (relative to the templates directory).
  std::string render(const std::string& relPath, const Data& data) const;
  // Reads a file verbatim (runtime headers and static Python modules).
  std::string read(const std::string& relPath) const;
  const std::string& dir() const { return dir_; }

private:
  std::string dir_;
};

// A Mustache list from items.
Data list(const std::vector<Data>& items);

} // namespace fusegen::emit
