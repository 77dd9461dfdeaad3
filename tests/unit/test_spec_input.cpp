// Tests of fusegen under hostile input (issue #12): the bounded reader of source files
// (support/SourceFile: regular files only, 1 MiB at most, never blocking on a FIFO), the
// rules for a spec's `functions:` header (relative, inside the spec's folder, also through
// symbolic links), and the limits SpecLoader enforces with a location: name length, YAML
// nesting, one UTF-8 document, int defaults. What the error catalog cannot hold (a file over
// the size limit, a FIFO, a symbolic link, bytes that are not UTF-8) is checked here.
#include "TestUtil.h"

#include "driver/Pipeline.h"
#include "prims/PrimitiveLibrary.h"
#include "specfile/SpecLoader.h"
#include "support/Diagnostics.h"
#include "support/SourceFile.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <sys/stat.h>

namespace fusegen {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

// A fresh directory under the system's temp folder, removed with everything in it.
class TempDir {
public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("fusegen_spec_input_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string file(const std::string& name, const std::string& text) const {
    fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

private:
  fs::path path_;
};

const std::string kSpecBody = "inputs:\n  x: [..., D]\noutputs:\n  y: x\n";

// --- readSourceFile -----------------------------------------------------------------------

TEST(SourceFile, ReadsARegularFile) {
  TempDir dir;
  std::string p = dir.file("a.yaml", "op: a\n");
  std::string error;
  std::optional<std::string> text = readSourceFile(p, error);
  ASSERT_TRUE(text) << error;
  EXPECT_EQ(*text, "op: a\n");
}

TEST(SourceFile, MissingFileKeepsThePlainMessage) {
  std::string error;
  EXPECT_FALSE(readSourceFile("/nonexistent/fusegen/x.yaml", error));
  EXPECT_EQ(error, "cannot read '/nonexistent/fusegen/x.yaml'");
}

TEST(SourceFile, RefusesADirectory) {
  TempDir dir;
  std::string error;
  EXPECT_FALSE(readSourceFile(dir.path().string(), error));
  EXPECT_EQ(error, "'" + dir.path().string() + "' is a directory, not a regular file");
}

TEST(SourceFile, RefusesDevicesWithoutReadingThem) {
  // /dev/zero never ends: before the reader, `fusegen /dev/zero` read 2 GB in 5 s.
  auto start = std::chrono::steady_clock::now();
  std::string error;
  EXPECT_FALSE(readSourceFile("/dev/zero", error));
  EXPECT_EQ(error, "'/dev/zero' is a character device, not a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(SourceFile, RefusesAFifoWithoutWaitingForAWriter) {
  TempDir dir;
  fs::path fifo = dir.path() / "spec.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string error;
  EXPECT_FALSE(readSourceFile(fifo.string(), error)); // would block forever without O_NONBLOCK
  EXPECT_EQ(error, "'" + fifo.string() + "' is a FIFO, not a regular file");
}

TEST(SourceFile, SizeLimitIsOneMebibyte) {
  TempDir dir;
  std::string error;
  std::string atLimit = dir.file("at.cuh", std::string(kMaxSourceFileBytes, 'x'));
  std::optional<std::string> text = readSourceFile(atLimit, error);
  ASSERT_TRUE(text) << error;
  EXPECT_EQ(text->size(), kMaxSourceFileBytes);

  std::string over = dir.file("over.cuh", std::string(kMaxSourceFileBytes + 1, 'x'));
  EXPECT_FALSE(readSourceFile(over, error));
  EXPECT_EQ(error,
            "'" + over + "' is larger than the 1 MiB limit of a source file (1048577 bytes)");
}

TEST(SourceFile, FilesThatReportNoSizeAreStillBounded) {
  // /proc files report size 0 and have content: the reader stops one byte past the limit.
  std::string error;
  EXPECT_FALSE(readSourceFile("/proc/self/status", error, 16));
  EXPECT_EQ(error, "'/proc/self/status' is larger than the 16 bytes limit of a source file (more "
                   "than 16 bytes)");
}

// --- resolveInside ------------------------------------------------------------------------

TEST(ResolveInside, AcceptsRelativePathsBelowTheFolder) {
  TempDir dir;
  dir.file("sub/acts.cuh", "");
  const std::string d = dir.path().string();
  PathProblem problem;
  EXPECT_EQ(resolveInside(d, "sub/acts.cuh", problem), d + "/sub/acts.cuh");
  EXPECT_EQ(resolveInside(d, "sub/../sub/./acts.cuh", problem), d + "/sub/acts.cuh");
  // A missing file is not refused here; reading it reports "cannot read".
  EXPECT_EQ(resolveInside(d, "missing.cuh", problem), d + "/missing.cuh");
  EXPECT_EQ(problem, PathProblem::None);
  // Relative to the working directory when the spec has no folder part.
  EXPECT_EQ(resolveInside("", "acts.cuh", problem), "acts.cuh");
}

TEST(ResolveInside, RefusesEmptyAbsoluteAndClimbingPaths) {
  PathProblem problem;
  EXPECT_FALSE(resolveInside("specs", "", problem));
  EXPECT_EQ(problem, PathProblem::Empty);
  EXPECT_FALSE(resolveInside("specs", "/etc/passwd", problem));
  EXPECT_EQ(problem, PathProblem::Absolute);
  EXPECT_FALSE(resolveInside("specs", "../specs/acts.cuh", problem));
  EXPECT_EQ(problem, PathProblem::Escapes);
  EXPECT_FALSE(resolveInside("specs", "a/../../x.cuh", problem));
  EXPECT_EQ(problem, PathProblem::Escapes);
}

TEST(ResolveInside, RefusesSymbolicLinksOutOfTheFolder) {
  TempDir outside, dir;
  std::string secret = outside.file("secret.cuh", "");
  fs::create_symlink(secret, dir.path() / "link.cuh");
  fs::create_directory_symlink(outside.path(), dir.path() / "linkdir");
  dir.file("real.cuh", "");
  fs::create_symlink(dir.path() / "real.cuh", dir.path() / "inside.cuh");
  const std::string d = dir.path().string();
  PathProblem problem;
  EXPECT_FALSE(resolveInside(d, "link.cuh", problem));
  EXPECT_EQ(problem, PathProblem::LinkEscapes);
  EXPECT_FALSE(resolveInside(d, "linkdir/secret.cuh", problem));
  EXPECT_EQ(problem, PathProblem::LinkEscapes);
  EXPECT_FALSE(resolveInside(d, "linkdir/missing.cuh", problem)); // even what is not there
  EXPECT_EQ(problem, PathProblem::LinkEscapes);
  // A link that stays inside the folder is fine.
  EXPECT_EQ(resolveInside(d, "inside.cuh", problem), d + "/inside.cuh");
}

// --- the functions header through the pipeline -------------------------------------------

using test::library; // the real primitive library, loaded once (TestUtil.h)

// Runs the generator on one spec file; returns its stderr, and whether it produced files.
std::string generateErrors(const std::string& specPath, bool* produced = nullptr) {
  std::ostringstream out;
  Diagnostics diags(out);
  driver::Options opts;
  opts.templatesDir = FUSEGEN_TEST_TEMPLATES;
  opts.outputDir = "";
  auto files = driver::generate({specPath}, library(), opts, diags);
  if (produced) *produced = files.has_value();
  return out.str();
}

TEST(FunctionsHeader, TooLargeIsAnErrorAtTheFunctionsValue) {
  TempDir dir;
  dir.file("big.cuh", std::string(kMaxSourceFileBytes + 1, ' '));
  std::string spec = dir.file("s.yaml", "op: s\nfunctions: big.cuh\n" + kSpecBody);
  bool produced = true;
  std::string err = generateErrors(spec, &produced);
  EXPECT_FALSE(produced);
  EXPECT_EQ(err, spec + ":2:12: error: cannot read the functions header: '" + dir.path().string() +
                     "/big.cuh' is larger than the 1 MiB limit of a source file (1048577 "
                     "bytes)\nfunctions: big.cuh\n           ^\n");
}

TEST(FunctionsHeader, ALinkOutOfTheFolderIsRefused) {
  TempDir outside, dir;
  std::string secret = outside.file("acts.cuh", "__host__ __device__ inline float f(float x) "
                                                "{ return x; }\n");
  fs::create_symlink(secret, dir.path() / "acts.cuh");
  std::string spec = dir.file("s.yaml", "op: s\nfunctions: acts.cuh\n" + kSpecBody);
  std::string err = generateErrors(spec);
  EXPECT_EQ(err, spec + ":2:12: error: the functions header 'acts.cuh' leads out of the spec's "
                        "folder through a symbolic link; it must be a file in that folder or "
                        "below it\nfunctions: acts.cuh\n           ^\n");
}

TEST(FunctionsHeader, AFifoIsRefused) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir.path() / "f.cuh").c_str(), 0600), 0);
  std::string spec = dir.file("s.yaml", "op: s\nfunctions: f.cuh\n" + kSpecBody);
  std::string err = generateErrors(spec);
  EXPECT_EQ(err.substr(0, err.find('\n')),
            spec + ":2:12: error: cannot read the functions header: '" + dir.path().string() +
                "/f.cuh' is a FIFO, not a regular file");
}

