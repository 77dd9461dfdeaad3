// Building the package's _C library with ninja from the flags torch.utils.cpp_extension uses (asked
// once per torch install and cached), then packaging it with setup.py and pip.
#include "packaging/Builder.h"

#include "emit/Templates.h"
#include "support/FileWriter.h"
#include "support/PackageLayout.h"
#include "support/Version.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <optional>
#include <regex>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace fusegen::packaging {

namespace {

// An environment variable's value, or "" when unset.
std::string envOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `command` in a shell, appending its output to `log`; calls `onLine` for each line.
template <class F> int runLogged(const std::string& command, std::ofstream& log, F onLine) {
  FILE* pipe = popen(("(" + command + ") 2>&1").c_str(), "r");
  if (!pipe) return 127;
  std::array<char, 4096> buf;
  std::string line;
  while (fgets(buf.data(), buf.size(), pipe)) {
    line += buf.data();
    if (!line.empty() && line.back() == '\n') {
      log << line;
      line.pop_back();
      onLine(line);
      line.clear();
    }
  }
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

std::string capture(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return "";
  std::string out;
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), pipe))
    out += buf.data();
  pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

// FNV-1a, 64 bit: a stable content hash for the build key.
struct Fnv {
  uint64_t h = 1469598103934665603ULL;
  void add(const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    h ^= 0xff; // separator, so ("ab","c") != ("a","bc")
    h *= 1099511628211ULL;
  }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }
};

// Generated sources only: not what building produces.
bool isBuildOutput(const fs::path& rel) {
  const std::string first = rel.begin()->string();
  const std::string name = rel.filename().string();
  return first == "build" || first == "dist" || name == "_build_info.py" ||
         rel.string().find(".egg-info") != std::string::npos ||
         rel.string().find("__pycache__") != std::string::npos ||
         (name.rfind("_C", 0) == 0 && rel.extension() == ".so");
}

std::string buildKey(const fs::path& dir, const std::vector<std::string>& context) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && !isBuildOutput(fs::relative(e.path(), dir)))
      files.push_back(fs::relative(e.path(), dir));
  std::sort(files.begin(), files.end());
  Fnv fnv;
  for (const std::string& c : context)
    fnv.add(c);
  for (const fs::path& f : files) {
    fnv.add(f.string());
    fnv.add(readFile((dir / f).string()));
  }
  return fnv.hex();
}

// The BUILD_KEY recorded in a built package's _build_info.py, or "".
std::string recordedKey(const fs::path& buildInfo) {
  std::ifstream in(buildInfo);
  std::string line;
  const std::string prefix = "BUILD_KEY = '";
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0 && line.size() > prefix.size())
      return line.substr(prefix.size(), line.size() - prefix.size() - 1);
  return "";
}

// "path:line:col: error" lines of the log that name a generated file, with the spec named
// in that file's @generated line.
void explainFailure(const fs::path& logPath, const fs::path& dir, std::ostream& out) {
  std::ifstream log(logPath);
  const std::regex located(
      R"(([^\s:'"]+\.(?:h|cuh|cpp|cu))\((\d+)\)|([^\s:'"]+\.(?:h|cuh|cpp|cu)):(\d+):(?:\d+:)? (?:fatal )?error)");
  std::string line;
  while (std::getline(log, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, located)) continue;
    fs::path file = m[1].matched ? m[1].str() : m[3].str();
    std::string lineNo = m[1].matched ? m[2].str() : m[4].str();
    std::error_code ec;
    fs::path rel = fs::relative(fs::weakly_canonical(file, ec), fs::weakly_canonical(dir, ec), ec);
    if (ec || rel.empty() || rel.begin()->string() == "..") continue;
    std::ifstream gen(dir / rel);
    std::string first;
    std::getline(gen, first);
    std::smatch spec;
    std::string from = std::regex_search(first, spec, std::regex(R"(from (\S+\.yaml))"))
                           ? "generated from " + spec[1].str()
                           : "a runtime or package file, copied from templates/";
    out << "fusegen: the first compile error is in " << (dir / rel).string() << ":" << lineNo
        << " (" << from << ")\n";
    return;
  }
}

