// Running setup.py / pip with progress reporting.
#include "build/Builder.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <regex>
#include <sys/wait.h>
#include <thread>

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
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
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

} // namespace

int buildPackage(const BuildOptions& opts, std::ostream& out) {
  const fs::path dir = fs::absolute(opts.outputDir);
  if (!fs::exists(dir / "setup.py")) {
    out << "fusegen: error: no generated package in '" << opts.outputDir
        << "' (setup.py is missing); run `fusegen SPEC.yaml` first\n";
    return 1;
  }
  std::string version =
      capture(quote(opts.python) + " -c 'import torch; print(torch.__version__)' 2>/dev/null");
  if (version.empty()) {
    out << "fusegen: error: '" << opts.python
        << "' cannot import torch; install PyTorch into the Python that should get the ops\n";
    return 1;
  }
  std::string cudaHome =
      capture(quote(opts.python) + " -c 'from torch.utils.cpp_extension import CUDA_HOME; "
                                   "print(CUDA_HOME or \"\")' 2>/dev/null");
  std::string arch = opts.arch;
  bool withCuda = !opts.cpuOnly && !cudaHome.empty();
  if (withCuda && arch.empty()) {
    arch = capture(quote(opts.python) +
                   " -c 'import torch; c = torch.cuda.get_device_capability() if "
                   "torch.cuda.is_available() else None; print(\"%d.%d\" % c if c else \"\")' "
                   "2>/dev/null");
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
  std::string env = "MAX_JOBS=" + std::to_string(jobs) +
                    (withCuda ? " TORCH_CUDA_ARCH_LIST=" + quote(arch) : " FUSEGEN_CPU_ONLY=1");
  std::string command = opts.install ? "cd " + quote(dir.string()) + " && " + env + " " +
                                           quote(opts.python) +
                                           " -m pip install --no-build-isolation --no-deps -v ."
                                     : "cd " + quote(dir.string()) + " && " + env + " " +
                                           quote(opts.python) + " setup.py build_ext --inplace";
  out << "fusegen: " << (opts.install ? "building and installing" : "building") << " fusegen_ops"
      << " (torch " << version << (withCuda ? ", CUDA arch " + arch : ", CPU only") << ", " << jobs
      << " jobs)\n";
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
    out << "fusegen: full log: " << logPath.string() << "\n";
    return status;
  }
  out << "fusegen: " << (opts.install ? "built and installed" : "built") << " fusegen_ops in "
      << std::fixed << std::setprecision(1) << elapsed() << " s (log: " << logPath.string()
      << ")\n";
  return 0;
}

} // namespace fusegen::build
