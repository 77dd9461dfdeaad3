// Running setup.py / pip with progress reporting.
#include "build/Builder.h"

#include "emit/Emitters.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <regex>
#include <sys/wait.h>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace fusegen::build {

namespace {

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
    std::ifstream in(dir / f, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fnv.add(f.string());
    fnv.add(text);
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

} // namespace

int buildPackage(const BuildOptions& opts, std::ostream& out) {
  const fs::path dir = fs::absolute(opts.outputDir);
  if (!fs::exists(dir / "setup.py")) {
    out << "fusegen: error: no generated package in '" << opts.outputDir
        << "' (setup.py is missing); run `fusegen SPEC.yaml` first\n";
    return 1;
  }
  // The build key, from what is cheap to ask, with no torch import (about 4 s each on the GPU
  // machine): < 1 s when nothing changed. torch's version comes from its package metadata,
  // the CUDA toolkit is found the way torch.utils.cpp_extension finds it, and the
  // architecture is the visible GPU's (nvidia-smi).
  const std::string torchVersion =
      capture(quote(opts.python) +
              " -c 'import importlib.metadata as m; print(m.version(\"torch\"))' 2>/dev/null");
  const std::string cudaHome = findCudaHome();
  const std::string nvcc =
      cudaHome.empty()
          ? ""
          : capture(quote(cudaHome + "/bin/nvcc") + " --version 2>/dev/null | tail -n 1");
  const std::string gpuArch =
      opts.arch.empty()
          ? capture(
                "nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1")
          : opts.arch;
  const std::string key =
      buildKey(dir, {emit::kVersion, torchVersion, nvcc, gpuArch, opts.python,
                     opts.cpuOnly ? "cpu-only" : "", opts.wheel ? "wheel" : "",
                     std::getenv("FUSEGEN_DEBUG") ? std::getenv("FUSEGEN_DEBUG") : ""});
  // In place, the key is stamped by fusegen after a successful build (setup.py writes
  // _build_info.py before compiling, so it would also be there after a failure); installed,
  // it is the one the installed package records.
  const fs::path stamp = dir / "build" / "fusegen-build-key";
  std::string recorded;
  if (opts.install)
    recorded =
        recordedKey(capture(quote(opts.python) +
                            " -c 'import importlib.util as u; s = u.find_spec(\"fusegen_ops\"); "
                            "print(s.submodule_search_locations[0] if s else \"\")' 2>/dev/null") +
                    "/_build_info.py");
  else if (!opts.wheel)
    recorded = recordedKey(stamp);
  if (!recorded.empty() && recorded == key) {
    out << "fusegen: fusegen_ops is up to date (build key " << key << "); nothing to build\n";
    return 0;
  }
  if (torchVersion.empty()) {
    out << "fusegen: error: '" << opts.python
        << "' has no torch installed; install PyTorch into the Python that should get the ops\n";
    return 1;
  }
  std::string arch = opts.arch;
  bool withCuda = !opts.cpuOnly && !cudaHome.empty();
  if (withCuda && arch == "all") // every architecture this torch was built for (asks torch)
    arch = capture(quote(opts.python) +
                   " -c 'import torch; print(\" \".join(a[3:-1] + \".\" + a[-1] for a in "
                   "torch._C._cuda_getArchFlags().split()))' 2>/dev/null");
  if (withCuda && arch.empty()) {
    arch = gpuArch;
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

  fs::create_directories(dir / "build");
  const fs::path logPath = dir / "build" / "fusegen-build.log";
  std::ofstream log(logPath);
  std::string env = "MAX_JOBS=" + std::to_string(jobs) + " FUSEGEN_BUILD_KEY=" + key +
                    (withCuda ? " TORCH_CUDA_ARCH_LIST=" + quote(arch) : " FUSEGEN_CPU_ONLY=1");
  const std::string py = "cd " + quote(dir.string()) + " && " + env + " " + quote(opts.python);
  // setup.py is run once, directly: through pip's build hooks it would run (and import torch,
  // about 4 s on the GPU machine) three times. --install then installs the wheel it wrote.
  const std::string wheelDir = opts.wheel ? "dist" : "build/fusegen-wheel";
  const std::string command =
      opts.wheel || opts.install
          ? (opts.install ? "rm -rf " + quote((dir / wheelDir).string()) + " && " : "") + py +
                " setup.py bdist_wheel -d " + wheelDir +
                (opts.install ? " && " + quote(opts.python) +
                                    " -m pip install --no-deps --no-index --force-reinstall " +
                                    wheelDir + "/*.whl"
                              : "")
          : py + " setup.py build_ext --inplace";
  const char* what = opts.wheel     ? "building a wheel of"
                     : opts.install ? "building and installing"
                                    : "building";
  out << "fusegen: " << what << " fusegen_ops (torch " << torchVersion
      << (withCuda ? ", CUDA arch " + arch : ", CPU only") << ", " << jobs << " jobs)\n";
  out.flush();
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::deque<std::string> tail;
  const std::regex progress(R"(^\s*\[(\d+)/(\d+)\] )"); // ninja, also indented by pip
  int status = runLogged(command, log, [&](const std::string& line) {
    tail.push_back(line);
    if (tail.size() > 80) tail.pop_front();
    std::smatch m;
    if (std::regex_search(line, m, progress)) {
      out << "  [" << m[1] << "/" << m[2] << "] compiling, " << std::fixed << std::setprecision(1)
          << elapsed() << " s\n";
      out.flush();
    }
  });
  if (status != 0) {
    out << "fusegen: error: the build failed after " << std::fixed << std::setprecision(1)
        << elapsed() << " s; the end of its output:\n";
    for (const std::string& l : tail)
      out << "  | " << l << "\n";
    log.close(); // explainFailure reads it back
    explainFailure(logPath, dir, out);
    out << "fusegen: full log: " << logPath.string() << "\n";
    return status;
  }
  out << "fusegen: "
      << (opts.wheel     ? "built a wheel of"
          : opts.install ? "built and installed"
                         : "built")
      << " fusegen_ops in " << std::fixed << std::setprecision(1) << elapsed()
      << " s (log: " << logPath.string() << ")\n";
  if (!opts.install && !opts.wheel) std::ofstream(stamp) << "BUILD_KEY = '" << key << "'\n";
  if (opts.wheel) out << "fusegen: the wheel is in " << (dir / "dist").string() << "\n";
  return 0;
}

} // namespace fusegen::build
