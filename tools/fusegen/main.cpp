// fusegen: the command line. Generates PyTorch extension sources from YAML specs, builds and
// installs them, checks the committed golden output, and dumps intermediate stages.
// Exit code: 0 on success, 1 when errors were reported.
#include "driver/Pipeline.h"
#include "packaging/Builder.h"
#include "support/Diagnostics.h"
#include "support/FileWriter.h"
#include "support/PackageLayout.h"
#include "support/Version.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <tuple>

namespace fs = std::filesystem;
using namespace fusegen;

#ifndef FUSEGEN_TEMPLATE_DIR
#define FUSEGEN_TEMPLATE_DIR "templates"
#endif

namespace {

// $FUSEGEN_TEMPLATES, else the templates beside the executable (<dir>/../templates: the wheel
// puts fusegen in fusegen/bin/ and the templates in fusegen/templates/), else the source
// tree's, where this fusegen was built.
std::string defaultTemplates() {
  if (const char* env = std::getenv("FUSEGEN_TEMPLATES")) return env;
  std::error_code ec;
  const fs::path beside = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() /
                          "templates" / "primitives.yaml";
  if (!ec && fs::exists(beside, ec)) return beside.parent_path().string();
  return FUSEGEN_TEMPLATE_DIR;
}

void printReport(const WriteReport& report, const std::string& root) {
  for (const std::string& f : report.written)
    std::cout << "wrote " << (fs::path(root) / f).string() << "\n";
  for (const std::string& f : report.removed)
    std::cout << "removed stale " << (fs::path(root) / f).string() << "\n";
  std::cout << report.written.size() << " file(s) written, " << report.unchanged.size()
            << " unchanged\n";
}

// Specs and the files they generate, compared with (or written over) the golden directory.
int golden(const driver::Options& base, const std::string& specsDir, bool update) {
  Diagnostics diags(std::cerr);
  std::vector<std::string> specs;
  for (const auto& e : fs::directory_iterator(specsDir))
    if (e.path().extension() == ".yaml")
      specs.push_back((fs::path(specsDir) / e.path().filename()).string());
  std::sort(specs.begin(), specs.end());
  auto lib = driver::loadLibrary(base, diags);
  if (!lib) return 1;
  driver::Options opts = base;
  opts.outputDir = ""; // the package files list exactly the shipped specs' ops
  auto files = driver::generate(specs, *lib, opts, diags);
  if (!files) return 1;
  if (update) {
    std::vector<std::string> owned = {"runtime", driver::packageNames(opts).package};
    for (const std::string& op : packageOps(base.outputDir))
      owned.push_back(op);
    for (const GeneratedFile& f : *files)
      owned.push_back(fs::path(f.path).parent_path().string());
    printReport(writeFiles(base.outputDir, *files, owned), base.outputDir);
    return 0;
  }
  int mismatches = 0;
  std::set<std::string> expected;
  for (const GeneratedFile& f : *files) {
    expected.insert(f.path);
    fs::path committed = fs::path(base.outputDir) / f.path;
    std::string text;
    try {
      text = readFile(committed.string());
    } catch (const std::exception&) {
      std::cerr << "golden: missing " << committed.string() << "\n";
      ++mismatches;
      continue;
    }
    if (text == f.text) continue;
    ++mismatches;
    // Point at the first differing line.
    size_t line = 1, i = 0;
    while (i < text.size() && i < f.text.size() && text[i] == f.text[i])
      line += text[i++] == '\n';
    std::cerr << "golden: " << committed.string() << ":" << line
              << ": differs from what fusegen generates now\n";
  }
  for (const std::string& op : packageOps(base.outputDir))
    if (!expected.count(op + "/" + op + "_ops.cpp")) {
      std::cerr << "golden: " << base.outputDir << "/" << op << " has no spec in " << specsDir
                << "\n";
      ++mismatches;
    }
  if (mismatches) {
    std::cerr << "golden: " << mismatches
              << " file(s) differ; run `fusegen golden --update` and commit the result\n";
    return 1;
  }
  std::cout << "golden: " << files->size() << " files for " << specs.size() << " specs match "
            << base.outputDir << "\n";
  return 0;
}

// fusegen check: every stage on each spec, the files rendered and thrown away.
int check(const driver::Options& opts, const std::vector<std::string>& specs) {
  Diagnostics diags(std::cerr);
  auto lib = driver::loadLibrary(opts, diags);
  if (!lib) {
    std::cerr << diags.errorCount() << " error(s) in the primitive library\n";
    return 1;
  }
  driver::Options none = opts;
  none.outputDir = ""; // (the package files list the checked ops only)
  if (!driver::generate(specs, *lib, none, diags)) {
    std::cerr << diags.errorCount() << " error(s); nothing was written\n";
    return 1;
  }
  std::cout << "check: " << specs.size() << " spec(s) without errors\n";
  return 0;
}

// fusegen new NAME: a commented starter spec, checked, written where no file is.
int newSpec(const driver::Options& opts, const std::string& name, const std::string& path) {
  Diagnostics diags(std::cerr);
  if (fs::exists(path)) {
    std::cerr << "fusegen: error: " << path << " exists; give another --file or remove it\n";
    return 1;
  }
  auto lib = driver::loadLibrary(opts, diags);
  if (!lib) return 1;
  std::optional<std::string> text = driver::starterSpec(name, path, *lib, opts, diags);
  if (!text) {
    std::cerr << diags.errorCount() << " error(s) in the starter spec for '" << name
              << "'; nothing was written\n";
    return 1;
  }
  const fs::path target(path);
  writeFiles(target.has_parent_path() ? target.parent_path().string() : ".",
             {{target.filename().string(), *text}}, {});
  std::cout << "wrote " << path << "; next: fusegen check " << path << "\n";
  return 0;
}

} // namespace