// The CUDA toolkit torch.utils.cpp_extension will use (its _find_cuda_home): $CUDA_HOME or
// $CUDA_PATH, else the directory above the nvcc on PATH, else /usr/local/cuda; "" if none.
std::string findCudaHome() {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v) return v;
  const std::string nvcc = capture("command -v nvcc 2>/dev/null");
  if (!nvcc.empty()) return fs::path(nvcc).parent_path().parent_path().string();
  return fs::exists("/usr/local/cuda") ? "/usr/local/cuda" : "";
}

// Where fusegen caches what outlives one package: $FUSEGEN_CACHE_DIR, else
// $XDG_CACHE_HOME/fusegen, else ~/.cache/fusegen.
fs::path cacheDir() {
  if (const char* d = std::getenv("FUSEGEN_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "fusegen";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "fusegen";
  return fs::temp_directory_path() / "fusegen-cache";
}

// The compilers and flags torch.utils.cpp_extension builds an extension with, as
// templates/build/torch_toolchain.py reports them.
struct Toolchain {
  std::string torchVersion, cudaVersion, archList, ninja, cxx, nvcc;
  std::vector<std::string> cxxFlags, nvccFlags, linkFlags;
  bool withCuda() const { return !nvcc.empty(); }
};

std::optional<Toolchain> readToolchain(const fs::path& file) {
  try {
    const YAML::Node n = YAML::LoadFile(file.string());
    auto text = [&](const char* key) {
      return n[key] && !n[key].IsNull() ? n[key].as<std::string>() : std::string();
    };
    auto texts = [&](const char* key) {
      std::vector<std::string> v;
      for (const YAML::Node& item : n[key])
        v.push_back(item.as<std::string>());
      return v;
    };
    Toolchain t{text("torch_version"), text("cuda_version"), text("arch_list"),
                text("ninja"),         text("cxx"),          text("nvcc"),
                texts("cxx_flags"),    texts("nvcc_flags"),  texts("link_flags")};
    if (t.torchVersion.empty() || t.cxx.empty()) return std::nullopt;
    return t;
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

// A flag as one shell word: as it is when it has no characters the shell would split or
// expand (torch's own "'-fPIC'" is written for the shell and stays), else single-quoted.
std::string shellWord(const std::string& flag) {
  const bool plain = std::all_of(flag.begin(), flag.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string("-_+=/.,:@%'").find(c) != std::string::npos;
  });
  return plain ? flag : quote(flag);
}

// A value in a ninja file: '$' starts ninja's escapes. In a build line's paths, spaces and
// colons are escaped too.
std::string ninjaValue(const std::string& s, bool path = false) {
  std::string out;
  for (char c : s) {
    if (c == '$' || (path && (c == ' ' || c == ':'))) out += '$';
    out += c;
  }
  return out;
}

std::string joinFlags(const std::vector<std::string>& flags) {
  std::string out;
  for (const std::string& f : flags)
    out += (out.empty() ? "" : " ") + ninjaValue(shellWord(f));
  return out;
}

// Where the object of a runtime source (runtime/<stem>.cpp: the shared glue and autograd
// kernel) is cached: it depends only on the runtime sources (copies of templates/runtime), the
// compiler and its flags, so every package built with one torch install shares it. The name
// hashes all of those.
fs::path sharedObject(const fs::path& dir, const std::string& stem, const std::string& cxx,
                      const std::string& flags) {
  Fnv h;
  h.add(cxx);
  h.add(capture(quote(cxx) + " --version 2>/dev/null"));
  h.add(flags);
  std::vector<fs::path> runtime;
  for (const auto& e : fs::directory_iterator(dir / "runtime"))
    if (e.is_regular_file()) runtime.push_back(e.path());
  std::sort(runtime.begin(), runtime.end());
  for (const fs::path& f : runtime) {
    h.add(f.filename().string());
    h.add(readFile(f.string()));
  }
  return cacheDir() / "objects" / (stem + "-" + h.hex() + ".o");
}

// build.ninja for the package in `dir`: every op's registration, CPU and (with CUDA) CUDA
// sources and the shared runtime objects (compiled into fusegen's cache unless they are there
// already), linked into `library`.
std::string ninjaFile(const emit::Templates& templates, const Toolchain& tc,
                      const fs::path& toolchainFile, const fs::path& dir, const fs::path& objectDir,
                      const fs::path& library, bool debug, bool stable) {
  const bool withCuda = tc.withCuda();
  const std::string include = "-I" + (dir / "runtime").string();
  std::vector<std::string> cxxFlags = tc.cxxFlags;
  // -ffp-contract=off: as --fmad=false for nvcc below (GCC contracts where the target has
  // FMA instructions: aarch64, or x86 with -mfma).
  for (const char* f : {"-O3", "-DNDEBUG", "-std=c++17", "-ffp-contract=off"})
    cxxFlags.push_back(f);
  cxxFlags.push_back(include);
  if (debug) cxxFlags.push_back("-g");
  std::vector<std::string> nvccFlags = tc.nvccFlags;
  // --fmad=false: no contraction of a * b + c into an FMA. The backward recomputes forward
  // values in another kernel and compares them with the extremes the forward saved (the rule
  // of max/min: where(x == result, ...)); nvcc contracts the same formula differently in
  // the two kernels, so the values differed in the last bit and gradients were lost (difffuzz
  // fz401_39, fz403_18, fz403_32 on the H100). The math library keeps its own FMAs.
  for (const char* f : {"-O3", "-std=c++17", "-lineinfo", "--fmad=false"})
    nvccFlags.push_back(f);
  nvccFlags.push_back(include);
  if (withCuda) {
    cxxFlags.push_back("-DFUSEGEN_WITH_CUDA=1");
    nvccFlags.push_back("-DFUSEGEN_WITH_CUDA=1");
  }
  // The stable ABI glue, held to what torch 2.10's stable ABI has (TORCH_TARGET_VERSION): the
  // same code whichever later torch builds it. (The .cu files include no torch header.)
  if (stable)
    for (const char* f : {"-DFUSEGEN_STABLE=1", "-DTORCH_TARGET_VERSION=0x020a000000000000"})
      cxxFlags.push_back(f);
  std::vector<emit::Data> objects, cached;
  auto add = [&](const std::string& source, const char* rule, const fs::path& object) {
    emit::Data d;
    d.set("name", source);
    d.set("source", ninjaValue((dir / source).string(), true));
    d.set("object", ninjaValue(object.string(), true));
    d.set("rule", rule);
    objects.push_back(d);
  };
  auto addOwn = [&](const std::string& source, const char* rule) {
    fs::path object = objectDir / source;
    add(source, rule, object.replace_extension(".o"));
  };
  std::vector<std::string> sharedFlags; // all but the package's own include directory
  std::copy_if(cxxFlags.begin(), cxxFlags.end(), std::back_inserter(sharedFlags),
               [&](const std::string& f) { return f != include; });
  const std::vector<const char*> shared =
      stable ? std::vector<const char*>{"fusegen_glue_stable"}
             : std::vector<const char*>{"fusegen_autograd", "fusegen_glue"};
  for (const char* stem : shared) {
    const fs::path object = sharedObject(dir, stem, tc.cxx, joinFlags(sharedFlags));
    if (fs::exists(object)) {
      emit::Data d;
      d.set("object", ninjaValue(object.string(), true));
      cached.push_back(d);
    } else {
      fs::create_directories(object.parent_path());
      add(std::string("runtime/") + stem + ".cpp", "cxx_shared", object);
    }
  }
  for (const std::string& op : packageOps(dir)) {
    addOwn(op + "/" + op + "_ops.cpp", "cxx");
    addOwn(op + "/" + op + "_cpu.cpp", "cxx");
    if (withCuda) addOwn(op + "/" + op + "_cuda.cu", "nvcc");
  }
  emit::Data d;
  d.set("toolchain", toolchainFile.string());
  d.set("cxx", ninjaValue(tc.cxx));
  d.set("cxx_flags", joinFlags(cxxFlags));
  d.set("link_flags", joinFlags(tc.linkFlags));
  d.set("with_cuda", withCuda);
  d.set("nvcc", ninjaValue(tc.nvcc));
  d.set("nvcc_flags", joinFlags(nvccFlags));
  // The flags nvcc takes from the environment, written into its command as a shell comment:
  // ninja rebuilds when a command line changes, not when the environment does.
  std::string nvccEnv;
  for (const char* var : {"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"})
    if (!envOr(var).empty()) nvccEnv += std::string(" ") + var + "=" + envOr(var);
  d.set("nvcc_env", nvccEnv.empty() ? "" : ninjaValue("# environment:" + nvccEnv));
  d.set("objects", emit::list(objects));
  d.set("cached", emit::list(cached));
  d.set("library", ninjaValue(library.string(), true));
  d.set("library_name", library.filename().string());
  return templates.render("build/build.ninja.mustache", d);
}

// A Python string literal.
std::string pyString(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\\' || c == '\'' ? std::string("\\") + c : std::string(1, c);
  return out + "'";
}

// Whether torch `version` ("2.10.0+cu130") is at least major.minor.
bool versionAtLeast(const std::string& version, int major, int minor) {
  int a = 0, b = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &a, &b) != 2) return false;
  return a > major || (a == major && b >= minor);
}

// Which glue a package is built with: the LibTorch stable ABI one (fusegen_glue_stable.cpp:
// the library loads under later torch versions too) when torch is >= 2.10 and every op can
// (<op>/<op>_build.yaml), else the ATen one, tied to the torch it was built with; `why` says
// why not, per op or for the package.
struct StableAbi {
  bool stable = false;
  std::string why;                                      // the package's reason, if any
  std::vector<std::pair<std::string, std::string>> ops; // (op, reason) of the ops that cannot
};

StableAbi stableAbi(const fs::path& dir, const std::string& torchVersion) {
  StableAbi s;
  for (const std::string& op : packageOps(dir)) {
    std::string reason = "generated by an older fusegen (no " + op + "_build.yaml); regenerate it";
    try {
      const YAML::Node n = YAML::LoadFile((dir / op / (op + "_build.yaml")).string());
      if (n["stable_abi"] && n["stable_abi"].as<bool>()) continue;
      if (n["stable_abi_blocker"]) reason = n["stable_abi_blocker"].as<std::string>();
    } catch (const YAML::Exception&) {
    }
    s.ops.emplace_back(op, reason);
  }
  if (envOr("FUSEGEN_STABLE_ABI") == "0")
    s.why = "FUSEGEN_STABLE_ABI=0 chose the ATen glue";
  else if (!versionAtLeast(torchVersion, 2, 10))
    s.why = "torch " + torchVersion + " has no stable ABI for operators (it needs torch >= 2.10)";
  else if (!s.ops.empty())
    s.why = "some ops cannot be built on the stable ABI";
  s.stable = s.why.empty();
  return s;
}

// What one build knows before it starts: the inputs of its key (cheap to ask, no torch
// import: about 4 s each on the GPU machine, so a build with nothing to do takes < 1 s).
struct BuildInputs {
  std::string probe, ninjaTemplate;                  // templates/build/
  std::string torchVersion, cudaHome, nvcc, gpuArch; // found as cpp_extension finds them
  bool debug = false;                                // FUSEGEN_DEBUG=1
  StableAbi stable;                                  // which glue the package gets
  std::vector<std::string> toolchainContext;         // what the toolchain cache depends on
  std::string key;                                   // the build key of the package
};

BuildInputs buildInputs(const BuildOptions& opts, const fs::path& dir,
                        const emit::Templates& templates) {
  BuildInputs in;
  in.probe = templates.read("build/torch_toolchain.py");
  in.ninjaTemplate = templates.read("build/build.ninja.mustache");
  // torch's version comes from its package metadata, the CUDA toolkit is found the way
  // torch.utils.cpp_extension finds it, and the architecture is the visible GPU's.
  in.torchVersion =
      capture(quote(opts.python) +
              " -c 'import importlib.metadata as m; print(m.version(\"torch\"))' 2>/dev/null");
  in.cudaHome = opts.cpuOnly ? "" : findCudaHome();
  in.nvcc = in.cudaHome.empty()
                ? ""
                : capture(quote(in.cudaHome + "/bin/nvcc") + " --version 2>/dev/null | tail -n 1");
  in.gpuArch =
      opts.arch.empty()
          ? capture(
                "nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1")
          : opts.arch;
  in.debug = envOr("FUSEGEN_DEBUG") == "1";
  in.stable = stableAbi(dir, in.torchVersion);
  in.toolchainContext = {kVersion, in.probe, in.torchVersion, in.cudaHome, in.nvcc, in.gpuArch,
                         opts.python, opts.cpuOnly ? "cpu-only" : "", envOr("CC"), envOr("CXX"),
                         // nvcc reads these itself: they change the objects as a flag would
                         envOr("NVCC_PREPEND_FLAGS"), envOr("NVCC_APPEND_FLAGS")};
  std::vector<std::string> keyContext = in.toolchainContext;
  keyContext.insert(keyContext.end(),
                    {in.ninjaTemplate, opts.wheel ? "wheel" : "", in.debug ? "debug" : "",
                     in.stable.stable ? "stable-abi" : "aten"});
  in.key = buildKey(dir, keyContext);
  return in;
}

// The key the package was last built with: in place, the stamp written after a successful
// build; installed, the one the installed package records.
std::string recordedBuildKey(const BuildOptions& opts, const fs::path& dir,
                             const std::string& package) {
  if (opts.install)
    return recordedKey(
        capture(quote(opts.python) + " -c 'import importlib.util as u; s = u.find_spec(\"" +
                package +
                "\"); "
                "print(s.submodule_search_locations[0] if s else \"\")' 2>/dev/null") +
        "/_build_info.py");
  if (!opts.wheel) return recordedKey(dir / "build" / "fusegen-build-key");
  return "";
}

// One build's log, elapsed time and failure report.
class BuildLog {
public:
  BuildLog(const fs::path& dir, std::ostream& out)
      : dir_(dir), path_(dir / "build" / "fusegen-build.log"), out_(out) {
    fs::create_directories(dir / "build");
    log_.open(path_);
  }
  const fs::path& path() const { return path_; }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  // Runs `command`, its output into the log; onLine sees each line after the log does.
  template <class F> int run(const std::string& command, F onLine) {
    return runLogged(command, log_, [&](const std::string& line) {
      keep(line);
      onLine(line);
    });
  }
  int run(const std::string& command) {
    return run(command, [](const std::string&) {});
  }
  // Reports a failed step with the log's tail and the first compile error's source.
  int failed(const char* what, int status) {
    out_ << "fusegen: error: " << what << " failed after " << std::fixed << std::setprecision(1)
         << elapsed() << " s; the end of its output:\n";
    for (const std::string& l : tail_)
      out_ << "  | " << l << "\n";
    log_.close(); // explainFailure reads it back
    explainFailure(path_, dir_, out_);
    out_ << "fusegen: full log: " << path_.string() << "\n";
    return status;
  }

private:
  void keep(const std::string& line) {
    tail_.push_back(line);
    if (tail_.size() > 80) tail_.pop_front();
  }
  fs::path dir_, path_;
  std::ostream& out_;
  std::ofstream log_;
  std::deque<std::string> tail_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Where torch's compilers and flags for this toolchain and arch list are cached.
fs::path toolchainCacheFile(const BuildInputs& in, const std::string& arch) {
  Fnv key;
  for (const std::string& c : in.toolchainContext)
    key.add(c);
  key.add(arch);
  return cacheDir() / ("toolchain-" + key.hex() + ".json");
}

// Step 1: torch's compilers and flags, asked once per toolchain (one torch import) and
// cached. Returns nothing, having reported why, when they cannot be had.
std::optional<Toolchain> toolchain(const BuildInputs& in, const std::string& python,
                                   const std::string& arch, bool withCuda, const fs::path& dir,
                                   BuildLog& log, std::ostream& out, int& status) {
  const fs::path toolchainFile = toolchainCacheFile(in, arch);
  std::optional<Toolchain> tc = readToolchain(toolchainFile);
  if (tc) return tc;
  out << "fusegen: asking torch for its compilers and flags (once per torch install; cached in "
      << toolchainFile.parent_path().string() << ")\n";
  out.flush();
  fs::create_directories(toolchainFile.parent_path());
  const fs::path probeFile = dir / "build" / "torch_toolchain.py";
  std::ofstream(probeFile) << in.probe;
  const fs::path partial = toolchainFile.string() + ".partial." + std::to_string(getpid());
  const std::string env = withCuda ? "TORCH_CUDA_ARCH_LIST=" + quote(arch) : "FUSEGEN_CPU_ONLY=1";
  status = log.run(env + " " + quote(python) + " " + quote(probeFile.string()) + " > " +
                   quote(partial.string()));
  if (status != 0) {
    status = log.failed("asking torch for its build flags", status);
    return std::nullopt;
  }
  fs::rename(partial, toolchainFile);
  tc = readToolchain(toolchainFile);
  if (!tc) {
    out << "fusegen: error: could not read " << toolchainFile.string() << "\n";
    status = 1;
  }
  return tc;
}

// Step 2: compile and link with ninja, only what changed since the last build of this package.
int compileAndLink(const emit::Templates& templates, const Toolchain& tc, const BuildInputs& in,
                   const std::string& arch, const fs::path& dir, const fs::path& library, int jobs,
                   BuildLog& log, std::ostream& out) {
  const fs::path ninjaDir = library.parent_path();
  fs::create_directories(ninjaDir);
  // Rewritten only when it changes, so ninja's view of it stays as it was.
  writeFiles(
      ninjaDir.string(),
      {{"build.ninja", ninjaFile(templates, tc, toolchainCacheFile(in, arch), dir,
                                 ninjaDir / "objects", library, in.debug, in.stable.stable)}},
      {});
  const std::regex progress(R"(^\[(\d+)/(\d+)\] (compiling|linking) (\S+))");
  const int status =
      log.run(quote(tc.ninja) + " -C " + quote(ninjaDir.string()) + " -j " + std::to_string(jobs),
              [&](const std::string& line) {
                std::smatch m;
                if (std::regex_search(line, m, progress)) {
                  out << "  [" << m[1] << "/" << m[2] << "] " << m[3] << " " << m[4] << ", "
                      << std::fixed << std::setprecision(1) << log.elapsed() << " s\n";
                  out.flush();
                }
              });
  return status != 0 ? log.failed("the build", status) : 0;
}

// Step 3: the library and what it was built against go into the package; __init__ refuses
// to load under another torch or CUDA (a stable ABI build: under an older torch, another torch
// major version or another CUDA major version), saying why.
void placeLibrary(const Toolchain& tc, const StableAbi& stable, const std::string& key,
                  const fs::path& package, const fs::path& library) {
  for (const auto& e : fs::directory_iterator(package)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("_C", 0) == 0 && e.path().extension() == ".so") fs::remove(e.path());
  }
  fs::copy_file(library, package / "_C.abi3.so", fs::copy_options::overwrite_existing);
  std::ofstream info(package / "_build_info.py");
  info << "# Written by fusegen --build: what " << package.filename().string()
       << "._C was built against.\n"
       << "TORCH_VERSION = " << pyString(tc.torchVersion) << "\n"
       << "CUDA_VERSION = " << (tc.withCuda() ? pyString(tc.cudaVersion) : "None") << "\n"
       << "ARCH_LIST = " << pyString(tc.archList) << "\n"
       << "BUILD_KEY = " << pyString(key) << "\n"
       << "# Built on the LibTorch stable ABI: loads under later torch versions of the same major\n"
       << "# version too. Else why not: for the package, and the ops that cannot be.\n"
       << "STABLE_ABI = " << (stable.stable ? "True" : "False") << "\n"
       << "NOT_STABLE_WHY = " << pyString(stable.why) << "\n"
       << "NOT_STABLE_OPS = {";
  for (const auto& [op, reason] : stable.ops)
    info << pyString(op) << ": " << pyString(reason) << ", ";
  info << "}\n";
}

// Step 4: a wheel (setup.py only packages; it compiles nothing and imports no torch),
// installed with pip for --install.
int packageWheel(const BuildOptions& opts, const fs::path& dir, BuildLog& log, std::ostream& out) {
  const std::string wheelDir = opts.wheel ? "dist" : "build/fusegen-wheel";
  const std::string command =
      "cd " + quote(dir.string()) + " && rm -rf " + quote(wheelDir) + " && " + quote(opts.python) +
      " setup.py -q bdist_wheel -d " + wheelDir +
      (opts.install
           ? " && " + quote(opts.python) +
                 " -m pip install -q --no-deps --no-index --force-reinstall " + wheelDir + "/*.whl"
           : "");
  out << "  " << (opts.install ? "packaging and installing" : "packaging") << ", " << std::fixed
      << std::setprecision(1) << log.elapsed() << " s\n";
  out.flush();
  const int status = log.run(command);
  return status != 0 ? log.failed(opts.install ? "packaging or installing" : "packaging", status)
                     : 0;
}

} // namespace

