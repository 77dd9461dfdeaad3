// SourceFile: the one reader of user-supplied source files (spec files, a spec's functions
// header, the primitive library). A path on the command line or in a spec may name anything:
// a device that never ends (/dev/zero), a FIFO that never opens, a directory, a huge file.
// readSourceFile reads only regular files of bounded size and says why it refused the rest.
#pragma once

#include "support/Diagnostics.h"

#include <cstdint>
#include <optional>
#include <string>

namespace fusegen {

// The largest source file fusegen reads: 1 MiB, over a hundred times the largest shipped one
// (templates/primitives.yaml, 9 KB; specs and specs/acts.cuh are under 1.5 KB).
constexpr std::uintmax_t kMaxSourceFileBytes = std::uintmax_t(1) << 20;

// The text of the regular file `path`, of at most `maxBytes` bytes. Otherwise nothing, and
// `error` says why, naming the path: "cannot read 'p'" (missing), "cannot read 'p': <reason>",
// "'p' is a directory, not a regular file", "'p' is larger than the 1 MiB limit of a source
// file (N bytes)". Never blocks on a FIFO and never reads more than maxBytes + 1 bytes.
std::optional<std::string> readSourceFile(const std::string& path, std::string& error,
                                          std::uintmax_t maxBytes = kMaxSourceFileBytes);
// The same, with a refusal reported to `diags` as an error at `where`, after `context`
// (e.g. "cannot read the functions header: ").
std::optional<std::string> readSourceFile(const std::string& path, Diagnostics& diags,
                                          const SourceLoc& where, const std::string& context = "");

// Where `relative` (a path written in a file of folder `dir`) may be read from: `dir` /
// `relative`, lexically normalized, when it names something inside `dir`. Nothing otherwise:
// `relative` is empty or absolute, climbs out of `dir` with `..`, or reaches outside `dir`
// through a symbolic link (the canonical paths are compared; a path that does not exist yet
// is resolved as far as it exists). `problem` then says which.
enum class PathProblem { None, Empty, Absolute, Escapes, LinkEscapes };
std::optional<std::string> resolveInside(const std::string& dir, const std::string& relative,
                                         PathProblem& problem);

} // namespace fusegen
