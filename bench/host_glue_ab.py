"""Host time per call of the same ops from several fusegen packages (an A/B of the glue: the
runtime and _support.py of two commits, a stable ABI build against an ATen one), and of
eager PyTorch, at launch-bound shapes where the host's time is the op's time: softmax
(row plan), rmsnorm, batchnorm_train (colwise plan, five programs and their finalizes) and
rope (groups plan). Each figure is the least of 5 loops of 300 calls, microseconds per call,
forward / forward+backward (torch.autograd.grad).

    FUSEGEN_TEMPLATES=<old>/templates fusegen specs/{softmax,batchnorm_train,rmsnorm,rope}.yaml \\
        -o /tmp/old --package old --namespace old    # and --build --install, FUSEGEN_STABLE_ABI=0
    python3 bench/host_glue_ab.py old new ...        # (run from outside the repository)

bench/results/2026-11-28-h200-host-cost/ holds a run (the host-cost stop's A/B)."""
import importlib
import sys

import torch
import torch.nn.functional as F

import host_cost


def per_call_us(fn):
    return host_cost.per_call_us(fn, 300, torch.cuda.synchronize, reduce=min)


def main():
    dev, bf = "cuda", torch.bfloat16
    x = torch.randn(256, 1024, device=dev, dtype=bf, requires_grad=True)
    g = torch.randn_like(x)
    xb = torch.randn(1024, 256, device=dev, dtype=bf, requires_grad=True)
    gb = torch.randn_like(xb)
    w, b = (torch.randn(256, device=dev, dtype=bf, requires_grad=True) for _ in range(2))
    wr = torch.randn(1024, device=dev, dtype=bf, requires_grad=True)
    q = torch.randn(1, 128, 8, 64, device=dev, dtype=bf, requires_grad=True)
    gq = torch.randn_like(q)
    cos, sin = (torch.randn(128, 64, device=dev, dtype=bf) for _ in range(2))
    grad = torch.autograd.grad
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: us per call, host loop "
          "(least of 5 x 300 calls), forward / forward+backward")
    for pkg in sys.argv[1:]:
        def op(name):
            return getattr(importlib.import_module(f"{pkg}.{name}"), name)
        sm, bn, rms, rope = op("softmax"), op("batchnorm_train"), op("rmsnorm"), op("rope")
        stable = importlib.import_module(f"{pkg}._build_info").STABLE_ABI
        cells = [
            ("softmax 256x1024", lambda: sm(x), lambda: grad(sm(x), [x], g)),
            ("rmsnorm 256x1024", lambda: rms(x, wr), lambda: grad(rms(x, wr), [x, wr], g)),
            ("batchnorm 1024x256", lambda: bn(xb, w, b),
             lambda: grad(bn(xb, w, b)[0], [xb, w, b], gb)),
            ("rope 1x128x8x64", lambda: rope(q, cos, sin), lambda: grad(rope(q, cos, sin), [q], gq)),
        ]
        print(f"{pkg} (stable ABI: {stable}): " + " | ".join(
            f"{n} {per_call_us(f):.1f} / {per_call_us(fb):.1f}" for n, f, fb in cells), flush=True)
    eager = [
        ("softmax", lambda: torch.softmax(x, -1), lambda: grad(torch.softmax(x, -1), [x], g)),
        ("rms_norm", lambda: F.rms_norm(x, (1024,), wr),
         lambda: grad(F.rms_norm(x, (1024,), wr), [x, wr], g)),
        ("batch_norm", lambda: F.batch_norm(xb, None, None, w, b, True),
         lambda: grad(F.batch_norm(xb, None, None, w, b, True), [xb, w, b], gb)),
    ]
    print("eager: " + " | ".join(f"{n} {per_call_us(f):.1f} / {per_call_us(fb):.1f}"
                                 for n, f, fb in eager))


if __name__ == "__main__":
    main()
