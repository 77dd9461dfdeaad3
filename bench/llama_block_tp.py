#!/usr/bin/env python3
"""A Llama-style decoder block trained on 2 ranks (issue #18): fusegen's add_rmsnorm, rmsnorm,
rope and swiglu under tensor + sequence parallelism and under FSDP2, with and without
torch.compile, against the same block with eager norms and activations, eager and compiled.

    torchrun --nproc-per-node 2 bench/llama_block_tp.py --device cuda --out DIR
    torchrun --nproc-per-node 2 bench/llama_block_tp.py --device cpu --out DIR --steps 2 \\
        [--no-compile]          # gloo, tiny shapes: the smoke test (CI runs it with --no-compile)

The block (pre-norm, no biases, as Llama's): attn_norm (RMSNorm), attention (q, k, v, o
projections, grouped-query heads, RoPE on q and k with transformers' rotate_half convention,
F.scaled_dot_product_attention, causal), ffn_norm fused with the residual add before it
(add_rmsnorm returns the normalized sum and the sum, the new residual stream), MLP (separate
gate and up projections, SwiGLU, down projection); the block returns mlp + residual. With
--layers L > 1 the residual add after each MLP is fused into the next block's attn_norm
(add_rmsnorm). Variants, all from one set of initial weights:
  fusegen          norms, rope and swiglu from fusegen_ops (torch.ops.fusegen.*), eager mode
  fusegen+compile  the same under torch.compile (the ops have fake implementations; they stay
                   opaque calls in the graph)
  eager            the same math in plain PyTorch: transformers' LlamaRMSNorm (fp32 inside),
                   x + residual, rotate_half RoPE, F.silu(gate) * up
  compile-only     eager under torch.compile
torch.compile(model, dynamic=False) after parallelizing: under TP + SP one graph (the DTensor
hooks are traced); under FSDP2 each block is a graph (FSDP's hooks break the graph around it).
Configurations, both on a 1-D mesh of the 2 ranks (a 2-D TP x FSDP mesh needs 4 or more):
  tp_sp   tensor parallel (parallelize_module: ColwiseParallel q, k, v, gate, up; RowwiseParallel
          o and down with output Shard(1)) + sequence parallel norms, as torch's TP tutorial for
          Llama: the residual stream is sharded on the sequence dim, the norms run on Shard(1)
          DTensors (SequenceParallel, extended to the fused norm's two inputs and outputs), q, k,
          gate and up stay DTensors sharded on heads / columns (use_local_output=False), so
          fusegen's ops run on DTensors through the sharding rules fusegen_ops registers
          (_support.register_sharding); attention itself runs on the local heads. Every rank
          sees the whole batch.
  fsdp2   fully_shard of each block and of the model (data parallel: each rank half of the
          batch, gradients averaged); the ops see plain tensors.
Correctness: rank 0 first trains the unparallelized model of the same variant (same compile
setting; --eager-reference: uncompiled, two compiles fewer) alone on the whole batch (the
1-process reference); each configuration then trains
--steps steps from the same weights and data, and at every step the loss and the gradient of
every parameter (full_tensor()) must match the reference's: relative error in the 2-norm,
|a - ref| / |ref|, at most TOLERANCE_EPS[dtype] x eps (see there). Timing: --warmup more steps, then
--iters timed steps (zero_grad, forward, loss, backward, optimizer step; synchronized,
perf_counter), the median of the slowest rank's time per step. Writes DIR/llama_block.json and
DIR/llama_block.md; exits 1 when a check fails or a run raises.

Weights and optimizer: the model dtype throughout (--dtype, bf16 on CUDA, fp32 on CPU by
default: pure bf16 training, no fp32 master weights), SGD with momentum 0.9: its update is
linear in the gradient, so the later steps' comparison still measures only the rounding of
the gradients (--optim adamw: AdamW, whose first steps are sign-like, lr * g / |g|, and can
turn rounding differences of gradients near zero into differences of lr in the weights).

--break-rule OP re-registers OP's backward sharding rule with every Partial gradient declared
Replicate (the missing all-reduce of a norm weight's gradient): the check must then fail.
"""
import argparse
import datetime
import gc
import importlib
import json
import os
import platform
import statistics
import sys
import time
import traceback

# NVLink multicast stays off (it can take a shared host's GPUs out of service): NCCL's NVLS,
# symmetric memory's and NVSHMEM's multicast.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard  # noqa: E402
from torch.distributed.tensor.parallel import (  # noqa: E402
    ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module)
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

