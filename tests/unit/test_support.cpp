// Tests of the support layer: Diagnostics formatting (every user error goes through it, so
// the file:line:col, the quoted line and the caret must be exact), closestMatch (the
// "did you mean" notes), formatDouble, and FileWriter (write-if-changed keeps incremental
// builds incremental; stale-file removal must delete only files the generator made; a failure
// at any step must leave the output tree exactly as it was).
#include "support/Diagnostics.h"
#include "support/FileWriter.h"
#include "support/Format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

namespace fusegen {
namespace {

namespace fs = std::filesystem;

TEST(Diagnostics, ErrorWithSourceLineAndCaret) {
  std::ostringstream out;
  Diagnostics diags(out);
  diags.addFile("a.yaml", "op: t\noutputs:\n  y: x + q\n");
  diags.error(SourceLoc{"a.yaml", 3, 10}, "unknown name 'q'");
  EXPECT_EQ(out.str(), "a.yaml:3:10: error: unknown name 'q'\n"
                       "  y: x + q\n"
                       "         ^\n");
  EXPECT_EQ(diags.errorCount(), 1);
}

TEST(Diagnostics, CaretKeepsTabsSoItLinesUp) {
  std::ostringstream out;
  Diagnostics diags(out);
  diags.addFile("t.txt", "first\na\tb\tc\n");
  diags.error(SourceLoc{"t.txt", 2, 5}, "here");
  EXPECT_EQ(out.str(), "t.txt:2:5: error: here\na\tb\tc\n \t \t^\n");
}

TEST(Diagnostics, CaretAtFirstColumnAndCarriageReturnsStripped) {
  std::ostringstream out;
  Diagnostics diags(out);
  diags.addFile("w.yaml", "abc\r\ndef\r\n");
  diags.error(SourceLoc{"w.yaml", 2, 1}, "m");
  EXPECT_EQ(out.str(), "w.yaml:2:1: error: m\ndef\n^\n");
}

TEST(Diagnostics, NoteAndWarningDoNotCountAsErrors) {
  std::ostringstream out;
  Diagnostics diags(out);
  diags.addFile("f", "hello world\n");
  diags.warning(SourceLoc{"f", 1, 7}, "w");
  diags.note(SourceLoc{"f", 1, 1}, "n");
  EXPECT_EQ(diags.errorCount(), 0);
  EXPECT_EQ(out.str(), "f:1:7: warning: w\nhello world\n      ^\n"
                       "f:1:1: note: n\nhello world\n^\n");
  diags.error(SourceLoc{"f", 1, 2}, "e1");
  diags.error(SourceLoc{"f", 1, 3}, "e2");
  EXPECT_EQ(diags.errorCount(), 2);
}

TEST(Diagnostics, FatalReportsCountsAndThrows) {
  std::ostringstream out;
  Diagnostics diags(out);
  EXPECT_THROW(diags.fatal(SourceLoc{"f", 2, 3}, "boom"), FatalError);
  EXPECT_EQ(diags.errorCount(), 1);
  EXPECT_EQ(out.str(), "f:2:3: error: boom\n"); // file not registered: no excerpt
}

TEST(Diagnostics, LocationsWithoutLineOrFile) {
  std::ostringstream out;
  Diagnostics diags(out);
  diags.addFile("f", "only line\n");
  diags.error(SourceLoc{"f", 0, 0}, "cannot read");
  diags.error(SourceLoc{}, "no file");
  diags.error(SourceLoc{"f", 5, 1}, "past the end"); // line beyond the file: no excerpt
  EXPECT_EQ(out.str(), "f: error: cannot read\nerror: no file\nf:5:1: error: past the end\n");
  EXPECT_EQ(diags.errorCount(), 3);
}

TEST(Diagnostics, CaretPastTheEndOfTheLine) {
  std::ostringstream out;
  Diagnostics diags(out);
  diags.addFile("f", "ab\n");
  diags.error(SourceLoc{"f", 1, 3}, "expected an expression");
  EXPECT_EQ(out.str(), "f:1:3: error: expected an expression\nab\n  ^\n");
}

TEST(ClosestMatch, FindsTyposWithinTheThreshold) {
  std::vector<std::string> names = {"gelu", "sigmoid", "softplus", "tanh", "bias"};
  EXPECT_EQ(closestMatch("sigmiod", names), "sigmoid");
  EXPECT_EQ(closestMatch("softpuls", names), "softplus");
  EXPECT_EQ(closestMatch("tan", names), "tanh");
  EXPECT_EQ(closestMatch("bais", names), "bias");
  EXPECT_EQ(closestMatch("gelu", names), "gelu");
}

TEST(ClosestMatch, RejectsDistantNames) {
  std::vector<std::string> names = {"gelu", "sigmoid", "softplus"};
  EXPECT_EQ(closestMatch("xyzzy", names), "");
  EXPECT_EQ(closestMatch("abc", {}), "");
  // For short names up to 2 edits are accepted, never 3.
  EXPECT_EQ(closestMatch("ab", {"xyz"}), "");
  EXPECT_EQ(closestMatch("ab", {"ba"}), "ba");
  // A name replaced whole by one sharing no letter with it is not suggested (a let 'z' read
  // before its definition is no misspelling of D).
  EXPECT_EQ(closestMatch("z", {"D", "x"}), "");
  EXPECT_EQ(closestMatch("xy", {"D"}), "");
  // Longer names allow about a third of their length: 9 letters -> up to 3 edits.
  EXPECT_EQ(closestMatch("abcdefghi", {"abcdefxyz"}), "abcdefxyz");
  EXPECT_EQ(closestMatch("abcdefghi", {"abcdewxyz"}), "");
}

TEST(ClosestMatch, PrefersTheClosestThenTheFirst) {
  EXPECT_EQ(closestMatch("relu", {"gelu", "relu6", "relu"}), "relu");
  EXPECT_EQ(closestMatch("xelu", {"gelu", "relu"}), "gelu");
}

TEST(FormatDouble, ShortestRoundTripWithAFloatingPointMarker) {
  EXPECT_EQ(formatDouble(0.5), "0.5");
  EXPECT_EQ(formatDouble(1.0), "1.0");
  EXPECT_EQ(formatDouble(0.0), "0.0");
  EXPECT_EQ(formatDouble(-3.0), "-3.0");
  EXPECT_EQ(formatDouble(1e-6), "1e-06");
  EXPECT_EQ(formatDouble(0.1), "0.1");
  for (double v : {0.1, 1.0 / 3, 0.70710678118654752, 1e300, 5e-324, 123456789.0, -2.5e-8}) {
    std::string s = formatDouble(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
    EXPECT_NE(s.find_first_of(".e"), std::string::npos) << s;
  }
}

// ---- FileWriter ----

class FileWriterTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::random_device rd;
    root_ = fs::temp_directory_path() /
            ("fusegen_unit_" + std::to_string(rd()) + "_" + std::to_string(rd()));
    fs::create_directories(root_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::string root() const { return root_.string(); }
  fs::path at(const std::string& rel) const { return root_ / rel; }
  void put(const std::string& rel, const std::string& text) const {
    fs::create_directories(at(rel).parent_path());
    std::ofstream(at(rel), std::ios::binary) << text;
  }
  // Files under root, relative, sorted.
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(root_))
      if (e.is_regular_file()) out.push_back(fs::relative(e.path(), root_).generic_string());
    std::sort(out.begin(), out.end());
    return out;
  }
  // Every path under root (relative) with what is there: a directory, or a file's
  // modification time and contents.
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(root_))
      out[fs::relative(e.path(), root_).generic_string()] =
          e.is_directory() ? "<dir>"
                           : std::to_string(e.last_write_time().time_since_epoch().count()) + " " +
                                 readFile(e.path().string());
    return out;
  }
  // Temporaries and backups left under root.
  std::vector<std::string> leftovers() const {
    std::vector<std::string> out;
    for (const std::string& f : listing())
      if (f.find(".fusegen-") != std::string::npos) out.push_back(f);
    return out;
  }
  // Ages every file by a day, so a rewrite (rather than a restore) shows in its timestamp.
  void ageAll() const {
    for (const auto& e : fs::recursive_directory_iterator(root_))
      if (e.is_regular_file())
        fs::last_write_time(e.path(), e.last_write_time() - std::chrono::hours(24));
  }
  std::string norm(const std::string& rel) const { return at(rel).lexically_normal().string(); }

  fs::path root_;
};