int run(CLI::App& app, driver::Options& opts, packaging::BuildOptions& buildOpts,
        const std::vector<std::string>& specs, bool doBuild, CLI::App* goldenCmd,
        const std::string& specsDir, bool update, CLI::App* dumpCmd, const std::string& stage,
        const std::string& dumpSpec, CLI::App* primsCmd);

int main(int argc, char** argv) {
  CLI::App app{"fusegen: generate fused PyTorch ops (CUDA + CPU kernels, autograd, fake "
               "impl, tests, build files) from YAML specs.\n\n"
               "  fusegen specs/bias_gelu.yaml       write generated/bias_gelu/\n"
               "  fusegen --build --install           build generated/ and install its package\n"
               "  fusegen new my_op                   write a commented starter spec\n"
               "  fusegen check my_op.yaml            report a spec's errors, write nothing\n"};
  app.set_version_flag("--version", std::string("fusegen ") + kVersion);
  app.fallthrough(); // -o, --templates also after a subcommand: fusegen golden -o DIR
  driver::Options opts;
  opts.templatesDir = defaultTemplates();
  packaging::BuildOptions buildOpts;
  std::vector<std::string> specs;
  bool doBuild = false;
  app.add_option("specs", specs, "Spec files to generate (YAML)")->check(CLI::ExistingFile);
  app.add_option("-o,--output", opts.outputDir, "Directory of the generated package")
      ->capture_default_str();
  app.add_option("--package", opts.package,
                 "The Python package to generate (default: the one recorded in --output, else "
                 "fusegen_ops)");
  app.add_option("--namespace", opts.ns,
                 "The op namespace: ops are torch.ops.NS.<op> (default: the one recorded in "
                 "--output, else fusegen)");
  app.add_option("--templates", opts.templatesDir,
                 "Directory of templates and primitives.yaml (env FUSEGEN_TEMPLATES)")
      ->capture_default_str();
  app.add_flag("--build", doBuild,
               "Build the package in --output (after generating, if specs are given)");
  app.add_flag("--install", buildOpts.install,
               "Install the built package into the active Python (implies --build)");
  app.add_option("--python", buildOpts.python, "Python interpreter whose torch builds the ops")
      ->capture_default_str();
  app.add_option("--arch", buildOpts.arch,
                 "CUDA architectures, as TORCH_CUDA_ARCH_LIST (e.g. \"9.0\"); default: the GPU "
                 "present, else 9.0");
  app.add_flag("--cpu-only", buildOpts.cpuOnly, "Build without CUDA kernels");
  app.add_flag("--wheel", buildOpts.wheel,
               "Write a wheel of the package to <output>/dist (implies --build); with --arch "
               "all for every GPU architecture torch supports");
  app.add_option("-j,--jobs", buildOpts.jobs, "Parallel compile jobs (default: all cores)");

  CLI::App* goldenCmd = app.add_subcommand(
      "golden", "Regenerate every spec in --specs and compare with the committed --output");
  std::string specsDir = "specs";
  bool update = false;
  goldenCmd->add_option("--specs", specsDir, "Directory of the shipped specs")
      ->capture_default_str();
  goldenCmd->add_flag("--update", update, "Rewrite the golden files instead of comparing");

  CLI::App* dumpCmd = app.add_subcommand("dump", "Print one stage's result for a spec");
  std::string stage, dumpSpec;
  dumpCmd
      ->add_option("stage", stage,
                   "ir (the forward DAG), grad (the derived backward), grad2 (the backward's "
                   "backward) or plan")
      ->required()
      ->check(CLI::IsMember({"ir", "grad", "grad2", "plan"}));
  dumpCmd->add_option("spec", dumpSpec, "The spec file")->required()->check(CLI::ExistingFile);

  CLI::App* primsCmd = app.add_subcommand("primitives", "List the primitives a formula can call");

  std::vector<std::string> checkSpecs;
  CLI::App* checkCmd = app.add_subcommand(
      "check", "Run every stage on specs and report their errors; write nothing");
  checkCmd->add_option("specs", checkSpecs, "Spec files")->required()->check(CLI::ExistingFile);

  std::string newName, newPath;
  CLI::App* newCmd =
      app.add_subcommand("new", "Write a commented starter spec for a new op (NAME.yaml)");
  newCmd->add_option("name", newName, "The op's name")->required();
  newCmd->add_option("--file", newPath, "Where to write it (default: NAME.yaml)");

  CLI11_PARSE(app, argc, argv);
  // (Checked here rather than by CLI11, so that they read and exit as fusegen's other errors.)
  for (const auto& [flag, value, why] :
       {std::tuple{"--package", opts.package, packageNameProblem(opts.package)},
        std::tuple{"--namespace", opts.ns, namespaceProblem(opts.ns)}})
    if (!value.empty() && !why.empty()) {
      std::cerr << "fusegen: error: " << flag << " '" << value << "' cannot be used: " << why
                << "\n";
      return 1;
    }
  try {
    if (checkCmd->parsed()) return check(opts, checkSpecs);
    if (newCmd->parsed())
      return newSpec(opts, newName, newPath.empty() ? newName + ".yaml" : newPath);
    return run(app, opts, buildOpts, specs, doBuild, goldenCmd, specsDir, update, dumpCmd, stage,
               dumpSpec, primsCmd);
  } catch (const std::exception& e) {
    // Missing or broken templates, unwritable output: reported, never a crash.
    std::cerr << "fusegen: error: " << e.what() << "\n";
    return 1;
  }
}