VARIANTS = {  # name: (implementation of norms/rope/swiglu, torch.compile)
    "eager": ("eager", False),
    "fusegen": ("fusegen", False),
    "compile-only": ("eager", True),
    "fusegen+compile": ("fusegen", True),
}
CONFIGS = ("tp_sp", "fsdp2")
# Default shapes. CUDA: Llama 3 8B's layer (hidden 4096, 32 query heads and 8 kv heads of 128,
# intermediate 14336), 2 sequences of 4096 tokens (8192 tokens a step). CPU: tiny.
CUDA_SHAPES = {"batch": 2, "seq": 4096, "hidden": 4096, "heads": 32, "kv_heads": 8,
               "intermediate": 14336}
TINY = {"batch": 2, "seq": 16, "hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 128}

# The check's tolerance: relative error in the 2-norm of the loss and of each parameter's
# gradient, per step, as a multiple of the dtype's machine epsilon (finfo.eps: 2^-7 for bf16,
# 2^-23 for fp32). The parallel run and the reference differ only in the order of sums: a
# row-parallel matmul sums two partial products, each rounded to the dtype, in the
# all-reduce / reduce-scatter; FSDP2 averages two half-batch gradients; a sequence-parallel
# norm weight's gradient is the sum of two Partial halves. Each reordering costs about one
# rounding (eps/2 relative) per element, a few of them compound over the backward and the
# steps. A missing or wrong reduction (a Partial gradient taken as Replicate: one rank's half of
# the sum) is an error of order 1 (about 0.7 for two halves of similar size), far above both.
TOLERANCE_EPS = {torch.float32: 64, torch.float64: 64, torch.bfloat16: 4, torch.float16: 8}
OPS = None  # the fusegen ops package (fusegen_ops, or --ops), imported in main()


def tolerance(dtype):
    return TOLERANCE_EPS[dtype] * torch.finfo(dtype).eps


# ---- the block ----------------------------------------------------------------------------

def eager_rms_norm(x, weight, eps):  # transformers' LlamaRMSNorm.forward
    dtype = x.dtype
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dtype)


def rotate_half(x):  # transformers' modeling_llama.rotate_half
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def eager_rope(x, cos, sin):  # x [B, S, H, D], cos and sin [S, D]
    return x * cos.unsqueeze(1) + rotate_half(x) * sin.unsqueeze(1)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps, impl):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps, self.impl = eps, impl

    def forward(self, x):
        if self.impl == "fusegen":
            return OPS.rmsnorm(x, self.weight, eps=self.eps)
        return eager_rms_norm(x, self.weight, self.eps)


class AddRMSNorm(nn.Module):
    """RMSNorm of x + residual; returns (the normalized sum, the sum)."""

    def __init__(self, dim, eps, impl):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps, self.impl = eps, impl

    def forward(self, x, residual):
        if self.impl == "fusegen":
            return OPS.add_rmsnorm(x, residual, self.weight, eps=self.eps)
        h = x + residual
        return eager_rms_norm(h, self.weight, self.eps), h


class Attention(nn.Module):
    def __init__(self, cfg, impl):
        super().__init__()
        d, hd = cfg["hidden"], cfg["head_dim"]
        self.q = nn.Linear(d, cfg["heads"] * hd, bias=False)
        self.k = nn.Linear(d, cfg["kv_heads"] * hd, bias=False)
        self.v = nn.Linear(d, cfg["kv_heads"] * hd, bias=False)
        self.o = nn.Linear(cfg["heads"] * hd, d, bias=False)
        self.head_dim, self.impl = hd, impl

    def forward(self, x, cos, sin):
        B, S = x.shape[0], x.shape[1]  # (a DTensor's global shape)
        q = self.q(x).view(B, S, -1, self.head_dim)  # [B, S, H, D]: Shard(2) under TP
        k = self.k(x).view(B, S, -1, self.head_dim)
        v = self.v(x).view(B, S, -1, self.head_dim)
        if self.impl == "fusegen":
            q, k = OPS.rope(q, cos, sin), OPS.rope(k, cos, sin)
        else:
            q, k = eager_rope(q, cos, sin), eager_rope(k, cos, sin)
        if isinstance(q, DTensor):  # attention on this rank's heads
            q, k, v = q.to_local(), k.to_local(), v.to_local()
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, S, D]
        rep = q.shape[1] // k.shape[1]  # grouped-query heads: transformers' repeat_kv
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(o.transpose(1, 2).reshape(B, o.shape[2], -1))


