#!/usr/bin/env python3
"""Runs fusegen's error catalog: one bad spec per diagnostic, each stating what it expects.

Usage (from anywhere; cases are run from the repository root):

    python3 tests/errors/check_errors.py build/fusegen                 # every tests/errors/*.yaml
    python3 tests/errors/check_errors.py build/fusegen tests/errors/unknown_function.yaml ...

A case is a YAML spec whose comment lines state the expectation, lit/FileCheck style:

    # EXPECT: tests/errors/unknown_function.yaml:9:6: error: unknown function 'gelu2'
    # EXPECT-NOTE: tests/errors/unknown_function.yaml:9:6: note: did you mean 'gelu'?
    # EXPECT-WARNING: tests/errors/x.yaml:9:3: warning: let 't' is not used by any output
    # ARGS: --templates tests/errors/library/missing_torch

The case runs as `FUSEGEN [ARGS...] CASE -o FRESH_TEMP_DIR` from the repository root, with CASE
the path relative to the root. It passes when:
  * fusegen exits with code 1 (not 0, not a crash);
  * the first line of stderr is the first EXPECT line;
  * the error lines of stderr are exactly the EXPECT lines, in order (so a case with two
    EXPECT lines checks that both independent errors are reported);
  * every EXPECT-NOTE / EXPECT-WARNING line appears, and all EXPECT* lines appear in the order
    the case lists them;
  * each expected diagnostic with a location is followed by the source line it names (read
    from that file) and a caret line: the line's characters before the column as spaces (tabs
    kept), then '^';
  * the output directory is absent or empty afterwards: nothing was written.
Prints one PASS/FAIL line per case (details indented under a FAIL) and ends with the summary
line `N passed, M failed`; exits 1 when any case failed.
"""
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CATALOG = os.path.join("tests", "errors")
TIMEOUT_S = 60

DIRECTIVE = re.compile(r"^#\s*(EXPECT|EXPECT-NOTE|EXPECT-WARNING|ARGS):\s?(.*?)\s*$")
SEVERITY = {"EXPECT": "error", "EXPECT-NOTE": "note", "EXPECT-WARNING": "warning"}
# `path:line:col: severity: message` or, without a location, `path: severity: message`.
DIAG = re.compile(
    r"^(?P<file>\S(?:.*?\S)?)(?::(?P<line>\d+):(?P<col>\d+))?: (?P<sev>error|warning|note): ")


class Case:
    def __init__(self, path):
        self.path = path  # relative to ROOT, as passed to fusegen
        self.expects = []  # (severity, line) in file order
        self.args = []
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            for line in f:
                m = DIRECTIVE.match(line.rstrip("\n"))
                if not m:
                    continue
                if m.group(1) == "ARGS":
                    self.args += shlex.split(m.group(2))
                else:
                    self.expects.append((SEVERITY[m.group(1)], m.group(2)))


def source_lines(path, cache={}):
    """The lines of a file as Diagnostics splits them (getline, trailing '\\r' dropped)."""
    if path not in cache:
        try:
            with open(os.path.join(ROOT, path), encoding="utf-8", newline="") as f:
                text = f.read()
        except OSError:
            cache[path] = None
        else:
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            cache[path] = [l[:-1] if l.endswith("\r") else l for l in lines]
    return cache[path]


def check_excerpt(expect, stderr_lines, index, problems):
    """The source line and caret that must follow the diagnostic at stderr_lines[index]."""
    m = DIAG.match(expect)
    if not m or not m.group("line"):
        return  # no location: nothing to quote
    path, line, col = m.group("file"), int(m.group("line")), int(m.group("col"))
    lines = source_lines(path)
    if lines is None:
        problems.append(f"cannot read {path}, named by: {expect}")
        return
    if not 1 <= line <= len(lines):
        problems.append(f"line {line} is outside {path} ({len(lines)} lines): {expect}")
        return
    text = lines[line - 1]
    if col < 1 or col - 1 > len(text):
        problems.append(f"column {col} is past the end of line {line} of {path} "
                        f"({len(text)} characters): {expect}")
        return
    caret = "".join("\t" if c == "\t" else " " for c in text[:col - 1]) + "^"
    got = stderr_lines[index + 1:index + 3] + ["<end of stderr>"] * 2
    if got[0] != text:
        problems.append(f"after `{expect}` expected the source line\n    {text!r}\n  got\n    {got[0]!r}")
    elif got[1] != caret:
        problems.append(f"after `{expect}` expected the caret line\n    {caret!r}\n  got\n    {got[1]!r}")


