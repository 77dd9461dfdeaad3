import torch, torch.nn.functional as F
from nc2ops.focal_loss import focal_loss
from nc2ops.bool_mask_softmax import bool_mask_softmax
from nc2ops.channel_roll_mix import channel_roll_mix
from nc2ops.softmax_dropout import softmax_dropout
torch.manual_seed(0); ok = True
def close(a, b, tol): 
    global ok
    e = (a.double() - b.double()).abs().max().item(); ok &= e <= tol; return f"{e:.2e}"
for dt, tol in [(torch.float64, 1e-10), (torch.float32, 1e-4), (torch.bfloat16, 5e-2)]:
    x = torch.randn(7, 5, 33, dtype=torch.float64).to(dt).requires_grad_()
    t = torch.randint(0, 33, (7, 5)); t[0, 1] = -100
    logp = F.log_softmax(x.double(), -1).gather(-1, t.clamp_min(0)[..., None])[..., 0]
    ref = torch.where(t == -100, 0.0, -(1 - logp.exp()) ** 1.5 * logp)
    got = focal_loss(x, t, gamma=1.5)
    g1 = torch.autograd.grad(got.sum(), x)[0]; xr = x.detach().double().requires_grad_()
    lp = F.log_softmax(xr, -1).gather(-1, t.clamp_min(0)[..., None])[..., 0]
    g2 = torch.autograd.grad(torch.where(t == -100, 0.0, -(1 - lp.exp()) ** 1.5 * lp).sum(), xr)[0]
    print("focal", dt, close(got, ref, tol), close(g1, g2, tol))
    x = torch.randn(2, 3, 6, 9, dtype=torch.float64).to(dt).requires_grad_()
    keep = torch.rand(6, 9) > 0.3; keep[:, 0] = True
    ref = torch.softmax((x.double() * 0.5).masked_fill(~keep, float("-inf")), -1)
    got = bool_mask_softmax(x, keep, scale=0.5)
    print("boolmask", dt, close(got, ref, tol))
    x = torch.randn(3, 4, 10, dtype=torch.float64).to(dt).requires_grad_()
    w = torch.randn(10, dtype=torch.float64).to(dt).requires_grad_(); g = torch.randn(4, dtype=torch.float64).to(dt).requires_grad_()
    ref = x.double() + g.double()[:, None] * w.double() * torch.roll(x.double(), -7, -1)
    got = channel_roll_mix(x, w, g, shift=-7)
    gy = torch.randn_like(ref)
    gg = torch.autograd.grad(got, [x, w, g], gy.to(dt))
    xr, wr, grr = [v.detach().double().requires_grad_() for v in (x, w, g)]
    rg = torch.autograd.grad(xr + grr[:, None] * wr * torch.roll(xr, -7, -1), [xr, wr, grr], gy)
    print("rollmix", dt, close(got, ref, tol), *[close(a, b, tol * 10) for a, b in zip(gg, rg)])
x = torch.randn(4096, 64, dtype=torch.float64, requires_grad=True)
y = softmax_dropout(x, p=0.25)
drop = (y == 0).double().mean().item()
ref = torch.softmax(x.detach(), -1) / 0.75
kept = y != 0
print("dropout frac", round(drop, 4), "kept match", close(y[kept], ref[kept], 1e-12))
ok &= abs(drop - 0.25) < 0.01
gy = torch.randn_like(y); gx = torch.autograd.grad(y, x, gy)[0]
s = torch.softmax(x.detach(), -1); gd = torch.where(kept, gy / 0.75, 0.0)
want = s * (gd - (gd * s).sum(-1, keepdim=True))
print("dropout grad", close(gx, want, 1e-12))
print("ALL OK" if ok else "SOME FAILED")