class MLP(nn.Module):
    def __init__(self, cfg, impl):
        super().__init__()
        self.gate = nn.Linear(cfg["hidden"], cfg["intermediate"], bias=False)
        self.up = nn.Linear(cfg["hidden"], cfg["intermediate"], bias=False)
        self.down = nn.Linear(cfg["intermediate"], cfg["hidden"], bias=False)
        self.impl = impl

    def forward(self, x):
        g, u = self.gate(x), self.up(x)  # Shard(-1) DTensors under TP
        h = OPS.swiglu(g, u) if self.impl == "fusegen" else F.silu(g) * u
        return self.down(h)


class Block(nn.Module):
    def __init__(self, cfg, impl, first):
        super().__init__()
        eps = cfg["eps"]
        self.attn_norm = RMSNorm(cfg["hidden"], eps, impl) if first else \
            AddRMSNorm(cfg["hidden"], eps, impl)
        self.attn = Attention(cfg, impl)
        self.ffn_norm = AddRMSNorm(cfg["hidden"], eps, impl)
        self.mlp = MLP(cfg, impl)

    def forward(self, x, residual, cos, sin):
        """x: the last block's MLP output (the input for the first), residual: the stream before
        it (None for the first). Returns (this MLP's output, the stream before it)."""
        if residual is None:
            n, residual = self.attn_norm(x), x
        else:
            n, residual = self.attn_norm(x, residual)
        n, residual = self.ffn_norm(self.attn(n, cos, sin), residual)
        return self.mlp(n), residual


class Model(nn.Module):
    def __init__(self, cfg, impl):
        super().__init__()
        self.layers = nn.ModuleList(Block(cfg, impl, i == 0) for i in range(cfg["layers"]))

    def forward(self, x, cos, sin):
        residual = None
        for layer in self.layers:
            x, residual = layer(x, residual, cos, sin)
        return x + residual


def initial_weights(cfg, dtype, seed):
    """One state dict (CPU) for every variant: nn.Linear's default init, norm weights 1 +
    N(0, 0.1^2) (not all ones, so that their gradients matter)."""
    torch.manual_seed(seed)
    model = Model(cfg, "eager")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.1 * torch.randn_like(p))
    return {k: v.to(dtype) for k, v in model.state_dict().items()}


def rope_tables(cfg, dtype, device):
    """cos and sin [S, D] (Llama 3's theta 500000), transformers' layout (frequencies twice)."""
    hd = cfg["head_dim"]
    inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.outer(torch.arange(cfg["seq"], dtype=torch.float64), inv)
    emb = torch.cat([freqs, freqs], -1)
    return emb.cos().to(dtype).to(device), emb.sin().to(dtype).to(device)


def batch(cfg, dtype, seed):
    g = torch.Generator().manual_seed(seed + 1)
    shape = (cfg["batch"], cfg["seq"], cfg["hidden"])
    return torch.randn(shape, generator=g).to(dtype), torch.randn(shape, generator=g).to(dtype)


# ---- parallelization ----------------------------------------------------------------------

class SequenceParallelNorm(SequenceParallel):
    """torch's SequenceParallel (Replicate weights, inputs sharded on the sequence dim) for a
    norm module of several tensor inputs and outputs: SequenceParallel takes the first input
    and one output only, and the fused add_rmsnorm module takes (x, residual) and returns (y,
    x + residual)."""

    @staticmethod
    def _prepare_input_fn(sequence_sharding, mod, inputs, device_mesh):
        return tuple(SequenceParallel._prepare_input_fn(sequence_sharding, mod, (t,), device_mesh)
                     for t in inputs)

    @staticmethod
    def _prepare_output_fn(use_local_output, mod, outputs, device_mesh):
        if isinstance(outputs, tuple):
            return tuple(o.to_local() if use_local_output else o for o in outputs)
        return outputs.to_local() if use_local_output else outputs


def tp_sp_plan(cfg):
    plan = {}
    for i in range(cfg["layers"]):
        p = f"layers.{i}."
        plan.update({
            # The residual stream stays a local tensor sharded on the sequence (dim 1); the
            # norms run on it as Shard(1) DTensors and give local tensors back.
            p + "attn_norm": SequenceParallelNorm(use_local_output=True),
            p + "attn": PrepareModuleInput(input_layouts=(Shard(1), None, None),
                                           desired_input_layouts=(Replicate(), None, None)),
            p + "attn.q": ColwiseParallel(use_local_output=False),
            p + "attn.k": ColwiseParallel(use_local_output=False),
            p + "attn.v": ColwiseParallel(use_local_output=False),
            p + "attn.o": RowwiseParallel(output_layouts=Shard(1)),
            p + "ffn_norm": SequenceParallelNorm(use_local_output=True),
            p + "mlp": PrepareModuleInput(input_layouts=(Shard(1),),
                                          desired_input_layouts=(Replicate(),)),
            p + "mlp.gate": ColwiseParallel(use_local_output=False),
            p + "mlp.up": ColwiseParallel(use_local_output=False),
            p + "mlp.down": RowwiseParallel(output_layouts=Shard(1)),
        })
    return plan


