"""fusegen from Python: from a spec to callable ops without the shell.

    import fusegen
    ops = fusegen.load("specs/my_op.yaml")        # generate, build (cached), import
    y = ops.my_op(x, weight)

    ops = fusegen.load_inline('''
    op: scaled_tanh
    inputs: {x: [..., D]}
    attrs: {scale: {type: float, default: 2.0}}
    outputs: {y: tanh(x) * scale}
    ''')

As torch.utils.cpp_extension.load does, `load` builds into a cache directory
(FUSEGEN_CACHE_DIR, else ~/.cache/fusegen; `build_directory` to choose) and returns the imported
module; a second call with the same specs returns at once (the build key of `fusegen --build`:
nothing is recompiled when nothing changed). The package and op namespace are `name`
(torch.ops.<name>.<op>): loading changed specs under a name already loaded in this process
gives `<name>_v1`, `<name>_v2`, ... since torch cannot register an op twice.

A spec with errors raises SpecError, whose message is fusegen's located diagnostics
(`file:line:col: error: ...`, the source line and a caret); a failed build raises BuildError
with the end of the compiler's output. The fusegen binary used is $FUSEGEN, else the one
installed with this package (the wheel, which finds the templates beside it), else `fusegen` on PATH.
"""
import hashlib
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, Optional, Sequence, Tuple, Union

__all__ = ["load", "load_inline", "SpecError", "BuildError", "binary"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_DIAGNOSTIC = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|note): "
                         r"(?P<message>.*)$")


class SpecError(ValueError):
    """A spec fusegen rejected. str(e) is fusegen's report; `errors` lists the located errors
    as (file, line, column, message)."""

    def __init__(self, report: str):
        super().__init__(report)
        self.report = report
        self.errors = [(m["file"], int(m["line"]), int(m["col"]), m["message"])
                       for m in map(_DIAGNOSTIC.match, report.splitlines())
                       if m and m["sev"] == "error"]


class BuildError(RuntimeError):
    """The generated package did not build (or fusegen failed otherwise): the message ends with
    fusegen's report (the compiler's last lines, the generated file and spec of the first
    error, the log's path)."""


def binary() -> str:
    """The fusegen executable: $FUSEGEN, else the wheel's, else `fusegen` on PATH."""
    candidates = [os.environ.get("FUSEGEN"), os.path.join(_HERE, "bin", "fusegen")]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which("fusegen")
    # (the wheel's `fusegen` script runs this package again; the binary is what is wanted)
    if found and not _is_entry_script(found):
        return found
    raise BuildError("fusegen: no fusegen executable: install the fusegen wheel "
                     "(scripts/build_wheel.sh), put fusegen on PATH, or set FUSEGEN")


def _is_entry_script(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def _cache_root() -> str:
    return os.environ.get("FUSEGEN_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "fusegen")


_LOADED: Dict[str, Tuple[str, object]] = {}  # name as asked -> (content key, module)
_TAKEN: set = set()  # package names imported by load in this process


def _identifier(text: str) -> str:
    name = re.sub(r"\W", "_", text)
    return name if name and not name[0].isdigit() else "_" + name


def load(specs: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]], *,
         name: Optional[str] = None, build_directory: Optional[str] = None,
         cpu_only: Optional[bool] = None, arch: Optional[str] = None,
         jobs: Optional[int] = None, verbose: bool = False):
    """Generates the ops of `specs` (a spec file or a list of them) into one package, builds it
    for the torch of this Python and imports it; returns the module (`module.<op>(...)`).

    name: the package and op namespace (torch.ops.<name>.<op>); default `<first spec>_ops`.
    build_directory: where the package is generated and built; default the cache.
    cpu_only: no CUDA kernels; default when torch sees no GPU. arch: as `fusegen --arch`.
    verbose: every line fusegen prints; otherwise only the build's progress lines."""
    paths = [os.fspath(specs)] if isinstance(specs, (str, os.PathLike)) else [os.fspath(s) for s in specs]
    if not paths:
        raise ValueError("fusegen.load: no spec given")
    texts = []
    for p in paths:
        with open(p, "rb") as f:
            texts.append(f.read())
    if name is None:
        name = _identifier(os.path.splitext(os.path.basename(paths[0]))[0]) + "_ops"
    return _load(paths, texts, name, build_directory, cpu_only, arch, jobs, verbose)


def load_inline(spec: str, *, name: Optional[str] = None, build_directory: Optional[str] = None,
                cpu_only: Optional[bool] = None, arch: Optional[str] = None,
                jobs: Optional[int] = None, verbose: bool = False):
    """load() of a spec given as YAML text. Its diagnostics name the file it is written to in
    the cache, `<op>.yaml` (the op as the text names it)."""
    found = re.search(r"^op:\s*['\"]?(\w+)", spec, re.M)
    op = found.group(1) if found else "inline"
    if name is None:
        name = _identifier(op) + "_ops"
    key = hashlib.sha256(spec.encode()).hexdigest()[:16]
    directory = os.path.join(_cache_root(), "inline", f"{op}-{key}")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{op}.yaml")
    if not os.path.exists(path):
        with tempfile.NamedTemporaryFile("w", dir=directory, delete=False, suffix=".tmp") as f:
            f.write(spec)
        os.replace(f.name, path)
    return _load([path], [spec.encode()], name, build_directory, cpu_only, arch, jobs, verbose)


def _load(paths, texts, name, build_directory, cpu_only, arch, jobs, verbose):
    key = hashlib.sha256(b"\0".join(texts) + name.encode() + _fusegen_version().encode()).hexdigest()[:16]
    if name in _LOADED and _LOADED[name][0] == key:
        return _LOADED[name][1]
    package, version = name, 0
    while package in _TAKEN or (package in sys.modules and name not in _LOADED):
        version += 1
        package = f"{name}_v{version}"
    directory = build_directory or os.path.join(_cache_root(), "load", f"{package}-{key}")
    if cpu_only is None:
        import torch
        cpu_only = not torch.cuda.is_available()
    command = [binary(), *paths, "-o", directory, "--package", package, "--namespace", package,
               "--build", "--python", sys.executable]
    if cpu_only:
        command.append("--cpu-only")
    if arch:
        command += ["--arch", arch]
    if jobs:
        command += ["-j", str(jobs)]
    _run(command, verbose)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    importlib.invalidate_caches()
    module = importlib.import_module(package)
    _LOADED[name] = (key, module)
    _TAKEN.add(package)
    return module


def _fusegen_version() -> str:
    return subprocess.run([binary(), "--version"], capture_output=True,
                          text=True).stdout.strip()


def _run(command, verbose: bool) -> None:
    """Runs fusegen, showing its progress as the CLI does (every line with verbose; otherwise
    the build's lines, not the list of files written); raises SpecError or BuildError."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    shown = []
    for line in process.stdout:
        if verbose or line.startswith(("fusegen", "  ")):
            shown.append(line)
            sys.stdout.write(line)
            sys.stdout.flush()
    err = process.stderr.read()
    if process.wait() == 0:
        sys.stderr.write(err)  # (warnings)
        return
    if any(_DIAGNOSTIC.match(line) for line in err.splitlines()):
        raise SpecError(err.rstrip("\n"))
    raise BuildError("".join(["fusegen failed: ", " ".join(command), "\n", *shown[-40:], err])
                     .rstrip("\n"))