TEST_F(FileWriterTest, CreatesFilesAndDirectories) {
  WriteReport r =
      writeFiles(root(), {{"op/a.h", "// @generated\nint a;\n"}, {"top.txt", "t"}}, {"op"});
  EXPECT_EQ(r.written, (std::vector<std::string>{"op/a.h", "top.txt"}));
  EXPECT_TRUE(r.unchanged.empty());
  EXPECT_TRUE(r.removed.empty());
  EXPECT_EQ(readFile(at("op/a.h").string()), "// @generated\nint a;\n");
  EXPECT_EQ(readFile(at("top.txt").string()), "t");
  EXPECT_EQ(listing(), (std::vector<std::string>{"op/a.h", "top.txt"})); // no temporaries left
}

TEST_F(FileWriterTest, UnchangedFilesAreNotTouched) {
  writeFiles(root(), {{"op/a.h", "same"}, {"op/b.h", "old"}}, {});
  // Age both files so a rewrite would be visible in the timestamp.
  auto old = fs::last_write_time(at("op/a.h")) - std::chrono::hours(24);
  fs::last_write_time(at("op/a.h"), old);
  fs::last_write_time(at("op/b.h"), old);
  WriteReport r = writeFiles(root(), {{"op/a.h", "same"}, {"op/b.h", "new"}}, {});
  EXPECT_EQ(r.unchanged, std::vector<std::string>{"op/a.h"});
  EXPECT_EQ(r.written, std::vector<std::string>{"op/b.h"});
  EXPECT_EQ(fs::last_write_time(at("op/a.h")), old);
  EXPECT_NE(fs::last_write_time(at("op/b.h")), old);
  EXPECT_EQ(readFile(at("op/b.h").string()), "new");
  // Same size, different content is still a change.
  r = writeFiles(root(), {{"op/a.h", "SAME"}}, {});
  EXPECT_EQ(r.written, std::vector<std::string>{"op/a.h"});
  EXPECT_EQ(readFile(at("op/a.h").string()), "SAME");
}

