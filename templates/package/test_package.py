"""Tests of the package as a whole: it refuses to load under a torch other than the one it
was built for, with a message that says what to do."""
import subprocess
import sys


def _import_with_torch_version(version: str) -> subprocess.CompletedProcess:
    code = f"import torch; torch.__version__ = {version!r}; import fusegen_ops"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_loads_under_the_torch_it_was_built_for():
    import torch

    result = _import_with_torch_version(torch.__version__)
    assert result.returncode == 0, result.stderr


def test_refuses_another_torch_version():
    result = _import_with_torch_version("0.0.1+other")
    assert result.returncode != 0
    assert "fusegen_ops was built for torch" in result.stderr
    assert "but torch 0.0.1+other" in result.stderr
    assert "fusegen --build --install" in result.stderr