def build(cfg, impl, weights, config, mesh, device):
    with torch.device("meta"):  # (no initialization: the weights are loaded)
        model = Model(cfg, impl).to(dtype=next(iter(weights.values())).dtype)
    model.to_empty(device=device)
    model.load_state_dict(weights)
    if config == "tp_sp":
        parallelize_module(model, mesh, tp_sp_plan(cfg))
    elif config == "fsdp2":
        for layer in model.layers:  # one FSDP unit a block, as torchtitan (its hooks run
            fully_shard(layer, mesh=mesh)  # outside the compiled graphs: a graph a block)
        fully_shard(model, mesh=mesh)
    return model


def local_inputs(config, x, tgt, cos, sin, mesh, rank, world):
    """This rank's model inputs and loss target, and the loss's normalization: the loss is
    mean((out - tgt)^2) over the whole batch, each rank's part sum / numel (tp_sp: the ranks'
    parts are summed by the gradients' reductions) or its own mean (fsdp2: FSDP averages)."""
    if config == "tp_sp":
        cos, sin = (DTensor.from_local(t, mesh, [Replicate()], run_check=False)
                    for t in (cos, sin))
        return (x.chunk(world, 1)[rank].contiguous(), tgt.chunk(world, 1)[rank].contiguous(),
                cos, sin, 1.0 / x.numel(), dist.ReduceOp.SUM)
    if config == "fsdp2":
        xl = x.chunk(world, 0)[rank].contiguous()
        return (xl, tgt.chunk(world, 0)[rank].contiguous(), cos, sin, 1.0 / xl.numel(),
                dist.ReduceOp.AVG)
    return x, tgt, cos, sin, 1.0 / x.numel(), None


def full(t):
    return t.full_tensor() if isinstance(t, DTensor) else t


