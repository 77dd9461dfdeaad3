// clang::format over a whole generated file.
#include "emit/CodeFormatter.h"

#include <clang/Format/Format.h>
#include <clang/Tooling/Core/Replacement.h>

#include <stdexcept>

namespace fusegen::emit {

std::string formatCpp(const std::string& code, const std::string& fileName,
                      const std::string& styleText) {
  clang::format::FormatStyle style = clang::format::getLLVMStyle();
  style.Language = clang::format::FormatStyle::LK_Cpp;
  if (std::error_code ec = clang::format::parseConfiguration(styleText, &style))
    throw std::runtime_error("templates/clang-format-style.yaml: " + ec.message());
  std::vector<clang::tooling::Range> all{clang::tooling::Range(0, code.size())};
  clang::tooling::Replacements changes = clang::format::reformat(style, code, all, fileName);
  llvm::Expected<std::string> formatted = clang::tooling::applyAllReplacements(code, changes);
  if (!formatted)
    throw std::runtime_error("formatting " + fileName + ": " +
                             llvm::toString(formatted.takeError()));
  return *formatted;
}

} // namespace fusegen::emit
