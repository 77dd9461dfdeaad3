"""A spec that lists fewer dtypes than the four (`dtypes: [float64]`, `[bfloat16, float16]`,
`[float32]`): its generated tests call the op only in dtypes it has. They ran the checks of
shapes, strides, transforms and misaligned views in float32, float16 and bfloat16 whatever the
spec said, and 16 of a float64-only op's tests failed with "has dtype float32, but this op
supports float64". Every generated test function of three such ops is called here on the CPU
with its parameters, as pytest would; those that need float64 (finite differences) skip, saying
so, where the op lacks it. Run by ctest (python.load)."""
import importlib
import inspect

import pytest
import torch

import fusegen

SPECS = """
op: poly_f64
doc: a cubic in float64 only
dtypes: [float64]
inputs:
  x: [..., D]
  c: [D]
outputs:
  y: c * x * x * x - 3 * roll(x, 1)
---
op: gelu_mean_half
doc: gelu(x + b) scaled by the row mean, half types only
dtypes: [bfloat16, float16]
inputs:
  x: [..., D]
  b: [D]
outputs:
  y: gelu(x + b) * sum(x) / D
---
op: head_rms_f32
doc: RMSNorm with a per-head weight, float32 only
dtypes: [float32]
inputs:
  x: [..., S, H, D]
  w: [H, D]
attrs:
  eps: {type: float, default: 1.0e-6}
outputs:
  y: x * rsqrt(mean(x * x) + eps) * w
"""
OPS = ["poly_f64", "gelu_mean_half", "head_rms_f32"]


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    paths = []
    for text in SPECS.split("---"):
        op = next(line.split(":")[1].strip() for line in text.splitlines() if line.startswith("op:"))
        path = tmp_path_factory.mktemp("specs") / f"{op}.yaml"
        path.write_text(text)
        paths.append(str(path))
    return fusegen.load(paths, name="restricted_dtype_ops", cpu_only=True).__name__


def calls(fn):
    """fn's parameter sets, from its parametrize marks, on the CPU."""
    sets = [{}]
    for mark in getattr(fn, "pytestmark", []):
        if mark.name == "parametrize":
            names = [n.strip() for n in mark.args[0].split(",")]
            sets = [dict(s, **dict(zip(names, v if len(names) > 1 else (v,))))
                    for s in sets for v in mark.args[1]]
    params = inspect.signature(fn).parameters
    return [{k: v for k, v in dict(s, device="cpu").items() if k in params} for s in sets]


@pytest.mark.parametrize("op", OPS)
def test_every_generated_test_passes(package, op):
    module = importlib.import_module(f"{package}.{op}.test_{op}")
    failed, skipped, ran = [], [], 0
    for name, fn in inspect.getmembers(module, inspect.isfunction):
        if not name.startswith("test_"):
            continue
        for kwargs in calls(fn):
            if kwargs.get("device", "cpu") != "cpu":
                continue
            try:
                fn(**kwargs)
                ran += 1
            except pytest.skip.Exception as e:
                skipped.append((name, str(e)))
            except Exception as e:  # noqa: BLE001  (every failure listed, not the first)
                failed.append(f"{name}{kwargs}: {type(e).__name__}: {str(e)[:300]}")
    assert not failed, "\n".join(failed)
    assert ran >= 20, f"only {ran} of the generated tests ran"
    spec = module.SPEC
    if "float64" not in spec.dtypes:  # the finite-difference checks skip, saying why
        gradcheck = [why for name, why in skipped if name == "test_gradcheck_float64"]
        assert gradcheck and "float64" in gradcheck[0] and "leave out" in gradcheck[0], skipped
    else:
        assert not any(name == "test_gradcheck_float64" for name, _ in skipped), skipped


def test_float_inputs_run_in_the_op_dtypes_only(package):
    """The checks' dtypes (OpChecks.f32, f16, bf16) are among the op's."""
    for op in OPS:
        checks = importlib.import_module(f"{package}.{op}.test_{op}").CHECKS
        have = checks.spec.torch_dtypes()
        assert {checks.f32, checks.f16, checks.bf16} <= set(have), (op, have)
    f64 = importlib.import_module(f"{package}.poly_f64.test_poly_f64").CHECKS
    assert f64.f32 == f64.f16 == f64.bf16 == torch.float64
