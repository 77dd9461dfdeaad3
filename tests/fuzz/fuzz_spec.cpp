// libFuzzer target: the input bytes are the YAML text of a spec, run through every stage
// before files are written (spec loading, formula parsing, semantic analysis,
// differentiation, planning, emission of the op's files) by driver::generateOne.
// Diagnostics go to a discarded stream.
//
// Emission ends by formatting each C++ file with Clang's Format library, which takes ~90% of
// the time of a spec that gets that far (about 0.8 s a spec under ASan: 12 exec/s). By
// default the target therefore renders from a copy of templates/ whose
// clang-format-style.yaml says `DisableFormat: true`: every emitter and template still
// runs, formatCpp returns its input. FUSEGEN_FUZZ_FORMAT=1 uses templates/ as it is.
//
// Besides crashes, hangs and sanitizer reports, it
// aborts on two broken contracts of the pipeline:
//   * a spec yields files exactly when no error was reported (a failure without a
//     diagnostic would tell the user "0 error(s); nothing was written");
//   * every generated path is relative and stays inside the output directory.
// Run it through scripts/fuzz.sh (long runs) or scripts/test.sh (a short seeded run).
#include "driver/Pipeline.h"
#include "emit/Templates.h"
#include "prims/PrimitiveLibrary.h"
#include "support/Diagnostics.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <ostream>
#include <string>

#include <unistd.h>

#ifndef FUSEGEN_TEMPLATE_DIR
#define FUSEGEN_TEMPLATE_DIR "templates"
#endif

namespace {

using namespace fusegen;

// A spec path in a folder that does not exist: a `functions:` header next to it cannot be
// read, so that stage fails at once instead of running Clang on some file.
constexpr const char* kSpecPath = "/nonexistent-fusegen-fuzz/spec.yaml";

struct Env {
  prims::PrimitiveLibrary lib;
  emit::Templates templates;
};

// A copy of templates/ that does not format, removed at exit; the original when
// FUSEGEN_FUZZ_FORMAT=1.
std::string templatesDir() {
  const char* format = std::getenv("FUSEGEN_FUZZ_FORMAT");
  if (format && std::string(format) == "1") return FUSEGEN_TEMPLATE_DIR;
  namespace fs = std::filesystem;
  static const fs::path copy =
      fs::temp_directory_path() / ("fusegen-fuzz-templates-" + std::to_string(getpid()));
  fs::remove_all(copy);
  fs::copy(FUSEGEN_TEMPLATE_DIR, copy, fs::copy_options::recursive);
  std::ofstream(copy / "clang-format-style.yaml", std::ios::trunc) << "DisableFormat: true\n";
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(copy, ec);
  });
  return copy.string();
}

const Env& env() {
  static const Env e = [] {
    Diagnostics diags(std::cerr);
    std::optional<prims::PrimitiveLibrary> lib = prims::PrimitiveLibrary::load(
        std::string(FUSEGEN_TEMPLATE_DIR) + "/primitives.yaml", diags);
    if (!lib) {
      std::fprintf(stderr, "fuzz_spec: cannot load %s/primitives.yaml\n", FUSEGEN_TEMPLATE_DIR);
      std::abort();
    }
    return Env{std::move(*lib), emit::Templates(templatesDir())};
  }();
  return e;
}

[[noreturn]] void broken(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_spec: %s%s\n", what, detail.c_str());
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  env();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Env& e = env();
  std::string text(reinterpret_cast<const char*>(data), size);
  std::ostream discard(nullptr); // badbit: every write is dropped
  Diagnostics diags(discard);
  std::optional<std::vector<GeneratedFile>> files =
      driver::generateOne(kSpecPath, text, e.lib, e.templates, diags);
  if (!files && diags.errorCount() == 0) broken("no files and no error reported", "");
  if (files && diags.errorCount() != 0)
    broken("files generated despite errors: ", std::to_string(diags.errorCount()));
  if (files) {
    for (const GeneratedFile& f : *files) {
      std::filesystem::path p = std::filesystem::path(f.path).lexically_normal();
      if (f.path.empty() || p.is_absolute() || p.empty() || *p.begin() == "..")
        broken("generated path outside the output directory: ", f.path);
    }
  }
  return 0;
}
