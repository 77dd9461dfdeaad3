// SourceFile implementation: open without blocking, check the kind and size of what was
// opened (fstat of the open descriptor, so what is checked is what is read), read at most one
// byte past the limit (a file may grow, and /proc files report size 0).
#include "support/SourceFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace fusegen {

namespace {

std::string quoted(const std::string& path) {
  return "'" + path + "'";
}

std::string sizeText(std::uintmax_t bytes) {
  constexpr std::uintmax_t kMiB = std::uintmax_t(1) << 20, kKiB = 1024;
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " bytes";
}

const char* kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

std::string tooLarge(const std::string& path, std::uintmax_t maxBytes, const std::string& size) {
  return quoted(path) + " is larger than the " + sizeText(maxBytes) + " limit of a source file (" +
         size + ")";
}

// Closes the descriptor on every return path.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

} // namespace

std::optional<std::string> readSourceFile(const std::string& path, std::string& error,
                                          std::uintmax_t maxBytes) {
  if (path.find('\0') != std::string::npos) {
    error = "cannot read " + quoted(path) + ": the path contains a NUL character";
    return std::nullopt;
  }
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)};
  if (f.fd < 0) {
    // A missing file keeps the plain wording the error catalog has always shown.
    error = "cannot read " + quoted(path);
    if (errno != ENOENT) error += std::string(": ") + std::strerror(errno);
    return std::nullopt;
  }
  struct stat st;
  if (::fstat(f.fd, &st) != 0) {
    error = "cannot read " + quoted(path) + ": " + std::strerror(errno);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    error = quoted(path) + " is " + kindOf(st.st_mode) + ", not a regular file";
    return std::nullopt;
  }
  if (static_cast<std::uintmax_t>(st.st_size) > maxBytes) {
    error = tooLarge(path, maxBytes, std::to_string(st.st_size) + " bytes");
    return std::nullopt;
  }
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = "cannot read " + quoted(path) + ": " + std::strerror(errno);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > maxBytes) { // grew while being read, or a size-0 /proc file
      error = tooLarge(path, maxBytes, "more than " + std::to_string(maxBytes) + " bytes");
      return std::nullopt;
    }
  }
  return text;
}

std::optional<std::string> readSourceFile(const std::string& path, Diagnostics& diags,
                                          const SourceLoc& where, const std::string& context) {
  std::string error;
  std::optional<std::string> text = readSourceFile(path, error);
  if (!text) diags.error(where, context + error);
  return text;
}

std::optional<std::string> resolveInside(const std::string& dir, const std::string& relative,
                                         PathProblem& problem) {
  problem = PathProblem::None;
  const fs::path rel(relative);
  if (relative.empty()) {
    problem = PathProblem::Empty;
    return std::nullopt;
  }
  if (rel.is_absolute() || rel.has_root_directory() || rel.has_root_name()) {
    problem = PathProblem::Absolute;
    return std::nullopt;
  }
  const fs::path normal = rel.lexically_normal();
  if (!normal.empty() && *normal.begin() == "..") {
    problem = PathProblem::Escapes;
    return std::nullopt;
  }
  const fs::path folder = dir.empty() ? fs::path(".") : fs::path(dir);
  const std::string shown = (fs::path(dir) / normal).lexically_normal().string();
  // Symbolic links: the canonical target must stay below the canonical folder.
  std::error_code ec;
  fs::path base = fs::weakly_canonical(folder, ec);
  if (ec) return shown; // nothing there to escape through; reading it reports the failure
  fs::path target = fs::weakly_canonical(base / normal, ec);
  if (ec) return shown;
  auto b = base.begin(), t = target.begin();
  for (; b != base.end(); ++b, ++t) {
    if (b->empty() && std::next(b) == base.end()) break; // trailing separator of the base
    if (t == target.end() || *t != *b) {
      problem = PathProblem::LinkEscapes;
      return std::nullopt;
    }
  }
  return shown;
}

} // namespace fusegen
