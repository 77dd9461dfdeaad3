"""A module calling fusegen ops through torch.export.export and AOTInductor (issue #19): the
exported program holds the ops as torch.ops.<ns>.<op> calls (with a dynamic batch dim),
aoti_compile_and_package compiles it, and a fresh process that imports the ops' package runs
the .pt2 package. CPU only (CI has no GPU). Run by ctest (python.load) with FUSEGEN set."""
import os
import subprocess
import sys
import textwrap

import torch

import fusegen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPECS = [os.path.join(ROOT, "specs", s) for s in ("bias_gelu.yaml", "rmsnorm.yaml")]


class Block(torch.nn.Module):
    def __init__(self, ops, width):
        super().__init__()
        self.ops = ops
        self.up = torch.nn.Linear(width, width)
        self.bias = torch.nn.Parameter(torch.randn(width))
        self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(width))

    def forward(self, x):
        return self.ops.rmsnorm(self.ops.bias_gelu(self.up(x), self.bias), self.weight, eps=1e-5)


def eager(block, x):
    h = torch.nn.functional.gelu(block.up(x) + block.bias, approximate="tanh")
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * block.weight


def test_export_and_aoti_package_run_in_a_fresh_process(tmp_path):
    ops = fusegen.load(SPECS, name="export_ops", cpu_only=True)
    torch.manual_seed(0)
    block = Block(ops, 32).eval()
    x = torch.randn(6, 32)
    batch = torch.export.Dim("batch", min=2, max=1024)
    program = torch.export.export(block, (x,), dynamic_shapes={"x": {0: batch}})
    calls = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert "export_ops.bias_gelu.default" in calls and "export_ops.rmsnorm.default" in calls, calls
    with torch.no_grad():
        torch.testing.assert_close(program.module()(x), eager(block, x))
        package = torch._inductor.aoti_compile_and_package(
            program, package_path=str(tmp_path / "block.pt2"))
        x2 = torch.randn(17, 32)  # another batch size: the dim is dynamic
        torch.save({"x": x2, "want": eager(block, x2)}, tmp_path / "io.pt")
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {os.path.dirname(os.path.dirname(ops.__file__))!r})
        import export_ops  # registers torch.ops.export_ops.*, which the package calls
        io = torch.load({str(tmp_path / "io.pt")!r})
        run = torch._inductor.aoti_load_package({package!r})
        with torch.no_grad():
            torch.testing.assert_close(run(io["x"]), io["want"])
        print("ran from the package")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0 and "ran from the package" in result.stdout, result.stderr[-3000:]
