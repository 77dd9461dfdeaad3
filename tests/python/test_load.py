"""fusegen's Python API (tools/fusegen/python/fusegen): load, load_inline, their errors, and
`python -m fusegen`. Run by ctest (python.load) with FUSEGEN (the built fusegen),
FUSEGEN_TEMPLATES and PYTHONPATH set; builds CPU kernels only, into the session's cache
(conftest.py)."""
import os
import subprocess
import sys

import pytest
import torch

import fusegen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCALED_TANH = """
op: scaled_tanh
doc: tanh(x) times a scale
inputs: {x: [..., D]}
attrs: {scale: {type: float, default: 2.0}}
outputs: {y: tanh(x) * scale}
"""


def test_load_builds_imports_and_caches(capfd):
    ops = fusegen.load(os.path.join(ROOT, "specs", "bias_gelu.yaml"), cpu_only=True)
    assert ops.__name__ == "bias_gelu_ops"
    assert "fusegen: built bias_gelu_ops" in capfd.readouterr().out  # progress, as the CLI's
    x = torch.randn(3, 5, 16, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(16, dtype=torch.float64)
    want = torch.nn.functional.gelu(x + bias, approximate="tanh")
    torch.testing.assert_close(ops.bias_gelu(x, bias), want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(torch.ops.bias_gelu_ops.bias_gelu(x, bias), want, rtol=1e-12,
                               atol=1e-12)
    (g,) = torch.autograd.grad(ops.bias_gelu(x, bias).sum(), x)
    (w,) = torch.autograd.grad(want.sum(), x)
    torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    assert fusegen.load(os.path.join(ROOT, "specs", "bias_gelu.yaml"), cpu_only=True) is ops


def test_a_second_process_finds_the_build_in_the_cache(cache):
    fusegen.load(os.path.join(ROOT, "specs", "sigmoid.yaml"), cpu_only=True)
    code = ("import fusegen; m = fusegen.load(%r, cpu_only=True); print(m.__name__)"
            % os.path.join(ROOT, "specs", "sigmoid.yaml"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dict(os.environ, FUSEGEN_CACHE_DIR=cache))
    assert result.returncode == 0, result.stderr
    assert "is up to date" in result.stdout and "compiling" not in result.stdout, result.stdout


def test_load_of_several_specs_is_one_package():
    ops = fusegen.load([os.path.join(ROOT, "specs", s) for s in ("mul.yaml", "relu_squared.yaml")],
                       name="two_ops", cpu_only=True)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(ops.mul(a, b), a * b)
    torch.testing.assert_close(ops.relu_squared(a), torch.relu(a) ** 2)
    assert ops.OPS == ["mul", "relu_squared"]


def test_load_inline_and_its_help():
    ops = fusegen.load_inline(SCALED_TANH, cpu_only=True)
    x = torch.randn(2, 8)
    torch.testing.assert_close(ops.scaled_tanh(x), torch.tanh(x) * 2.0)
    torch.testing.assert_close(ops.scaled_tanh(x, scale=0.5), torch.tanh(x) * 0.5)
    assert "tanh(x) * scale" in ops.scaled_tanh.__doc__
    assert torch.ops.scaled_tanh_ops.scaled_tanh.default is not None


def test_a_changed_spec_under_a_loaded_name_gets_a_new_version():
    first = fusegen.load_inline(SCALED_TANH, name="versioned", cpu_only=True)
    second = fusegen.load_inline(SCALED_TANH.replace("default: 2.0", "default: 3.0"),
                                 name="versioned", cpu_only=True)
    assert (first.__name__, second.__name__) == ("versioned", "versioned_v1")
    x = torch.randn(2, 8)
    torch.testing.assert_close(first.scaled_tanh(x) * 1.5, second.scaled_tanh(x))
    assert fusegen.load_inline(SCALED_TANH.replace("default: 2.0", "default: 3.0"),
                               name="versioned", cpu_only=True) is second


def test_a_bad_spec_raises_spec_error_with_located_diagnostics():
    bad = SCALED_TANH.replace("tanh(x) * scale", "tanhh(x) * scale")
    with pytest.raises(fusegen.SpecError) as raised:
        fusegen.load_inline(bad, name="bad_ops", cpu_only=True)
    (file, line, col, message), = raised.value.errors
    assert file.endswith("scaled_tanh.yaml") and (line, col) == (6, 14)
    assert message == "unknown function 'tanhh'"
    report = str(raised.value)
    assert "outputs: {y: tanhh(x) * scale}\n             ^" in report
    assert "did you mean 'tanh'?" in report
    assert "bad_ops" not in sys.modules


def test_another_failure_raises_build_error(tmp_path):
    fusegen.load_inline(SCALED_TANH, name="here_ops", build_directory=str(tmp_path),
                        cpu_only=True)
    with pytest.raises(fusegen.BuildError, match="holds the package 'here_ops'"):
        fusegen.load_inline(SCALED_TANH, name="there_ops", build_directory=str(tmp_path),
                            cpu_only=True)


def test_python_dash_m_fusegen_runs_the_cli(tmp_path):
    run = lambda *args: subprocess.run([sys.executable, "-m", "fusegen", *args],
                                       capture_output=True, text=True)
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("fusegen "), version
    spec = tmp_path / "s.yaml"
    spec.write_text(SCALED_TANH)
    checked = run("check", str(spec))
    assert checked.returncode == 0 and "1 spec(s) without errors" in checked.stdout, checked
    spec.write_text(SCALED_TANH.replace("tanh(x)", "tanhh(x)"))
    checked = run("check", str(spec))
    assert checked.returncode == 1 and f"{spec}:6:14: error: unknown function" in checked.stderr
