"""Where a forward+backward's time goes, in packages built from the same specs with different
glues (a stable ABI build against FUSEGEN_STABLE_ABI=0): RoPE over q and k in bench/rope.py's
[B, S, H, D] memory (without its transposed views), and batchnorm_train as bench/batchnorm.py
does. Per package and op:

- the GPU kernels of one step (torch.profiler: name, calls, microseconds), so a kernel one
  glue launches and the other does not shows;
- whether the step synchronizes the host with the GPU (torch.cuda.set_sync_debug_mode);
- milliseconds per step of 50 steps issued back to back, and as triton's do_bench times it
  (bench/*.py: a cache flush before each step), against the kernels' own time: a host that
  cannot keep up shows as the difference.

    python3 bench/glue_profile.py stable_pkg aten_pkg   # (run from outside the repository)
"""
import importlib
import sys
import warnings

import torch
from torch.profiler import ProfilerActivity, profile


def rope_step(pkg):
    op = importlib.import_module(pkg + ".rope").rope
    dev, bf = "cuda", torch.bfloat16
    B, S, H, K, D = 8, 4096, 32, 8, 128
    # [B, S, H, D] memory, as bench/rope.py's q and k are under their [B, H, S, D] views
    q = torch.randn(B, S, H, D, device=dev, dtype=bf).requires_grad_()
    k = torch.randn(B, S, K, D, device=dev, dtype=bf).requires_grad_()
    cos = torch.randn(S, D, device=dev, dtype=bf)
    sin = torch.randn(S, D, device=dev, dtype=bf)
    gq, gk = torch.randn_like(q), torch.randn_like(k)

    def step():
        torch.autograd.grad((op(q, cos, sin), op(k, cos, sin)), (q, k), (gq, gk))
    return step


def batchnorm_step(pkg):
    op = importlib.import_module(pkg + ".batchnorm_train").batchnorm_train
    dev, bf = "cuda", torch.bfloat16
    x = torch.randn(65536, 1024, device=dev, dtype=bf, requires_grad=True)
    w = torch.randn(1024, device=dev, dtype=bf, requires_grad=True)
    b = torch.randn_like(w, requires_grad=True)
    g = torch.randn_like(x)

    def step():
        torch.autograd.grad(op(x, w, b)[0], (x, w, b), (g,))
    return step


def report(name, step):
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step()
    torch.cuda.set_sync_debug_mode(0)
    syncs = sorted({str(w.message).splitlines()[0] for w in caught})
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels = {}  # name -> [calls, microseconds]
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = kernels.setdefault(e.name, [0, 0.0])
            k[0] += 1
            k[1] += e.device_time
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(50):
        step()
    end.record()
    torch.cuda.synchronize()
    per_step = start.elapsed_time(end) / 50
    kernel_us = sum(us for _, us in kernels.values())
    from triton.testing import do_bench  # as bench/*.py time (benchmark._time)
    flushed = do_bench(step, warmup=25, rep=200, return_mode="median")
    print(f"## {name}: {per_step:.3f} ms per step back to back, {flushed:.3f} by do_bench "
          f"(cache flushed); kernels {kernel_us / 1000:.3f} ms")
    print(f"   synchronizing calls: {syncs or 'none'}")
    for key, (calls, us) in sorted(kernels.items(), key=lambda kv: -kv[1][1]):
        print(f"   {calls:3d} x {us:9.1f} us  {key[:110]}")
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=14, max_name_column_width=60))


def main():
    for pkg in sys.argv[1:]:
        for op, make in (("rope", rope_step), ("batchnorm_train", batchnorm_step)):
            report(f"{pkg} {op}", make(pkg))


if __name__ == "__main__":
    main()