def run_case(fusegen, case):
    """Returns a list of problems (empty when the case passes)."""
    problems = []
    if not case.expects or case.expects[0][0] != "error":
        return [f"{case.path} has no `# EXPECT:` line before its notes/warnings"]
    tmp = tempfile.mkdtemp(prefix="fusegen-errors-")
    out_dir = os.path.join(tmp, "out")
    cmd = [fusegen, *case.args, case.path, "-o", out_dir]
    try:
        try:
            proc = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return [f"timed out after {TIMEOUT_S}s: {shlex.join(cmd)}"]
        written = []
        if os.path.isdir(out_dir):
            for dirpath, _, files in os.walk(out_dir):
                written += [os.path.relpath(os.path.join(dirpath, f), out_dir) for f in files]
        elif os.path.exists(out_dir):
            written.append("(the output path itself, as a file)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    lines = proc.stderr.splitlines()
    if proc.returncode < 0:
        problems.append(f"fusegen crashed (signal {-proc.returncode})")
    elif proc.returncode != 1:
        problems.append(f"exit code {proc.returncode}, expected 1")
    if written:
        problems.append("files were written despite the error: " + ", ".join(sorted(written)))

    first = case.expects[0][1]
    if not lines or lines[0] != first:
        problems.append(f"first line of stderr\n    {lines[0] if lines else '<empty>'!r}\n"
                        f"  expected\n    {first!r}")

    # The error lines, exactly and in order.
    want_errors = [l for sev, l in case.expects if sev == "error"]
    got_errors = [l for l in lines if (m := DIAG.match(l)) and m.group("sev") == "error"]
    if got_errors != want_errors:
        diff = difflib.unified_diff(want_errors, got_errors, "expected errors", "reported errors",
                                    lineterm="", n=len(want_errors) + len(got_errors))
        problems.append("the errors differ:\n" + "\n".join("    " + d for d in diff))

    # Every expected line (notes and warnings too) appears, in the listed order, each followed
    # by its source excerpt.
    pos = 0
    for sev, expect in case.expects:
        try:
            index = lines.index(expect, pos)
        except ValueError:
            if expect in lines:
                problems.append(f"out of order (expected after the previous line): {expect}")
            elif sev != "error":  # missing errors are in the diff above
                problems.append(f"missing {sev}: {expect}")
            continue
        check_excerpt(expect, lines, index, problems)
        pos = index + 1

    if problems:
        problems.append("command: " + shlex.join(cmd) + "\n  stderr:\n" +
                        "\n".join("    | " + l for l in lines))
    return problems


def main(argv):
    if len(argv) < 2:
        print(__doc__.split("A case is")[0].strip(), file=sys.stderr)
        return 2
    fusegen = os.path.abspath(argv[1])
    if argv[2:]:
        paths = [os.path.relpath(os.path.abspath(p), ROOT) for p in argv[2:]]
    else:
        paths = sorted(os.path.join(CATALOG, f) for f in os.listdir(os.path.join(ROOT, CATALOG))
                       if f.endswith(".yaml"))
    passed = failed = 0
    for path in paths:
        path = path.replace(os.sep, "/")
        try:
            problems = run_case(fusegen, Case(path))
        except OSError as e:
            problems = [str(e)]
        if problems:
            failed += 1
            print(f"FAIL {path}")
            for p in problems:
                print("  " + p)
        else:
            passed += 1
            print(f"PASS {path}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