int run(CLI::App& app, driver::Options& opts, packaging::BuildOptions& buildOpts,
        const std::vector<std::string>& specs, bool doBuild, CLI::App* goldenCmd,
        const std::string& specsDir, bool update, CLI::App* dumpCmd, const std::string& stage,
        const std::string& dumpSpec, CLI::App* primsCmd) {

  if (goldenCmd->parsed()) return golden(opts, specsDir, update);

  Diagnostics diags(std::cerr);
  if (dumpCmd->parsed() || primsCmd->parsed()) {
    auto lib = driver::loadLibrary(opts, diags);
    if (!lib) {
      std::cerr << diags.errorCount() << " error(s) in the primitive library\n";
      return 1;
    }
    if (primsCmd->parsed()) {
      for (const auto& p : lib->all())
        std::cout << p->signature() << (p->doc.empty() ? "" : "  -- " + p->doc) << "\n";
      return 0;
    }
    auto text = driver::dump(stage, dumpSpec, *lib, diags);
    if (!text) return 1;
    std::cout << *text;
    return 0;
  }

  if (specs.empty() && !doBuild && !buildOpts.install && !buildOpts.wheel) {
    std::cout << app.help();
    return 0;
  }
  if (!specs.empty()) {
    auto lib = driver::loadLibrary(opts, diags);
    if (!lib) {
      std::cerr << diags.errorCount()
                << " error(s) in the primitive library; nothing was written\n";
      return 1;
    }
    std::vector<std::string> ops;
    auto files = driver::generate(specs, *lib, opts, diags, &ops);
    if (!files) {
      std::cerr << diags.errorCount() << " error(s); nothing was written\n";
      return 1;
    }
    std::vector<std::string> owned = ops;
    owned.push_back("runtime");
    owned.push_back(driver::packageNames(opts).package);
    printReport(writeFiles(opts.outputDir, *files, owned), opts.outputDir);
  }
  if (doBuild || buildOpts.install || buildOpts.wheel) {
    // A --python path, not a name on PATH: the build runs some steps in the package's folder.
    if (buildOpts.python.find('/') != std::string::npos)
      buildOpts.python = fs::absolute(buildOpts.python).string();
    buildOpts.outputDir = opts.outputDir;
    buildOpts.templatesDir = opts.templatesDir;
    return packaging::buildPackage(buildOpts, std::cout) == 0 ? 0 : 1;
  }
  return 0;
}
