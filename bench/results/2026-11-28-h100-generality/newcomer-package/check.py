"""Newcomer specs against hand-written PyTorch (float64 on the device, then bf16/fp16/fp32 within
a tolerance scaled from the float64 reference), forward and gradients, odd shapes included."""
import sys, math, importlib
import torch
import torch.nn.functional as F
dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
pkg = "ncops"
def op(name): return getattr(importlib.import_module(f"{pkg}.{name}"), name)
def rotate_half(x): return torch.cat([-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]], -1)
def rotate_pairs(x):
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([-x1, x0], -1).flatten(-2)
def causal(S, D, dev): return torch.ones(S, D, dtype=torch.bool, device=dev).triu(1)
cases = []
def case(name, shapes, ref, kw=None, fwd_only=False, seeded=False):
    cases.append((name, shapes, ref, kw or {}, fwd_only, seeded))
for (B, H, S, D) in [(2, 3, 5, 7), (1, 4, 33, 40), (2, 2, 64, 64), (1, 1, 1, 1)]:
    def alibi(x, slopes, scale=0.7):
        S, D = x.shape[-2], x.shape[-1]
        dist = torch.arange(S, device=x.device)[:, None] - torch.arange(D, device=x.device)[None]
        z = x * scale - slopes[:, None, None] * dist
        z = z.masked_fill(causal(S, D, x.device), float("-inf"))
        return torch.softmax(z, -1)
    case("alibi_causal_softmax", [(B, H, S, D), (H,)], alibi, {"scale": 0.7})
for (B, S, D) in [(3, 6, 6), (2, 17, 40), (1, 128, 300), (2, 1, 3)]:
    def swa(x, scale=1.3, window=3):
        S, D = x.shape[-2], x.shape[-1]
        s = torch.arange(S, device=x.device)[:, None]; jj = torch.arange(D, device=x.device)[None]
        hide = (jj > s) | (s - jj >= window)
        return torch.softmax((x * scale).masked_fill(hide, float("-inf")), -1)
    case("sliding_window_softmax", [(B, S, D)], swa, {"scale": 1.3, "window": 3})
    def softcap(x, mask, cap=5.0):
        return torch.softmax(torch.tanh(x / cap) * cap + mask, -1)
    case("softcap_masked_softmax", [(B, 4, S, D), (S, D)], softcap, {"cap": 5.0})
for shape in [(3, 5, 2 * 7), (4, 2 * 256), (1, 2 * 1)]:
    case("reglu_packed", [shape], lambda gu: F.relu(gu.chunk(2, -1)[0]) * gu.chunk(2, -1)[1])
for shape in [(7, 5), (3, 11, 24), (1000, 33)]:
    def zs(x, eps=1e-5):
        xf = x.reshape(-1, x.shape[-1]); m = xf.mean(0); v = xf.var(0, unbiased=False)
        r = torch.rsqrt(v + eps)
        return (x - m) * r, m.float(), r.float()
    case("column_zscore", [shape], zs)
for (B, S, H, D) in [(2, 5, 3, 8), (1, 9, 2, 128), (2, 4, 1, 6), (1, 3, 4, 256)]:
    def qkr(x, w, cos, sin, eps=1e-6):
        xn = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w
        return xn * cos[:, None] + rotate_half(xn) * sin[:, None]
    case("qk_norm_rope", [(B, S, H, D), (D,), (S, D), (S, D)], qkr)
    def ir(x, cos, sin, factor=0.5):
        return (x * cos[:, None] + rotate_pairs(x) * sin[:, None]) * factor
    case("interleaved_rope_scaled", [(B, S, H, D), (S, D), (S, D)], ir, {"factor": 0.5})
fails = 0
g = torch.Generator(device=dev).manual_seed(0)
for name, shapes, ref, kw, fwd_only, seeded in cases:
    fn = op(name)
    base = [torch.randn(*s, device=dev, dtype=torch.float64, generator=g) for s in shapes]
    if name == "softcap_masked_softmax":
        base[1] = base[1].masked_fill(causal(*shapes[1], dev), float("-inf"))
    if name == "alibi_causal_softmax":
        base[1] = base[1].abs()
    exp = ref(*[t.clone().requires_grad_(t.is_floating_point() and not name.endswith("softmax") or i == 0) for i, t in enumerate(base)], **kw)
    for dt in [torch.float64, torch.float32, torch.bfloat16, torch.float16]:
        ins = [t.to(dt).requires_grad_() for t in base]
        if name.endswith("softmax") and len(ins) > 1:
            ins[1] = ins[1].detach()
        refins = [t.detach().double().requires_grad_(t.requires_grad) for t in ins]
        want = ref(*refins, **kw); got = fn(*ins, **kw)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        eps = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 3e-3}[dt]
        ok = True
        for w, o in zip(want, got):
            err = (o.double() - w).abs().nan_to_num(0)
            tol = eps * (1 + w.abs().nan_to_num(0)) * 8
            if not torch.equal(o.double().isnan(), w.isnan()) or (err > tol).any():
                ok = False; print(f"  FWD {name} {dt} {shapes}: max err {err.max().item():.3g}")
        if not fwd_only and got[0].requires_grad:
            gy = torch.randn_like(want[0].float(), generator=None) if False else torch.randn(want[0].shape, device=dev, dtype=torch.float64, generator=g)
            diff = [t for t in ins if t.requires_grad]
            gg = torch.autograd.grad(got[0], diff, gy.to(dt), allow_unused=True)
            wg = torch.autograd.grad(want[0], [t for t in refins if t.requires_grad], gy.nan_to_num(0), allow_unused=True)
            for i, (a, b) in enumerate(zip(gg, wg)):
                if b is None: continue
                err = (a.double() - b).abs().nan_to_num(0)
                scale = b.abs().max().nan_to_num(0).item() + 1
                if (err > eps * 16 * scale * math.sqrt(max(1, b.shape[-1]))).any():
                    ok = False; print(f"  GRAD{i} {name} {dt} {shapes}: max err {err.max().item():.3g} (scale {scale:.3g})")
        fails += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name} {str(dt)[6:]} {shapes}", flush=True)
print(f"newcomer checks on {dev}: {len(cases) * 4 - fails} passed, {fails} failed")
sys.exit(1 if fails else 0)