int buildPackage(const BuildOptions& opts, std::ostream& out) {
  const fs::path dir = fs::absolute(opts.outputDir);
  if (!fs::exists(dir / "setup.py")) {
    out << "fusegen: error: no generated package in '" << opts.outputDir
        << "' (setup.py is missing); run `fusegen SPEC.yaml` first\n";
    return 1;
  }
  const std::optional<PackageNames> names = recordedPackageNames(dir);
  if (!names) {
    out << "fusegen: error: '" << opts.outputDir << "' does not record its package's names ("
        << kPackageNamesFile << " is missing); regenerate it with `fusegen SPEC.yaml -o "
        << opts.outputDir << "`\n";
    return 1;
  }
  const std::string& package = names->package;
  const emit::Templates templates(opts.templatesDir);
  const BuildInputs in = buildInputs(opts, dir, templates);
  const std::string recorded = recordedBuildKey(opts, dir, package);
  if (!recorded.empty() && recorded == in.key) {
    out << "fusegen: " << package << " is up to date (build key " << in.key
        << "); nothing to build\n";
    return 0;
  }
  if (in.torchVersion.empty()) {
    out << "fusegen: error: '" << opts.python
        << "' has no torch installed; install PyTorch into the Python that should get the ops\n";
    return 1;
  }
  const bool withCuda = !in.cudaHome.empty();
  std::string arch = opts.arch;
  if (withCuda && arch.empty()) {
    arch = in.gpuArch;
    if (arch.empty()) {
      arch = "9.0";
      out << "fusegen: no GPU is visible: compiling the CUDA kernels for sm_90 (choose with "
             "--arch)\n";
    }
  }
  if (!withCuda)
    out << "fusegen: " << (opts.cpuOnly ? "--cpu-only given" : "no CUDA toolkit found")
        << ": building CPU kernels only\n";
  int jobs = opts.jobs > 0 ? opts.jobs : static_cast<int>(std::thread::hardware_concurrency());
  if (jobs < 1) jobs = 1;

  BuildLog log(dir, out);
  int status = 0;
  const std::optional<Toolchain> tc =
      toolchain(in, opts.python, arch, withCuda, dir, log, out, status);
  if (!tc) return status;
  if (tc->ninja.empty()) {
    out << "fusegen: error: ninja is not installed for '" << opts.python
        << "'; install it (`pip install ninja` or the ninja-build package)\n";
    return 1;
  }
  out << "fusegen: "
      << (opts.wheel     ? "building a wheel of"
          : opts.install ? "building and installing"
                         : "building")
      << " " << package << " (torch " << tc->torchVersion
      << (tc->withCuda() ? ", CUDA arch " + tc->archList : ", CPU only") << ", " << jobs
      << " jobs, " << (in.stable.stable ? "stable ABI" : "ATen glue: " + in.stable.why) << ")\n";
  out.flush();
  const fs::path library = dir / "build" / "ninja" / "_C.abi3.so";
  if ((status = compileAndLink(templates, *tc, in, arch, dir, library, jobs, log, out)) != 0)
    return status;
  placeLibrary(*tc, in.stable, in.key, dir / package, library);
  if ((opts.wheel || opts.install) && (status = packageWheel(opts, dir, log, out)) != 0)
    return status;
  out << "fusegen: "
      << (opts.wheel     ? "built a wheel of"
          : opts.install ? "built and installed"
                         : "built")
      << " " << package << " in " << std::fixed << std::setprecision(1) << log.elapsed()
      << " s (log: " << log.path().string() << ")\n";
  if (!opts.install && !opts.wheel)
    std::ofstream(dir / "build" / "fusegen-build-key") << "BUILD_KEY = '" << in.key << "'\n";
  if (opts.wheel) out << "fusegen: the wheel is in " << (dir / "dist").string() << "\n";
  return 0;
}

} // namespace fusegen::packaging