class FusegenOpLog(TorchDispatchMode):
    """Records each call of the ops package's torch.ops (forward and backward) with the
    placements of its DTensor arguments: evidence that they ran through the sharding rules."""

    def __init__(self, namespace):
        super().__init__()
        self.namespace, self.calls = namespace, {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == self.namespace:
            seen = []
            for a in list(args) + list((kwargs or {}).values()):
                if isinstance(a, DTensor):
                    seen.append("".join(map(str, a.placements)))
                elif isinstance(a, torch.Tensor):
                    seen.append("tensor")
            key = f"{func.name().split('::')[-1]}({', '.join(seen)})"
            self.calls[key] = self.calls.get(key, 0) + 1
        return func(*args, **(kwargs or {}))


# ---- training -----------------------------------------------------------------------------

def make_optimizer(args, model):
    if args.optim == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    return torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


class Run:
    """One model (a variant, a configuration) with its optimizer and this rank's data."""

    def __init__(self, args, cfg, variant, config, weights, data, mesh, device, rank, world):
        impl, compiled = VARIANTS[variant]
        if compiled and config == "single" and args.eager_reference:
            compiled = False
        if compiled:
            torch._dynamo.reset()  # a fresh cache: no recompile limit met across models
        torch._dynamo.utils.counters.clear()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        self.device = device
        self.model = build(cfg, impl, weights, config, mesh, device)
        self.forward = torch.compile(self.model, dynamic=False) if compiled else self.model
        self.opt = make_optimizer(args, self.model)
        self.x, self.tgt, self.cos, self.sin, self.scale, self.reduce = local_inputs(
            config, *data, mesh, rank, world)

    def step(self):
        """One training step; returns the loss (this rank's part, detached)."""
        self.opt.zero_grad(set_to_none=True)
        out = self.forward(self.x, self.cos, self.sin)
        loss = (out.float() - self.tgt.float()).pow(2).sum() * self.scale
        loss.backward()
        return loss.detach()

    def loss_of(self, part):
        if self.reduce is not None:
            part = part.clone()
            dist.all_reduce(part, op=self.reduce)
        return part.item()

    def compile_stats(self):
        """Graphs compiled since this run started (dynamo's counter; under FSDP2 the model's
        loop over the blocks runs eagerly, as FSDP's hooks break the graph there, and each block
        is a graph), and the peak GPU memory."""
        out = {"graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"]}
        if self.device.type == "cuda":
            out["peak_memory_gb"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        return out

    def grads(self):
        """Every parameter's whole gradient (collective on DTensors; None: no gradient)."""
        return {n: None if p.grad is None else full(p.grad).detach()
                for n, p in self.model.named_parameters()}


def rel_err(a, ref):
    a, ref = a.double(), ref.double()
    return ((a - ref).norm() / ref.norm().clamp_min(torch.finfo(torch.float64).tiny)).item()


def timed(run, device, warmup, iters, world):
    for _ in range(warmup):
        run.step()
        run.opt.step()
    times = []
    for _ in range(iters):
        sync(device)
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        run.step()
        run.opt.step()
        sync(device)
        times.append(time.perf_counter() - t0)
    t = torch.tensor(times, dtype=torch.float64, device=device)
    if world > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's time of each step
    return [v * 1e3 for v in t.tolist()]


def reference(args, cfg, variant, weights, data, device):
    """Rank 0 alone: the unparallelized model of the variant on the whole batch. Returns the
    loss and gradients of each step, and its step times."""
    run = Run(args, cfg, variant, "single", weights, data, None, device, 0, 1)
    losses, grads = [], []
    t0 = time.perf_counter()
    for _ in range(args.steps):
        losses.append(run.loss_of(run.step()))
        grads.append(run.grads())
        run.opt.step()
    sync(device)
    first = time.perf_counter() - t0
    times = timed(run, device, args.warmup, args.iters, 1)
    stats = run.compile_stats()
    del run
    return losses, grads, first, times, stats


def check_and_time(args, cfg, variant, config, weights, data, ref, mesh, device, rank, world,
                   namespace):
    run = Run(args, cfg, variant, config, weights, data, mesh, device, rank, world)
    tol = tolerance(args.dtype)
    losses, loss_err, grad_err, failures, op_calls = [], 0.0, {}, [], None
    t0 = time.perf_counter()
    for s in range(args.steps):
        if s == 0 and not VARIANTS[variant][1] and VARIANTS[variant][0] == "fusegen":
            with FusegenOpLog(namespace) as log:
                part = run.step()
            op_calls = log.calls
        else:
            part = run.step()
        loss = run.loss_of(part)
        grads = run.grads()
        run.opt.step()
        losses.append(loss)
        if rank == 0 and ref is not None:
            ref_losses, ref_grads = ref
            e = abs(loss - ref_losses[s]) / abs(ref_losses[s])
            loss_err = max(loss_err, e)
            if not e <= tol:
                failures.append(f"step {s}: loss {loss!r} vs reference {ref_losses[s]!r} "
                                f"(relative error {e:.3g} > {tol:.3g})")
            for name, g in grads.items():
                r = ref_grads[s].get(name)
                if (g is None) != (r is None):
                    failures.append(f"step {s}: {name}: gradient {'missing' if g is None else ''}"
                                    f"{'' if r is not None else 'where the reference has none'}")
                    continue
                if g is None:
                    continue
                if g.shape != r.shape:
                    failures.append(f"step {s}: {name}: gradient shape {tuple(g.shape)} vs "
                                    f"{tuple(r.shape)}")
                    continue
                e = rel_err(g, r)
                grad_err[name] = max(grad_err.get(name, 0.0), e)
                if not e <= tol:
                    failures.append(f"step {s}: {name}: gradient relative error {e:.3g} > "
                                    f"{tol:.3g}")
        del grads
    sync(device)
    first = time.perf_counter() - t0
    times = timed(run, device, args.warmup, args.iters, world)
    stats = run.compile_stats()
    del run
    return {
        **stats,
        "passed": not failures if rank == 0 and ref is not None else None,
        "losses": losses,
        "max_loss_rel_err": loss_err,
        "max_grad_rel_err": max(grad_err.values(), default=0.0),
        "worst_grad": max(grad_err, key=grad_err.get) if grad_err else None,
        "grad_rel_err": grad_err,
        "failures": failures[:20],
        "checked_steps_s": first,
        "step_ms": statistics.median(times),
        "step_ms_all": times,
        "fusegen_op_calls": op_calls,
    }


def break_rule(pkg, op):
    """Re-registers <op>_backward's sharding rule with Partial gradients declared Replicate."""
    from torch.distributed.tensor.experimental import register_sharding
    support = sys.modules[pkg.__name__ + "._support"]
    spec = sys.modules[f"{pkg.__name__}.{op}"].SPEC

    def wrong(*args, **kwargs):
        return [([Replicate() if isinstance(p, Partial) else p for p in outs], ins)
                for outs, ins in support._backward_shardings(spec, *args, **kwargs)]

    register_sharding(getattr(support.op_namespace(), op + "_backward").default)(wrong)


# ---- report -------------------------------------------------------------------------------

def device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def speedups(res):
    out = {}
    for config, by_variant in res.items():
        ms = {v: r["step_ms"] for v, r in by_variant.items() if "step_ms" in r}
        s = {}
        for a, b in (("fusegen+compile", "eager"), ("fusegen+compile", "compile-only"),
                     ("fusegen", "eager"), ("compile-only", "eager")):
            if a in ms and b in ms:
                s[f"{a} over {b}"] = ms[b] / ms[a]
        out[config] = s
    return out


def write_report(path, meta, res):
    meta = dict(meta, speedups=speedups(res), results=res)
    with open(os.path.join(path, "llama_block.json"), "w") as f:
        json.dump(meta, f, indent=1)
    c = meta["shapes"]
    lines = [
        "# Llama-style block on 2 ranks: fusegen vs eager vs torch.compile",
        "",
        f"- device: {meta['device_name']} x {meta['world_size']} ({meta['backend']}), "
        f"torch {meta['torch']}, {meta['date']}",
        f"- shapes: batch {c['batch']}, seq {c['seq']}, hidden {c['hidden']}, heads "
        f"{c['heads']} (kv {c['kv_heads']}) x {c['head_dim']}, intermediate "
        f"{c['intermediate']}, layers {c['layers']}; {meta['dtype']} weights and activations "
        f"(no fp32 master), {meta['optimizer']}",
        f"- check: {meta['steps']} steps, loss and every parameter's gradient (full_tensor()) "
        f"against the unparallelized model of the same variant on rank 0, relative 2-norm error "
        f"<= {meta['tolerance']:.3g} ({meta['tolerance_eps']} x eps({meta['dtype']}))",
        f"- timing: median over {meta['iters']} steps (after {meta['warmup']} warmup) of the "
        "slowest rank's forward + backward + optimizer step, ms",
        "",
        "| config | variant | step ms | check | max loss err | max grad err (param) | "
        "checked steps incl. compile, s | graphs | peak GiB |",
        "| --- | --- | ---: | --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for config, by_variant in res.items():
        for v, r in by_variant.items():
            if "error" in r:
                lines.append(f"| {config} | {v} | - | ERROR: {r['error'].splitlines()[-1][:150]} "
                             "| | | | | |")
                continue
            check = "-" if r.get("passed") is None else ("pass" if r["passed"] else "FAIL")
            peak = f"{r['peak_memory_gb']:.1f}" if "peak_memory_gb" in r else "-"
            lines.append(
                f"| {config} | {v} | {r['step_ms']:.2f} | {check} | {r['max_loss_rel_err']:.2e} "
                f"| {r['max_grad_rel_err']:.2e} ({r['worst_grad']}) | {r['checked_steps_s']:.1f} "
                f"| {r['graphs']} | {peak} |")
    single = meta.get("single_rank_reference") or {}
    if single:
        lines += ["", "The references (rank 0 alone, the whole batch, "
                  f"{'uncompiled' if meta.get('eager_reference') else 'same compile setting'}): "
                  "step ms " + ", ".join(f"{v} {r['step_ms']:.2f}" for v, r in single.items())]
    lines += ["", "Speedups (step time ratio):", ""]
    for config, s in meta["speedups"].items():
        for k, v in s.items():
            lines.append(f"- {config}: {k}: {v:.3f}x")
    calls = {c: r["fusegen"]["fusegen_op_calls"] for c, r in res.items()
             if r.get("fusegen", {}).get("fusegen_op_calls")}
    if calls:
        lines += ["", "fusegen ops called in one step of the fusegen variant (argument "
                  "placements; `tensor`: a plain tensor):", ""]
        for c, d in calls.items():
            lines.append(f"- {c}: " + "; ".join(f"{k} x{n}" for k, n in d.items()))
    fails = [(c, v, r) for c, d in res.items() for v, r in d.items()
             if r.get("failures") or "error" in r]
    if fails:
        lines += ["", "Failures:", ""]
        for c, v, r in fails:
            for f_ in r.get("failures", []) or [r.get("error", "").strip().splitlines()[-1]]:
                lines.append(f"- {c} {v}: {f_}")
    lines.append("")
    with open(os.path.join(path, "llama_block.md"), "w") as f:
        f.write("\n".join(lines))


# ---- main ---------------------------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for llama_block.json and .md")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--dtype", choices=("bf16", "fp32", "fp16"), default=None,
                   help="weights and activations (default: bf16 on cuda, fp32 on cpu)")
    p.add_argument("--tiny", action="store_true",
                   help="the CPU default shapes on any device: " + ", ".join(
                       f"{k} {v}" for k, v in TINY.items()))
    p.add_argument("--batch", type=int, help="global batch (fsdp2: split by ranks); default "
                   f"{CUDA_SHAPES['batch']} (cuda), {TINY['batch']} (cpu)")
    for k in ("seq", "hidden", "heads", "kv_heads", "intermediate"):
        p.add_argument("--" + k.replace("_", "-"), type=int,
                       help=f"default {CUDA_SHAPES[k]} (cuda), {TINY[k]} (cpu)")
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--eps", type=float, default=1e-5)
    p.add_argument("--steps", type=int, default=5, help="checked training steps")
    p.add_argument("--warmup", type=int, default=None, help="default 3 (cuda), 1 (cpu)")
    p.add_argument("--iters", type=int, default=None,
                   help="timed steps, default 20 (cuda), 3 (cpu)")
    p.add_argument("--optim", choices=("sgd", "adamw"), default="sgd")
    p.add_argument("--lr", type=float, default=None, help="default 0.5 (sgd), 1e-4 (adamw)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated, of {', '.join(VARIANTS)}")
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated: tp_sp, fsdp2")
    p.add_argument("--no-compile", action="store_true",
                   help="skip the compiled variants (the CPU smoke test)")
    p.add_argument("--eager-reference", action="store_true",
                   help="run the references of the compiled variants uncompiled (two compiles "
                        "fewer; the check then also covers inductor's rounding)")
    p.add_argument("--no-reference-check", dest="check", action="store_false",
                   help="time only (no reference run, no check)")
    p.add_argument("--ops", default="fusegen_ops", help="the fusegen ops package to import")
    p.add_argument("--ops-path", default=None, help="a directory to put on sys.path first")
    p.add_argument("--break-rule", default=None, metavar="OP",
                   help="declare OP's backward Partial gradients Replicate (the check must fail)")
    args = p.parse_args()
    shapes = TINY if args.tiny or args.device == "cpu" else CUDA_SHAPES
    for k, v in shapes.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    args.dtype = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}[
        args.dtype or ("bf16" if args.device == "cuda" else "fp32")]
    cuda = args.device == "cuda"
    args.warmup = args.warmup if args.warmup is not None else (3 if cuda else 1)
    args.iters = args.iters if args.iters is not None else (20 if cuda else 3)
    args.lr = args.lr if args.lr is not None else (0.5 if args.optim == "sgd" else 1e-4)
    args.variants = [v for v in args.variants.split(",") if v]
    args.configs = [c for c in args.configs.split(",") if c]
    for v in args.variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r}")
    for c in args.configs:
        if c not in CONFIGS:
            p.error(f"unknown config {c!r}")
    if args.no_compile:
        args.variants = [v for v in args.variants if not VARIANTS[v][1]]
    return args


