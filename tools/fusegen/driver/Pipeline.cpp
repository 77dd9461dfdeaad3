// Stage sequencing: load -> lower -> differentiate -> plan -> emit.
#include "driver/Pipeline.h"

#include "autodiff/ReverseMode.h"
#include "autodiff/SecondOrder.h"
#include "cxx/FunctionImporter.h"
#include "emit/Emitters.h"
#include "expr/Sema.h"
#include "opt/Simplify.h"
#include "plan/KernelPlan.h"
#include "specfile/SpecLoader.h"
#include "support/FileWriter.h"
#include "support/PackageLayout.h"
#include "support/SourceFile.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace fusegen::driver {

std::optional<prims::PrimitiveLibrary> loadLibrary(const Options& opts, Diagnostics& diags) {
  return prims::PrimitiveLibrary::load(opts.templatesDir + "/primitives.yaml", diags);
}

namespace {

struct Compiled {
  spec::OpSpec spec;
  ir::Function fn;
  autodiff::Gradient grad;
  autodiff::SecondOrder grad2;
  plan::KernelPlan plan;
};

// The path of the spec's `functions:` header: a file below the spec's folder, named relative
// to it, reached neither through `..` nor through a link out of the folder (a spec may come
// from anywhere; it must not make fusegen read, or hand Clang, files of the rest of the
// machine). Errors are reported at the `functions:` value.
std::optional<std::string> functionsHeader(const std::string& specPath, const spec::OpSpec& spec,
                                           Diagnostics& diags) {
  PathProblem problem;
  std::optional<std::string> header =
      resolveInside(fs::path(specPath).parent_path().string(), spec.functions, problem);
  if (header) return header;
  const std::string name = "the functions header '" + spec.functions + "'";
  switch (problem) {
  case PathProblem::Absolute:
    diags.error(spec.functionsLoc,
                name + " is an absolute path; name a file relative to the spec's folder");
    break;
  case PathProblem::Escapes:
    diags.error(spec.functionsLoc, name + " is outside the spec's folder; it must be a file "
                                          "in that folder or below it");
    break;
  case PathProblem::LinkEscapes:
    diags.error(spec.functionsLoc, name + " leads out of the spec's folder through a symbolic "
                                          "link; it must be a file in that folder or below it");
    break;
  case PathProblem::Empty:
  case PathProblem::None:
    diags.error(spec.functionsLoc, "'functions' must name a header file");
    break;
  }
  return std::nullopt;
}

std::optional<Compiled> compileText(const std::string& path, const std::string& text,
                                    const prims::PrimitiveLibrary& lib, Diagnostics& diags) {
  std::optional<spec::OpSpec> spec = spec::loadSpecFromString(path, text, diags);
  if (!spec) return std::nullopt;
  std::optional<cxx::UserFunctions> functions;
  if (!spec->functions.empty()) {
    std::optional<std::string> header = functionsHeader(path, *spec, diags);
    if (!header) return std::nullopt;
    std::optional<std::string> text =
        readSourceFile(*header, diags, spec->functionsLoc, "cannot read the functions header: ");
    if (!text) return std::nullopt;
    functions = cxx::importFunctions(*header, *text, diags);
    if (!functions) return std::nullopt;
  }
  std::optional<ir::Function> fn =
      expr::lowerOp(*spec, lib, diags, functions ? &*functions : nullptr);
  if (!fn) return std::nullopt;
  std::optional<autodiff::Gradient> grad =
      autodiff::differentiate(*fn, lib, diags, spec->outputs.front().formulaLoc);
  if (!grad) return std::nullopt;
  autodiff::SecondOrder grad2 =
      autodiff::differentiateBackward(*fn, *grad, lib, spec->outputs.front().formulaLoc);
  fn = opt::dropStatedGradients(*fn, grad->inputGrads); // reverse mode has used them
  std::optional<plan::KernelPlan> plan = plan::planOp(*spec, *fn, *grad, lib, diags);
  if (!plan) return std::nullopt;
  plan::saveSecondOrderInputs(*plan, *fn, grad2);
  return Compiled{std::move(*spec), std::move(*fn), std::move(*grad), std::move(grad2),
                  std::move(*plan)};
}

std::optional<Compiled> compile(const std::string& path, const prims::PrimitiveLibrary& lib,
                                Diagnostics& diags) {
  std::optional<std::string> text = readSourceFile(path, diags, SourceLoc{path, 0, 0});
  if (!text) return std::nullopt;
  return compileText(path, *text, lib, diags);
}

} // namespace

