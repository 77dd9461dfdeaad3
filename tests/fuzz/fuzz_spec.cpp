// libFuzzer target: the input bytes are the YAML text of a spec, run through every stage
// before files are written (spec loading, formula parsing, semantic analysis,
// differentiation, planning, emission of the op's files) by driver::generateOne.
// Diagnostics go to a discarded stream.
//
// Emission ends by formatting each C++ file with Clang's Format library, which takes ~90% of
// the time of a spec that gets that far (about 0.8 s a spec under ASan: 12 exec/s). By
// default the target therefore renders from a copy of templates/ whose
// clang-format-style.yaml says `DisableFormat: true`: every emitter and template still
// runs, formatCpp returns its input. FUSEGEN_FUZZ_FORMAT=1 keeps the real style.
//
// Besides crashes, hangs and sanitizer reports, it aborts on broken contracts of the
// pipeline:
//   * a spec yields files exactly when no error was reported (a failure without a
//     diagnostic would tell the user "0 error(s); nothing was written");
//   * every generated path is relative and stays inside the output directory;
//   * a second run of the same spec generates the same files (nothing depends on the
//     addresses of IR nodes, which differ between the runs).
// Run it through scripts/fuzz.sh (long runs) or scripts/test.sh (a short seeded run).
#include "driver/Pipeline.h"
#include "emit/Templates.h"
#include "prims/PrimitiveLibrary.h"
#include "support/Diagnostics.h"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>

#include <signal.h>
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

// A snapshot of templates/, removed at exit: files edited while the fuzzer runs must not
// change its output (the determinism check below would fire). Its clang-format style is
// `DisableFormat: true` unless FUSEGEN_FUZZ_FORMAT=1.
std::string templatesDir() {
  namespace fs = std::filesystem;
  static const fs::path copy =
      fs::temp_directory_path() / ("fusegen-fuzz-templates-" + std::to_string(getpid()));
  // Snapshots of runs that ended without exit handlers (a crash, an OOM, a kill).
  const std::string prefix = "fusegen-fuzz-templates-";
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH)
      fs::remove_all(e.path(), ec);
  }
  fs::remove_all(copy);
  fs::copy(FUSEGEN_TEMPLATE_DIR, copy, fs::copy_options::recursive);
  const char* format = std::getenv("FUSEGEN_FUZZ_FORMAT");
  if (!format || std::string(format) != "1")
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

// Where two texts first differ, as "line N: <first> / <second>".
std::string firstDifference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ga = static_cast<bool>(std::getline(sa, la));
    const bool gb = static_cast<bool>(std::getline(sb, lb));
    if (!ga && !gb) return "";
    if (ga != gb || la != lb)
      return "\n  line " + std::to_string(line) + ":\n  first:  " + (ga ? la : "<end>") +
             "\n  second: " + (gb ? lb : "<end>");
  }
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
  if (!files) return 0;
  for (const GeneratedFile& f : *files) {
    std::filesystem::path p = std::filesystem::path(f.path).lexically_normal();
    if (f.path.empty() || p.is_absolute() || p.empty() || *p.begin() == "..")
      broken("generated path outside the output directory: ", f.path);
  }
  // The same spec generates the same files: nothing may depend on where nodes were allocated
  // (the second run's nodes live at other addresses), or golden files would flicker.
  Diagnostics again(discard);
  std::optional<std::vector<GeneratedFile>> second =
      driver::generateOne(kSpecPath, text, e.lib, e.templates, again);
  if (!second || second->size() != files->size()) broken("a second run differs", "");
  for (size_t i = 0; i < files->size(); ++i)
    if ((*files)[i].path != (*second)[i].path || (*files)[i].text != (*second)[i].text)
      broken("a second run generates another ",
             (*files)[i].path + firstDifference((*files)[i].text, (*second)[i].text));
  return 0;
}
