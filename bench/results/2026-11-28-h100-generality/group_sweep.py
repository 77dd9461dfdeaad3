"""Groups plan: rows of a group per thread (FUSEGEN_GROUP_ROWS x rows ahead; 0: the whole group),
RoPE of q and k at (8, 4096, {32, 8}, 128) bf16, interleaved rounds, kernel times; Liger beside."""
import os, sys, importlib, statistics
import torch
pkg = sys.argv[1]
rope = importlib.import_module(pkg + ".rope").rope
ri = importlib.import_module(pkg + ".rope_interleaved").rope_interleaved
from liger_kernel.ops.rope import LigerRopeFunction
B, S, HQ, HK, D = 8, 4096, 32, 8, 128
g = torch.Generator(device="cuda").manual_seed(0)
q = torch.randn(B, S, HQ, D, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
k = torch.randn(B, S, HK, D, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
angle = torch.arange(S, device="cuda")[:, None] * torch.rand(D // 2, device="cuda")
angle = torch.cat([angle, angle], -1)
cos, sin = angle.cos().bfloat16(), angle.sin().bfloat16()
gq, gk = torch.randn_like(q), torch.randn_like(k)
def fg_fwd():
    return rope(q, cos, sin), rope(k, cos, sin)
def fg_fb():
    torch.autograd.grad(list(fg_fwd()), [q, k], [gq, gk])
qt, kt = q.detach().transpose(1, 2).requires_grad_(), k.detach().transpose(1, 2).requires_grad_()
def lg_fwd():
    return LigerRopeFunction.apply(qt, kt, cos[None], sin[None])
def lg_fb():
    torch.autograd.grad(list(lg_fwd()), [qt, kt], [gq.transpose(1, 2), gk.transpose(1, 2)])
def ev(fn, n=30):
    for _ in range(3): fn()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    torch.cuda.synchronize(); s.record()
    for _ in range(n): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / n
settings = [0, 1, 2, 4, 8]
def setenv(L):
    if L: os.environ["FUSEGEN_GROUP_ROWS"] = str(L)
    else: os.environ.pop("FUSEGEN_GROUP_ROWS", None)
# correctness: every setting bit-identical to the whole-group one (forward and gradients)
setenv(0)
ref = [t.clone() for t in fg_fwd()] + list(torch.autograd.grad(list(fg_fwd()), [q, k], [gq, gk]))
xi = torch.randn(2, 64, 4, 96, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
ci, si = torch.randn(64, 96, device="cuda", dtype=torch.bfloat16), torch.randn(64, 96, device="cuda", dtype=torch.bfloat16)
ci.requires_grad_(); si.requires_grad_()
gi = torch.randn_like(xi)
refi = [ri(xi, ci, si).detach()] + list(torch.autograd.grad(ri(xi, ci, si), [xi, ci, si], gi))
for L in settings[1:]:
    setenv(L)
    got = [t.clone() for t in fg_fwd()] + list(torch.autograd.grad(list(fg_fwd()), [q, k], [gq, gk]))
    goti = [ri(xi, ci, si).detach()] + list(torch.autograd.grad(ri(xi, ci, si), [xi, ci, si], gi))
    same = all(torch.equal(a, b) for a, b in zip(ref, got)) and all(torch.equal(a, b) for a, b in zip(refi, goti))
    print(f"L={L}: identical to whole groups: {same}", flush=True)
res = {}
for rnd in range(3):
    for L in settings:
        setenv(L)
        res.setdefault(("fg", L), []).append((ev(fg_fwd), ev(fg_fb)))
    res.setdefault(("liger", 0), []).append((ev(lg_fwd), ev(lg_fb)))
copy_bytes = 2 * (q.numel() + k.numel()) * 2
for key, v in res.items():
    f = statistics.median(x[0] for x in v); fb = statistics.median(x[1] for x in v)
    print(f"{key[0]:6} L={key[1]}: fwd {f:.4f} ms ({copy_bytes/f/1e9:.0f} GB/s) f+b {fb:.4f} ms  rounds fwd {[round(x[0],4) for x in v]}", flush=True)
for L in settings + ["liger"]:
    fn = lg_fb if L == "liger" else fg_fb
    if L != "liger": setenv(L)
    for _ in range(3): fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10): fn()
        torch.cuda.synchronize()
    print(f"== kernels {L}")
    for e in sorted(prof.key_averages(), key=lambda e: -getattr(e, "device_time_total", 0))[:6]:
        us = getattr(e, "device_time_total", 0) / 10
        if us > 0: print(f"  {us:8.1f} us  x{e.count // 10:<3} {e.key[:90]}")