TEST(SpecFile, TooLargeIsRefusedBeforeParsing) {
  TempDir dir;
  std::string spec = dir.file("s.yaml", "op: s\n" + kSpecBody + "#" +
                                            std::string(kMaxSourceFileBytes, 'x') + "\n");
  std::string err = generateErrors(spec);
  EXPECT_EQ(err, spec + ": error: '" + spec +
                     "' is larger than the 1 MiB limit of a source file (" +
                     std::to_string(fs::file_size(spec)) + " bytes)\n");
}

// --- SpecLoader limits --------------------------------------------------------------------

std::string loadErrors(const std::string& text) {
  std::ostringstream out;
  Diagnostics diags(out);
  spec::loadSpecFromString("t.yaml", text, diags);
  return out.str();
}

std::string firstLine(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

TEST(SpecLimits, NamesOfSixtyFourCharactersAreFine) {
  const std::string n(64, 'n');
  EXPECT_EQ(loadErrors("op: " + n + "\ninputs:\n  x" + n.substr(1) + ": [..., D]\nattrs:\n  a" +
                       n.substr(1) + ": {type: float}\nlet:\n  t" + n.substr(1) +
                       ": x\noutputs:\n  y" + n.substr(1) + ": x\n"),
            "");
}

TEST(SpecLimits, EveryKindOfNameIsLimited) {
  const std::string n(65, 'n');
  EXPECT_EQ(firstLine(loadErrors("op: " + n + "\n" + kSpecBody)),
            "t.yaml:1:5: error: op name 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...' is 65 characters "
            "long; the limit is 64");
  EXPECT_EQ(firstLine(loadErrors("op: t\ninputs:\n  " + n + ": [..., D]\noutputs:\n  y: x\n")),
            "t.yaml:3:3: error: input name 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...' is 65 "
            "characters long; the limit is 64");
  EXPECT_EQ(firstLine(loadErrors("op: t\n" + kSpecBody + "attrs:\n  " + n + ": {type: int}\n")),
            "t.yaml:7:3: error: attr name 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...' is 65 characters "
            "long; the limit is 64");
  EXPECT_EQ(firstLine(loadErrors("op: t\n" + kSpecBody + "let:\n  " + n + ": x\n")),
            "t.yaml:7:3: error: let name 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...' is 65 characters "
            "long; the limit is 64");
  EXPECT_EQ(firstLine(loadErrors("op: t\ninputs:\n  x: [..., D]\noutputs:\n  " + n + ": x\n")),
            "t.yaml:5:3: error: output name 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...' is 65 "
            "characters long; the limit is 64");
}

TEST(SpecLimits, TheFiveThousandCharacterOpNameOfTheFuzzer) {
  // Used to pass the loader and fail writing: "filesystem error: ... File name too long".
  std::string err = loadErrors("op: " + std::string(5000, 'a') + "\n" + kSpecBody);
  EXPECT_EQ(firstLine(err), "t.yaml:1:5: error: op name 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is "
                            "5000 characters long; the limit is 64");
}

std::string nested(int depth) {
  // The top-level mapping and `inputs` are two levels; each '[' one more.
  return "op: t\ninputs:\n  x: " + std::string(depth - 2, '[') + std::string(depth - 2, ']') +
         "\noutputs:\n  y: x\n";
}

TEST(SpecLimits, YamlNestingIsLimitedWithALocation) {
  EXPECT_EQ(loadErrors(nested(spec::kMaxYamlDepth)).find("nested"), std::string::npos);
  // The first collection too deep: the 31st '[' (column 6 is the first).
  EXPECT_EQ(firstLine(loadErrors(nested(spec::kMaxYamlDepth + 1))),
            "t.yaml:3:36: error: YAML nested more than 32 levels deep");
}

TEST(SpecLimits, TenThousandOpenBracketsOfTheFuzzer) {
  // yaml-cpp's own depth guard said "invalid YAML: bad file" at the end of the input.
  // Unclosed, yaml-cpp reads each '[' as a list inside a one-entry mapping: two levels each.
  auto start = std::chrono::steady_clock::now();
  std::string err = loadErrors("op: t\ninputs:\n  x: " + std::string(10000, '[') + "\n");
  EXPECT_EQ(firstLine(err), "t.yaml:3:21: error: YAML nested more than 32 levels deep");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(SpecLimits, DeepBlockNestingIsLocatedToo) {
  std::string text = "op: t\n" + kSpecBody + "doc:\n";
  for (int i = 1; i <= 40; ++i)
    text += std::string(2 * i, ' ') + "-\n";
  // Level 1 is the top level; the list under `doc` is level 2; the 32nd '-' (line 38, after
  // 64 spaces) opens level 33.
  EXPECT_EQ(firstLine(loadErrors(text)),
            "t.yaml:38:65: error: YAML nested more than 32 levels deep");
}

TEST(SpecLimits, OnlyOneUtf8Document) {
  EXPECT_EQ(firstLine(loadErrors("op: t\n" + kSpecBody + "---\nop: u\n")),
            "t.yaml:6:1: error: a second YAML document; the file must hold only one");
  // UTF-16 (yaml-cpp would decode it, and every column would be wrong).
  std::string utf16 = "\xff\xfe";
  for (char c : "op: t\n" + kSpecBody)
    utf16 += std::string{c, '\0'};
  EXPECT_EQ(firstLine(loadErrors(utf16)),
            "t.yaml:1:1: error: the file is not UTF-8 text (byte 0xff)");
  EXPECT_EQ(firstLine(loadErrors("op: t\n" + kSpecBody + "doc: caf\xe9\n")),
            "t.yaml:6:9: error: the file is not UTF-8 text (byte 0xe9)");
  EXPECT_EQ(firstLine(loadErrors("op: t\n" + kSpecBody + "doc: a\0b\n"s)),
            "t.yaml:6:7: error: the file is not UTF-8 text (byte 0x00)");
  EXPECT_EQ(loadErrors("op: t\n" + kSpecBody + "doc: caf\xc3\xa9 \xe2\x88\x9a\n"), "");
}

TEST(SpecLimits, IntDefaultsStayExact) {
  auto spec = [](const std::string& value) {
    return "op: t\n" + kSpecBody + "attrs:\n  k: {type: int, default: " + value + "}\n";
  };
  EXPECT_EQ(loadErrors(spec("9007199254740992")), "");
  EXPECT_EQ(loadErrors(spec("-9007199254740992")), "");
  EXPECT_EQ(firstLine(loadErrors(spec("9007199254740994"))),
            "t.yaml:7:27: error: default '9007199254740994' of attr 'k' is out of range; an int "
            "default is at most 2^53 (9007199254740992) in magnitude");
}

// --- the primitive library ----------------------------------------------------------------

TEST(PrimitiveLibraryFile, ReadThroughTheBoundedReader) {
  TempDir dir;
  std::ostringstream out;
  Diagnostics diags(out);
  EXPECT_FALSE(prims::PrimitiveLibrary::load(dir.path().string(), diags));
  EXPECT_EQ(out.str(), dir.path().string() + ": error: '" + dir.path().string() +
                           "' is a directory, not a regular file\n");
}

TEST(PrimitiveLibraryFile, NestingIsLimitedWithALocation) {
  TempDir dir;
  std::string lib = dir.file("primitives.yaml",
                             "- name: f(x)\n  eval: x\n  grad: " + std::string(40, '{') + "\n");
  std::ostringstream out;
  Diagnostics diags(out);
  EXPECT_FALSE(prims::PrimitiveLibrary::load(lib, diags));
  // The list, an entry and 31 braces from column 9 on: the 31st (column 39) is level 33.
  EXPECT_EQ(firstLine(out.str()), lib + ":3:39: error: YAML nested more than 32 levels deep");
}

} // namespace
} // namespace fusegen