TEST_F(FileWriterTest, RemovesOnlyStaleGeneratedFilesInOwnedDirs) {
  put("op/stale.py", "# @generated by fusegen\nold = 1\n");
  put("op/notes.txt", "my own notes, not generated\n");
  put("op/late_stamp.txt", std::string(300, 'x') + "@generated\n"); // stamp not in the head
  put("other/stale.py", "# @generated by fusegen\n");
  put("op/sub/deep.py", "# @generated\n");
  WriteReport r =
      writeFiles(root(), {{"op/keep.py", "# @generated by fusegen\nnew = 1\n"}}, {"op"});
  EXPECT_EQ(r.removed, std::vector<std::string>{"op/stale.py"});
  EXPECT_EQ(r.written, std::vector<std::string>{"op/keep.py"});
  EXPECT_FALSE(fs::exists(at("op/stale.py")));
  EXPECT_TRUE(fs::exists(at("op/notes.txt")));
  EXPECT_TRUE(fs::exists(at("op/late_stamp.txt")));
  EXPECT_TRUE(fs::exists(at("other/stale.py"))); // not an owned dir
  EXPECT_TRUE(fs::exists(at("op/keep.py")));
  EXPECT_EQ(listing(), (std::vector<std::string>{"op/keep.py", "op/late_stamp.txt", "op/notes.txt",
                                                 "op/sub/deep.py", "other/stale.py"}));
}

TEST_F(FileWriterTest, UnchangedGeneratedFileInOwnedDirIsKept) {
  writeFiles(root(), {{"op/a.py", "# @generated\n"}}, {"op"});
  WriteReport r = writeFiles(root(), {{"op/a.py", "# @generated\n"}}, {"op", "missing_dir"});
  EXPECT_EQ(r.unchanged, std::vector<std::string>{"op/a.py"});
  EXPECT_TRUE(r.removed.empty());
  EXPECT_TRUE(fs::exists(at("op/a.py")));
}

