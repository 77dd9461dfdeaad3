"""Tests of the package as a whole: it refuses to load under a torch other than the one it
was built for (a build on the LibTorch stable ABI: under an older torch or another major
version), with a message that says why and what to do."""
import subprocess
import sys

from ._names import PACKAGE


def _import_with_torch_version(version: str) -> subprocess.CompletedProcess:
    code = f"import torch; torch.__version__ = {version!r}; import {PACKAGE}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_loads_under_the_torch_it_was_built_for():
    import torch

    result = _import_with_torch_version(torch.__version__)
    assert result.returncode == 0, result.stderr


def test_refuses_another_torch_version():
    result = _import_with_torch_version("0.0.1+other")
    assert result.returncode != 0
    assert f"{PACKAGE} was built for torch" in result.stderr
    assert "but torch 0.0.1+other" in result.stderr
    assert "fusegen --build --install" in result.stderr


def _built():
    from . import _build_info

    return _build_info


def _later(version: str, minor: int = 1) -> str:
    major, rest = version.split(".", 1)
    return f"{major}.{int(rest.split('.')[0]) + minor}.0"


def test_a_later_torch_loads_a_stable_build_only():
    """A stable ABI build loads under a later torch of the same major version; an ATen build
    refuses it and says what ties it to its torch (the ops that cannot be stable, or the
    torch it was built with)."""
    built = _built()
    later = _later(built.TORCH_VERSION)
    result = _import_with_torch_version(later)
    if built.STABLE_ABI:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0
        assert f"but torch {later}" in result.stderr
        assert "it is tied to that torch: " + built.NOT_STABLE_WHY in result.stderr
        for op in built.NOT_STABLE_OPS:
            assert f"; {op} " in result.stderr


def test_a_stable_build_refuses_an_older_or_another_major_torch():
    built = _built()
    if not built.STABLE_ABI:
        return  # (test_refuses_another_torch_version)
    major, minor = (int(x) for x in built.TORCH_VERSION.split(".")[:2])
    for other in ([f"{major}.{minor - 1}.0"] if minor else []) + [f"{major + 1}.0.0"]:
        result = _import_with_torch_version(other)
        assert result.returncode != 0, other
        assert f"but torch {other}" in result.stderr
        assert "built on the LibTorch stable ABI, which loads under torch" in result.stderr


# ---- the random numbers of rand() and dropout() (_support.uniform, which the
# generated tests hold the kernels to, element by element) ----------------------------------
def _draws(n=1 << 20, stream=0, seed=1234, offset=8):
    import torch

    from . import _support

    rng = torch.tensor([seed, offset], dtype=torch.int64)
    return _support.uniform(rng, stream, torch.empty(n // 1024, 1024, dtype=torch.float64))


def test_philox_matches_the_published_known_answer():
    # Random123's known-answer test for Philox4x32-10: key (0, 0), counter (0, 0, 0, 0) gives
    # 6627e8d5 e169c58d bc57ac4c 9b00dbd8 (kat_vectors). Element e takes word e % 4 of
    # block e / 4, >> 8, times 2^-24.
    import torch

    from . import _support

    u = _support.uniform(torch.tensor([0, 0]), 0, torch.empty(4, dtype=torch.float64))
    words = [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert u.tolist() == [(w >> 8) * 2.0 ** -24 for w in words]


def test_uniform_numbers_are_uniform():
    u = _draws()
    n = u.numel()
    assert 0 <= float(u.min()) and float(u.max()) < 1
    assert abs(float(u.mean()) - 0.5) < 6 * (1 / 12 / n) ** 0.5
    for p in (0.01, 0.1, 0.5, 0.9):  # a dropout's rate, within 6 binomial sigmas
        rate = float((u < p).double().mean())
        assert abs(rate - p) < 6 * (p * (1 - p) / n) ** 0.5, (p, rate)
    hist = (u * 16).long().reshape(-1).bincount(minlength=16).double()
    chi2 = float(((hist - n / 16) ** 2 / (n / 16)).sum())
    assert chi2 < 60, chi2  # 15 degrees of freedom: P(chi2 > 60) < 1e-6


def test_streams_seeds_and_offsets_are_independent():
    base = _draws()
    for other in (_draws(stream=1), _draws(seed=1235), _draws(offset=12)):
        both = float(((base < 0.5) & (other < 0.5)).double().mean())
        assert abs(both - 0.25) < 6 * (0.25 * 0.75 / base.numel()) ** 0.5, both
    assert _draws().equal(base)  # and the same key draws the same numbers


# ---- generated references: a where on a number-only condition (_support.where_uniform) ----
def test_where_on_a_test_of_D_compiles_with_dynamic_shapes():
    """The references spell where(D == 0, a, b) _support.where_uniform: under torch.compile
    with dynamic shapes D is symbolic, and torch.as_tensor(D == 0) failed there. The branch
    taken matches torch.where's, broadcast against the other."""
    import torch
    from ._support import where_uniform

    def f(x):
        return where_uniform(x.shape[-1] == 0, x.sum(-1, keepdim=True), x * 2)

    compiled = torch.compile(f, dynamic=True, fullgraph=True)
    for shape in [(3, 4), (5, 7), (2, 0)]:
        x = torch.randn(shape)
        want = torch.where(torch.tensor(shape[-1] == 0), x.sum(-1, keepdim=True), x * 2)
        got = compiled(x)
        assert got.shape == want.shape and torch.equal(got, want), shape
    assert where_uniform(True, 1.0, 2.0) == 1.0  # numbers stay numbers