PackageNames packageNames(const Options& opts) {
  std::optional<PackageNames> recorded;
  if (!opts.outputDir.empty()) recorded = recordedPackageNames(opts.outputDir);
  PackageNames names = recorded.value_or(PackageNames{});
  if (recorded && ((!opts.package.empty() && opts.package != recorded->package) ||
                   (!opts.ns.empty() && opts.ns != recorded->ns)))
    throw std::runtime_error(
        opts.outputDir + " holds the package '" + recorded->package + "' (torch.ops." +
        recorded->ns + "); generating '" + (opts.package.empty() ? names.package : opts.package) +
        "' (torch.ops." + (opts.ns.empty() ? names.ns : opts.ns) +
        ") there would leave its ops behind: give another --output, or remove " + opts.outputDir);
  if (!opts.package.empty()) names.package = opts.package;
  if (!opts.ns.empty()) names.ns = opts.ns;
  return names;
}

std::optional<std::vector<GeneratedFile>>
generateOne(const std::string& path, const std::string& text, const prims::PrimitiveLibrary& lib,
            const emit::Templates& templates, Diagnostics& diags) {
  std::optional<Compiled> c = compileText(path, text, lib, diags);
  if (!c) return std::nullopt;
  return emit::emitOp(emit::OpModel{c->spec, c->fn, c->grad, c->grad2, c->plan, PackageNames{}},
                      templates);
}

std::optional<std::vector<GeneratedFile>> generate(const std::vector<std::string>& specPaths,
                                                   const prims::PrimitiveLibrary& lib,
                                                   const Options& opts, Diagnostics& diags,
                                                   std::vector<std::string>* opNames) {
  emit::Templates templates(opts.templatesDir);
  const PackageNames package = packageNames(opts);
  std::vector<GeneratedFile> files;
  std::set<std::string> names;
  std::map<std::string, std::string> specOf;
  int errorsBefore = diags.errorCount();
  for (const std::string& path : specPaths) {
    std::optional<Compiled> c = compile(fs::path(path).lexically_normal().string(), lib, diags);
    if (!c) continue;
    auto [it, fresh] = specOf.emplace(c->spec.name, path);
    if (!fresh) {
      diags.error(c->spec.nameLoc, "op '" + c->spec.name + "' is also defined by " + it->second);
      continue;
    }
    if (c->spec.name == package.package) {
      diags.error(c->spec.nameLoc,
                  "op '" + c->spec.name + "' has the name of its package; give --package another");
      continue;
    }
    std::vector<GeneratedFile> opFiles =
        emit::emitOp(emit::OpModel{c->spec, c->fn, c->grad, c->grad2, c->plan, package}, templates);
    files.insert(files.end(), opFiles.begin(), opFiles.end());
    names.insert(c->spec.name);
  }
  if (diags.errorCount() != errorsBefore) return std::nullopt;
  if (opNames) opNames->assign(names.begin(), names.end());
  for (const std::string& n : packageOps(opts.outputDir))
    names.insert(n);
  std::vector<GeneratedFile> packageFiles =
      emit::emitPackage(std::vector<std::string>(names.begin(), names.end()), package, templates);
  files.insert(files.end(), packageFiles.begin(), packageFiles.end());
  return files;
}

std::optional<std::string> starterSpec(const std::string& name, const std::string& path,
                                       const prims::PrimitiveLibrary& lib, const Options& opts,
                                       Diagnostics& diags) {
  emit::Templates templates(opts.templatesDir);
  emit::Data d;
  d.set("op", name);
  d.set("file", path);
  std::string text = templates.render("spec/starter.yaml.mustache", d);
  diags.addFile(path, text); // (its diagnostics quote its lines)
  if (!generateOne(path, text, lib, templates, diags)) return std::nullopt;
  return text;
}

std::optional<std::string> dump(const std::string& stage, const std::string& specPath,
                                const prims::PrimitiveLibrary& lib, Diagnostics& diags) {
  std::optional<Compiled> c = compile(specPath, lib, diags);
  if (!c) return std::nullopt;
  std::vector<std::pair<std::string, ir::Expr>> roots;
  if (stage == "ir") {
    for (const ir::FunctionOutput& o : c->fn.outputs)
      roots.emplace_back(o.name, o.value);
    return ir::printDag(roots);
  }
  if (stage == "grad") {
    for (size_t i = 0; i < c->fn.inputs.size(); ++i)
      roots.emplace_back("grad." + c->fn.inputs[i].name, c->grad.inputGrads[i]);
    return ir::printDag(roots);
  }
  if (stage == "grad2") {
    if (!c->grad2.failure.empty()) return "no second derivative: " + c->grad2.failure + "\n";
    for (size_t i = 0; i < c->fn.inputs.size(); ++i)
      roots.emplace_back("grad2." + c->fn.inputs[i].name, c->grad2.inputGrads[i]);
    for (size_t m = 0; m < c->fn.outputs.size(); ++m)
      roots.emplace_back("grad2.grad_" + c->fn.outputs[m].name, c->grad2.gradOutGrads[m]);
    return ir::printDag(roots);
  }
  return plan::describePlan(c->fn, c->plan);
}

} // namespace fusegen::driver