def main():
    global OPS
    args = parse_args()
    if args.ops_path:
        sys.path.insert(0, args.ops_path)
    namespace = None
    if any(VARIANTS[v][0] == "fusegen" for v in args.variants) or args.break_rule:
        OPS = importlib.import_module(args.ops)
        namespace = sys.modules[OPS.__name__ + "._support"].NAMESPACE
    if args.break_rule:
        break_rule(OPS, args.break_rule)

    cuda = args.device == "cuda"
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        torch.backends.cuda.matmul.allow_tf32 = False  # (fp32 runs: fp32 matmuls)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(minutes=10),
                            **({"device_id": device} if cuda else {}))
    mesh = init_device_mesh(args.device, (world,))

    cfg = {"batch": args.batch, "seq": args.seq, "hidden": args.hidden, "heads": args.heads,
           "kv_heads": args.kv_heads, "head_dim": args.hidden // args.heads,
           "intermediate": args.intermediate, "layers": args.layers, "eps": args.eps}
    for k in ("heads", "kv_heads", "intermediate", "seq"):
        assert cfg[k] % world == 0, f"{k} {cfg[k]} is not divisible by the {world} ranks"
    assert "fsdp2" not in args.configs or cfg["batch"] % world == 0, \
        f"fsdp2: batch {cfg['batch']} is not divisible by the {world} ranks"

    weights = initial_weights(cfg, args.dtype, args.seed)
    x, tgt = batch(cfg, args.dtype, args.seed)
    cos, sin = rope_tables(cfg, args.dtype, device)
    data = (x.to(device), tgt.to(device), cos, sin)
    os.makedirs(args.out, exist_ok=True)
    meta = {
        "device_name": device_name(device), "device": args.device, "world_size": world,
        "backend": dist.get_backend(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "shapes": cfg, "dtype": str(args.dtype).replace("torch.", ""),
        "optimizer": f"{'SGD momentum 0.9' if args.optim == 'sgd' else 'AdamW'} lr {args.lr}",
        "steps": args.steps, "warmup": args.warmup, "iters": args.iters,
        "tolerance": tolerance(args.dtype), "tolerance_eps": TOLERANCE_EPS[args.dtype],
        "eager_reference": args.eager_reference, "break_rule": args.break_rule,
        "ops_package": OPS and OPS.__name__,
    }
    if rank == 0:
        print(f"llama_block_tp: {meta['device_name']} x {world}, torch {torch.__version__}, "
              f"{meta['dtype']}, shapes {cfg}", flush=True)

    res = {c: {} for c in args.configs}
    res_single = {}
    ok = True
    for variant in args.variants:
        ref = None
        if args.check:  # rank 0: the 1-process reference; the others wait
            err = None
            if rank == 0:
                try:
                    losses, grads, first, times, stats = reference(args, cfg, variant,
                                                                   weights, data, device)
                    ref = (losses, grads)
                    res_single[variant] = {"losses": losses, "checked_steps_s": first,
                                           "step_ms": statistics.median(times),
                                           "step_ms_all": times, **stats}
                    print(f"[reference 1 rank] {variant:16s} step {statistics.median(times):9.2f} "
                          f"ms  losses {' '.join(f'{v:.6g}' for v in losses)}", flush=True)
                except Exception:
                    err = traceback.format_exc()
                    print(f"[reference 1 rank] {variant}: ERROR\n{err}", flush=True)
            flag = torch.tensor([0 if err is None else 1], device=device)
            dist.broadcast(flag, 0)
            if flag.item():
                ok = False
                for c in args.configs:
                    res[c][variant] = {"error": "the reference run raised:\n" + (err or "")}
                continue
        for config in args.configs:
            try:
                r = check_and_time(args, cfg, variant, config, weights, data, ref, mesh, device,
                                   rank, world, namespace)
            except Exception:
                r = {"error": traceback.format_exc()}
                print(f"[rank {rank}] {config} {variant}: ERROR\n{r['error']}", flush=True)
            res[config][variant] = r
            if rank == 0:
                if "error" in r:
                    ok = False
                    print(f"[{config}] {variant:16s} ERROR: {r['error'].strip().splitlines()[-1]}",
                          flush=True)
                else:
                    passed = r["passed"] if args.check else None
                    ok = ok and passed is not False
                    check = ("check skipped" if passed is None else
                             f"check {'PASS' if passed else 'FAIL'} (max rel err loss "
                             f"{r['max_loss_rel_err']:.2e}, grads {r['max_grad_rel_err']:.2e} "
                             f"{r['worst_grad']}; tol {tolerance(args.dtype):.2e})")
                    print(f"[{config}] {variant:16s} step {r['step_ms']:9.2f} ms  {check}; "
                          f"{r['graphs']} graphs compiled", flush=True)
                    for f_ in r["failures"][:5]:
                        print(f"    {f_}", flush=True)
                    if r["fusegen_op_calls"]:
                        print("    fusegen ops seen: " + "; ".join(
                            f"{k} x{n}" for k, n in r["fusegen_op_calls"].items()), flush=True)
                write_report(args.out, dict(meta, single_rank_reference=res_single), res)
        del ref
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    flag = torch.tensor([0 if ok else 1], device=device)
    dist.broadcast(flag, 0)
    ok = flag.item() == 0
    if rank == 0:
        write_report(args.out, dict(meta, single_rank_reference=res_single, passed=ok), res)
        for config, s in speedups(res).items():
            for k, v in s.items():
                print(f"[{config}] speedup {k}: {v:.3f}x", flush=True)
        print(f"llama_block_tp: {'PASSED' if ok else 'FAILED'}; wrote "
              f"{os.path.join(args.out, 'llama_block.md')}", flush=True)
    dist.destroy_process_group()
    # os._exit, not sys.exit: the interpreter's teardown after this sometimes ended a gloo rank
    # with "terminate called without an active exception" (a thread still joinable while static
    # objects go; with either fusegen glue, 4 runs of 21 and 1 of 6 on 2 busy cores, after the
    # run had passed), turning a finished, checked run into a failed process. Everything this
    # process owes is written above and flushed here.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    main()