// Fails the k-th step (mkdir, write, close, backup, rename) for k = 0, 1, ... until a run
// gets through: after every failed run the tree must be exactly as before.
TEST_F(FileWriterTest, FailureAtAnyStepLeavesTheTreeAsItWas) {
  put("keep/same.txt", "same");
  put("keep/old.txt", "old");
  put("top.txt", "old top");
  put("op/stale.py", "# @generated\n");
  ageAll();
  const std::vector<GeneratedFile> batch = {
      {"keep/same.txt", "same"}, {"keep/old.txt", "new"},
      {"new/deep/a.h", "a"},     {"new/deep/b.h", "b"},
      {"new/c.h", "c"},          {"keep/added.txt", "added"},
      {"top.txt", "new top"},    {"op/fresh.py", "# @generated\n"}};
  const auto before = snapshot();
  std::set<std::string> stepsSeen;
  int failures = 0;
  bool succeeded = false;
  for (int k = 0; k < 100 && !succeeded; ++k) {
    int n = 0;
    auto failAtK = [&](const char* step, const fs::path& path) {
      stepsSeen.insert(step);
      if (n++ == k)
        throw std::runtime_error("injected: " + std::string(step) + " " + path.string());
    };
    try {
      WriteReport r = writeFiles(root(), batch, {"op"}, failAtK);
      succeeded = true;
      EXPECT_EQ(r.unchanged, std::vector<std::string>{"keep/same.txt"});
      EXPECT_EQ(r.removed, std::vector<std::string>{"op/stale.py"});
    } catch (const std::runtime_error& e) {
      ++failures;
      EXPECT_EQ(std::string(e.what()).rfind("injected: ", 0), 0u) << e.what();
      EXPECT_EQ(snapshot(), before) << "after failing step " << k << " (" << e.what() << ")";
      EXPECT_EQ(leftovers(), std::vector<std::string>{}) << "after failing step " << k;
    }
  }
  ASSERT_TRUE(succeeded);
  // 2 new directories, a write and a close per changed file (7), 2 backups, 7 renames.
  EXPECT_EQ(failures, 2 + 2 * 7 + 2 + 7);
  EXPECT_EQ(stepsSeen, (std::set<std::string>{"backup", "close", "mkdir", "rename", "write"}));
  EXPECT_EQ(listing(),
            (std::vector<std::string>{"keep/added.txt", "keep/old.txt", "keep/same.txt", "new/c.h",
                                      "new/deep/a.h", "new/deep/b.h", "op/fresh.py", "top.txt"}));
  for (const GeneratedFile& f : batch)
    EXPECT_EQ(readFile(at(f.path).string()), f.text) << f.path;
  EXPECT_EQ(snapshot().at("keep/same.txt"), before.at("keep/same.txt")); // not touched
}

TEST_F(FileWriterTest, TargetThatIsADirectoryFailsAndChangesNothing) {
  put("keep/old.txt", "old");
  fs::create_directories(at("pyproject.toml"));
  const auto before = snapshot();
  try {
    writeFiles(root(),
               {{"keep/old.txt", "new"}, {"new/a.h", "a"}, {"pyproject.toml", "[project]\n"}}, {});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot replace '" + norm("pyproject.toml") + "': it is a directory");
  }
  EXPECT_EQ(snapshot(), before);
}

TEST_F(FileWriterTest, ParentThatIsAFileFailsAndChangesNothing) {
  put("keep/old.txt", "old");
  put("blocker", "a file, not a directory");
  const auto before = snapshot();
  try {
    writeFiles(root(), {{"keep/old.txt", "new"}, {"new/a.h", "a"}, {"blocker/sub/b.h", "b"}}, {});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write '" + norm("blocker/sub/b.h") + "': '" +
                                         norm("blocker") + "' is not a directory");
  }
  EXPECT_EQ(snapshot(), before);
}

// "x" and "x/y" cannot both be files: the rename of "x" fails in the middle of the commit, after
// other files were already replaced or created.
TEST_F(FileWriterTest, RenameFailureInTheCommitRollsBack) {
  put("keep/old.txt", "old");
  ageAll();
  const auto before = snapshot();
  try {
    writeFiles(root(),
               {{"keep/old.txt", "new"}, {"new/a.h", "a"}, {"x", "file"}, {"x/y", "nested"}}, {});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cannot replace '" + norm("x") + "': ", 0), 0u)
        << e.what();
  }
  EXPECT_EQ(snapshot(), before);
}

TEST_F(FileWriterTest, ReadFileOfMissingFileThrows) {
  EXPECT_THROW(readFile(at("nope.txt").string()), std::runtime_error);
}

} // namespace
} // namespace fusegen
