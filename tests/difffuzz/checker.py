"""Checks one built package of generated ops against the fuzzer's references (run by run.py in
worker processes; usable alone):

    python3 tests/difffuzz/checker.py --pkg DIR --device cpu SPEC.yaml...

For every spec: forward and input gradients in float64 against the exact reference (tight:
the tolerance is the float64 Monte Carlo spread), float32 / bfloat16 / float16 against the
reference on the same (rounded) values with the Monte Carlo error model of reference.py,
empty shapes (0 rows, D = 0) and odd ones (D = 1, 7, 33, several leading dims).
Prints one JSON line per spec (a `start` line first, so a crash names its spec)."""
import argparse
import importlib.util
import json
import math
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import lang  # noqa: E402
import prims  # noqa: E402
import reference as R  # noqa: E402
from lang import COL, FULL, ROW, SCALAR  # noqa: E402

K = 8.0        # tolerance = K x the Monte Carlo spread + a few roundoffs of the value
SAMPLES = 6    # Monte Carlo runs per check
REF_UNDERFLOW = 1e-300  # below this, the float64 reference may have lost a value to underflow
EXPLAIN = False  # --explain: failures show the error model's runs at the worst element
DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
          "float16": torch.float16}


def load_package(d):
    """fusegen_ops from an in-place build in d: the op folders d/<op> are its subpackages."""
    d = os.path.abspath(d)
    spec = importlib.util.spec_from_file_location(
        "fusegen_ops", os.path.join(d, "fusegen_ops", "__init__.py"),
        submodule_search_locations=[os.path.join(d, "fusegen_ops"), d])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fusegen_ops"] = mod
    spec.loader.exec_module(mod)
    return mod


class Failure(Exception):
    pass


def shape_of(cls, lead, D):
    return {FULL: [*lead, D], COL: [D], ROW: list(lead), SCALAR: []}[cls]


# The sizes of an op's named dims in its checks, by how many it has (cycled through the checks):
# several rows along each, one only, and each of them last or first
NAMED_SIZES = {1: [(3,), (1,), (4,), (2,)], 2: [(2, 3), (3, 1), (1, 2), (2, 2)],
               3: [(2, 1, 3), (1, 2, 2), (3, 2, 1)]}


class SpecChecker:
    def __init__(self, spec: lang.Spec, op, device, seed, skip_known=False):
        self.skip_known = skip_known
        self.spec, self.op, self.device = spec, op, device
        self.ref, self.src = R.compile_reference(spec)
        self.gen = torch.Generator().manual_seed(seed)
        self.seed = seed
        self.failures = []
        self.checks = 0
        self.unchecked = 0
        self.fallback = 0
        self.elements = 0
        dt = spec.dtypes or list(DTYPES)
        self.dtypes = [DTYPES[d] for d in dt]

    # ---- helpers -----------------------------------------------------------------------------
    def call_sets(self):
        sets = self.spec.calls or [{}]
        out = []
        for s in sets:
            kw = dict(s)
            for a in self.spec.attrs:
                if a.name not in kw and a.default is None:
                    kw[a.name] = {"float": 0.5, "int": 2, "bool": True}[a.type]
            out.append(kw)
        return out

    def split(self, lead):
        """A call's leading dims as (the batch `...`, the sizes of the op's named dims)."""
        nd = len(self.spec.dims)
        batch = tuple(lead[:len(lead) - nd])
        return batch, dict(zip(self.spec.dims, lead[len(lead) - nd:]))

    def shape_for(self, lead, D, k, keep_batch=False):
        """The plan's (leading dims, D) for this op: an op with moves needs an even D; an op
        with named dims gets them after the batch (sizes from NAMED_SIZES, by the check's index
        k; every third check drops a batch dim, so `...` is empty at times), the batch shrunk
        where the check would grow much bigger."""
        if self.spec.has_moves() and D % 2:
            D += 1
        nd = len(self.spec.dims)
        if not nd:
            return tuple(lead), D
        named = NAMED_SIZES[nd][k % len(NAMED_SIZES[nd])]
        batch = list(lead)
        if k % 3 == 1 and not keep_batch:
            batch = batch[:-1]
        elif batch and math.prod(batch) * math.prod(named) * max(D, 1) > 40000:
            batch[0] = max(1, batch[0] // math.prod(named))
        return tuple(batch) + tuple(named), D

    def inputs(self, lead, D, dtype, scale=1.0):
        batch, named = self.split(lead)
        xs = []
        for name, _ in self.spec.inputs:
            shape = self.spec.shape(name).sizes(batch, named, D)
            t = torch.randn(shape, dtype=torch.float64, generator=self.gen) * scale
            xs.append(t.to(dtype).to(self.device))
        return xs

    @staticmethod
    def relayout(t, layout):
        """The same values in another memory layout: 'strided' (every other element of a
        buffer), 'offset' (one element past the start of a buffer: misaligned vectors)."""
        if layout is None or t.dim() == 0:
            return t
        if layout == "strided":
            buf = torch.zeros(*t.shape, 2, dtype=t.dtype, device=t.device)
            buf[..., 0] = t
            return buf[..., 0]
        buf = torch.zeros(t.numel() + 1, dtype=t.dtype, device=t.device)
        return buf[1:].view(t.shape).copy_(t)

    def run_op(self, xs, kw):
        out = self.op(*xs, **kw)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def run_ref(self, model, xs, kw):
        return model_call(self.ref, model, xs, kw)

    def fail(self, what, msg):
        self.failures.append({"check": what, "error": msg})

    def compare(self, what, got, want, center, samples, model, extra_tol=None):
        """Elementwise |got - want| <= K * spread + a few roundoffs of the value, where the
        spread is the largest distance of the Monte Carlo samples from the model's own
        unperturbed run (`center`). Elements whose exact value is not finite, or that a
        sample overflows, are not checked; where the documented computation itself (center)
        is not finite but the exact value is, the op must still give a finite value close
        to the exact one (a looser fallback tolerance)."""
        self.checks += 1
        if got is None:
            raise Failure(f"{what}: missing (None)")
        if list(got.shape) != list(want.shape):
            raise Failure(f"{what}: shape {list(got.shape)} != {list(want.shape)}")
        g = got.detach().double().cpu()
        w = want.detach().double().cpu()
        c = center.detach().double().cpu()
        dev = torch.zeros_like(w)
        for smp in samples:
            dev = torch.maximum(dev, (smp.detach().double().cpu() - c).abs().nan_to_num(math.inf, math.inf, math.inf))
        # The last term is the exact value's own error near underflow: torch's float64 formulas
        # lose results there (silu(-720) = -720 / (1 + e^720) = -0 in torch, -1.58e-310 in
        # fusegen and in fact; its gradient 1.2e-307 becomes 0).
        tol = (K * dev + (4 * model.u_compute + 2 * model.u_store) * w.abs() + 4 * model.tiny_store
               + model.fast_tiny + REF_UNDERFLOW)
        if extra_tol is not None:
            tol = tol + extra_tol.double().cpu()
        finite_w = torch.isfinite(w) & (w.abs() <= model.max_store)  # beyond the dtype: unchecked
        fallback = finite_w & ~torch.isfinite(c)
        fb = (1e-3 + 4 * model.u_store) * w.abs() + 1e-6
        if extra_tol is not None:
            fb = fb + extra_tol.double().cpu()
        tol = torch.where(fallback, fb, tol)
        checked = finite_w & torch.isfinite(tol)
        self.elements += w.numel()
        self.unchecked += int((~checked).sum())
        self.fallback += int(fallback.sum())
        err = (g - w).abs()
        bad = checked & ~(err <= tol)
        if bad.any():
            ratio = torch.where(bad, (err / tol.clamp_min(1e-300)).nan_to_num(math.inf), torch.zeros_like(err))
            i = int(ratio.reshape(-1).argmax())
            extra = ""
            if EXPLAIN:
                extra = (f"; error model there: centre {c.reshape(-1)[i].item():.9g}, runs "
                         + ", ".join(f"{s.detach().double().cpu().reshape(-1)[i].item():.9g}" for s in samples))
            raise Failure(f"{what}: {int(bad.sum())} of {w.numel()} elements off; worst at flat index {i}: "
                          f"got {g.reshape(-1)[i].item():.9g}, want {w.reshape(-1)[i].item():.9g}, "
                          f"tolerance {tol.reshape(-1)[i].item():.3g}" + extra)

    # ---- checks ------------------------------------------------------------------------------
    def forward_backward(self, dtype, lead, D, kw, backward=True, scale=1.0, layout=None):
        name = (f"{str(dtype)[6:]} lead={tuple(lead)} D={D}" + (f" attrs={kw}" if kw else "")
                + (f" {layout} inputs" if layout else ""))
        xs = self.inputs(lead, D, dtype, scale)
        x64 = [t.double() for t in xs]
        try:
            if backward:
                leaves = [self.relayout(t.clone(), layout).requires_grad_(True) for t in xs]
                outs = self.run_op(leaves, kw)
            else:
                with torch.no_grad():
                    outs = self.run_op([self.relayout(t, layout) for t in xs], kw)
        except Exception as e:  # noqa: BLE001
            raise Failure(f"forward {name}: raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        if len(outs) != len(self.spec.outputs):
            raise Failure(f"forward {name}: {len(outs)} outputs, spec has {len(self.spec.outputs)}")
        exact = self.run_ref(R.Exact(self.device), x64, kw)
        center_model = R.MonteCarlo(dtype, self.device, u_scale=0.0, emulate_range=False)
        center = self.run_ref(center_model, x64, kw)
        models = [R.MonteCarlo(dtype, self.device, seed=self.seed * 7 + k) for k in range(SAMPLES)]
        samples = [self.run_ref(m, x64, kw) for m in models]
        for j, (oname, _) in enumerate(self.spec.outputs):
            o = outs[j]
            if o.dtype != dtype or o.device.type != torch.device(self.device).type:
                raise Failure(f"forward {name}: output {oname} has dtype {o.dtype} on {o.device}")
            self.compare(f"forward {name}: output {oname}", o, exact[j], center[j], [s[j] for s in samples],
                         models[0])
        if not backward:
            return
        gouts = [self.relayout(torch.randn(o.shape, dtype=torch.float64, generator=self.gen).to(dtype).to(self.device),
                               layout) for o in outs]
        try:
            got = torch.autograd.grad(outs, leaves, gouts, allow_unused=True)
        except Exception as e:  # noqa: BLE001
            raise Failure(f"backward {name}: raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        g64 = [g.double() for g in gouts]
        want = ref_grads(self.ref, R.Exact(self.device), x64, kw, g64)
        cgrads = ref_grads(self.ref, R.MonteCarlo(dtype, self.device, u_scale=0.0, emulate_range=False), x64, kw, g64)
        sgrads = [ref_grads(self.ref, R.MonteCarlo(dtype, self.device, seed=self.seed * 11 + k), x64, kw, g64)
                  for k in range(SAMPLES)]
        extra = self.broadcast_sum_terms(x64, kw, g64, models[0])
        for i, (iname, cls) in enumerate(self.spec.inputs):
            w = want[i]
            if w is None:
                if got[i] is not None and got[i].any():
                    raise Failure(f"backward {name}: grad of {iname} nonzero where the reference has none")
                continue
            if got[i] is None:
                raise Failure(f"backward {name}: grad of {iname} missing")
            if got[i].dtype != dtype:
                raise Failure(f"backward {name}: grad of {iname} has dtype {got[i].dtype}")
            ss = [s[i] if s[i] is not None else torch.zeros_like(w) for s in sgrads]
            cg = cgrads[i] if cgrads[i] is not None else torch.zeros_like(w)
            self.compare(f"backward {name}: grad of {iname}", got[i], w, cg, ss, models[0], extra[i])

    def broadcast(self, name, cls):
        """Whether input `name` is broadcast over leading dims: [D], [], or named dims without
        the batch. Its gradient is a sum over the rows (the dims it omits)."""
        return cls in (COL, SCALAR) or self.spec.shape(name).mapped

    def broadcast_sum_terms(self, x64, kw, g64, model):
        """For broadcast inputs ([D], [], [S, D], ...), whose gradient is a sum over rows:
        u sqrt(rows) sum|terms|, the terms being the per-element (or per-row) gradients of the
        input expanded to the op's shape."""
        spec = self.spec
        fi = [n for n, _ in spec.inputs].index(spec.full_input())
        lead = tuple(x64[fi].shape[:-1])
        full = (*lead, x64[fi].shape[-1] // spec.shape(spec.full_input()).d)
        out = [None] * len(x64)
        if not any(self.broadcast(n, c) for n, c in spec.inputs):
            return out
        xe, views = [], []
        for (n, c), t in zip(spec.inputs, x64):
            sh = spec.shape(n)
            v = t
            if sh.mapped:  # None at the dims it omits, as the reference indexes it
                v = t[tuple(slice(None) if d in sh.dims else None for d in spec.dims)
                      + ((slice(None),) if sh.d else ())]
            views.append(v)
            if self.broadcast(n, c):
                v = v.expand(full if sh.d or c == SCALAR else lead).clone()
            xe.append(v if self.broadcast(n, c) else t)
        exact = R.Exact(self.device)
        exact.expanded_inputs = True
        terms = ref_grads(self.ref, exact, xe, kw, g64)
        rows = max(1, math.prod(lead))
        for i, (n, c) in enumerate(spec.inputs):
            if self.broadcast(n, c) and terms[i] is not None:
                if x64[i].dim():
                    s = terms[i].abs().sum_to_size(views[i].shape).reshape(x64[i].shape)
                else:
                    s = terms[i].abs().sum()
                out[i] = K * model.u_compute * math.sqrt(rows) * s * 4
        return out

    def empty(self, lead, D, kw):
        name = f"empty lead={tuple(lead)} D={D}"
        self.checks += 1
        xs = [t.requires_grad_(True) for t in self.inputs(lead, D, torch.float32)]
        try:
            outs = self.run_op(xs, kw)
        except Exception as e:  # noqa: BLE001
            raise Failure(f"{name}: raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        for (oname, n), o in zip(self.spec.outputs, outs):
            cls = lang.shape_class(n, self.spec)
            if n.op == "call" and n.name == "cat":
                want = [*lead, len(n.args) * D]
            else:
                want = list(lead) if cls == ROW else [D] if cls == COL else [*lead, D]
            if list(o.shape) != want:
                raise Failure(f"{name}: output {oname} has shape {list(o.shape)}, want {want}")
        try:
            ref = self.run_ref(R.Exact(self.device), [t.detach().double() for t in xs], kw)
        except Exception:  # noqa: BLE001  (torch's amax refuses empty rows: values unchecked)
            ref = None
        if ref is not None:
            for (oname, _), o, w in zip(self.spec.outputs, outs, ref):
                if not torch.allclose(o.detach().double().cpu(), w.cpu(), rtol=1e-5, atol=1e-6, equal_nan=True):
                    raise Failure(f"{name}: output {oname} = {o.detach().cpu().tolist()}, want {w.cpu().tolist()}")
        # A gradient through a NaN output (a max or mean of an empty row) is a convention, not
        # a value (torch.maximum(a, nan) passes 1 to both operands, fusegen's rule 0): such an
        # output is seeded with zeros here and left out of the reference's backward.
        finite = [bool(torch.isfinite(w).all()) for w in ref] if ref is not None else [True] * len(outs)
        try:
            grads = torch.autograd.grad(outs, xs, [torch.ones_like(o) if f else torch.zeros_like(o)
                                                   for o, f in zip(outs, finite)], allow_unused=True)
        except Exception as e:  # noqa: BLE001
            raise Failure(f"{name}: backward raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        want = None
        if ref is not None:
            try:
                # An empty output contributes nothing to any gradient (a sum over no elements);
                # the reference computes it through per-row intermediates where torch can
                # turn that zero into 0 * inf (x / D at D = 0), so its seed is left out.
                want = ref_grads(self.ref, R.Exact(self.device), [t.detach().double() for t in xs], kw,
                                 [torch.ones_like(o).double() if o.numel() and f else None
                                  for o, f in zip(outs, finite)])
            except Exception:  # noqa: BLE001
                want = None
        for i, ((iname, _), t, g) in enumerate(zip(self.spec.inputs, xs, grads)):
            if g is not None and list(g.shape) != list(t.shape):
                raise Failure(f"{name}: grad of {iname} has shape {list(g.shape)}, want {list(t.shape)}")
            if want is not None and g is not None and want[i] is not None:
                gg = g.double().cpu()
                if not torch.allclose(gg, want[i].cpu(), rtol=1e-5, atol=1e-6, equal_nan=True):
                    raise Failure(f"{name}: grad of {iname} = {g.cpu().tolist()}, want {want[i].cpu().tolist()}")

    def known_skips(self):
        """Checks to leave out under --skip-known: those that open findings fail (see
        tests/difffuzz/regressions/). None today: every kept finding is fixed."""
        return set()

    def run(self, full=True):
        skips = self.known_skips() if self.skip_known else set()
        self.skipped = sorted(skips)
        sets = self.call_sets()
        kw0 = sets[0]
        plan = []
        if torch.float64 in self.dtypes:
            plan += [(torch.float64, (6,), 7, kw0), (torch.float64, (2, 1, 3), 33, kw0),
                     (torch.float64, (5,), 1, kw0)]
            plan += [(torch.float64, (4,), 9, kw) for kw in sets[1:]]
        for dt, lead, D in [(torch.float32, (4, 5), 33), (torch.float32, (3,), 64),
                            (torch.bfloat16, (8,), 64), (torch.bfloat16, (3,), 7),
                            (torch.float16, (8,), 33), (torch.float16, (2, 3), 1)]:
            if dt in self.dtypes:
                plan.append((dt, lead, D, kw0))
        # Bigger rows: several chunks of the CPU plan, and a long bfloat16 row (row sums of
        # 4096 terms: fz407_26); on CUDA, the launch configurations of long rows (block-wide
        # and re-reading row plans).
        big = ([(torch.float32, (5,), 1000), (torch.bfloat16, (3,), 4096), (torch.float64, (2,), 2049),
                (torch.float32, (1500,), 40)] if self.device == "cuda"
               else [(torch.float32, (700,), 50), (torch.bfloat16, (3,), 4096)])
        plan = [p + (None,) for p in plan]
        plan += [(dt, lead, D, kw0, None) for dt, lead, D in big if dt in self.dtypes]
        # inputs and output gradients in other layouts (the glue's copies and scalar paths)
        plan += [(dt, lead, D, kw0, lay) for dt, lead, D, lay in
                 [(torch.float64, (3, 2), 9, "strided"), (torch.float32, (5,), 12, "offset"),
                  (torch.bfloat16, (4,), 16, "offset")] if dt in self.dtypes]
        plan = [(dt, *self.shape_for(lead, D, k), kw, lay) for k, (dt, lead, D, kw, lay) in enumerate(plan)]
        for dt, lead, D, kw, lay in plan:
            backward = "backward" not in skips
            try:
                self.forward_backward(dt, lead, D, kw, backward=backward, layout=lay)
            except Failure as f:
                self.fail(str(dt)[6:], str(f))
        if torch.float32 in self.dtypes and full:
            empties = [self.shape_for(lead, D, k, keep_batch=True)
                       for k, (lead, D) in enumerate([((0,), 8), ((3,), 0), ((2, 0), 5)])]
            if self.spec.dims:  # a named dim of size 0
                empties.append(((2, 0) + (2,) * (len(self.spec.dims) - 1), self.shape_for((2,), 4, 0)[1]))
            for lead, D in empties:
                try:
                    self.empty(lead, D, kw0)
                except Failure as f:
                    self.fail("empty", str(f))


def model_call(ref, model, xs, kw):
    return ref(model, *xs, **kw)


def ref_grads(ref, model, xs, kw, gouts):
    leaves = [t.detach().clone().requires_grad_(True) for t in xs]
    outs = ref(model, *leaves, **kw)
    used = [(o, g) for o, g in zip(outs, gouts) if o.requires_grad and g is not None]
    if not used:
        return [None] * len(leaves)
    return list(torch.autograd.grad([o for o, _ in used], leaves, [g for _, g in used], allow_unused=True))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--pkg", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-known", action="store_true", help="leave out the checks open findings fail")
    ap.add_argument("--explain", action="store_true", help="show the error model's runs at a failure")
    ap.add_argument("specs", nargs="+")
    args = ap.parse_args(argv)
    global EXPLAIN
    EXPLAIN = args.explain
    prims.load()
    torch.set_num_threads(1)
    fo = load_package(args.pkg)
    print(json.dumps({"loaded": True}), flush=True)
    for path in args.specs:
        t0 = time.time()
        print(json.dumps({"start": path}), flush=True)
        rec = {"spec": path}
        try:
            spec = lang.load_spec(path)
            rec["op"] = spec.op
            op = getattr(fo, spec.op)
            # a kept spec names the run's seed that found it (`# difffuzz-seed: 518`): the
            # inputs and the error model's runs are then those of the finding
            base = int(spec.directives.get("seed", args.seed))
            c = SpecChecker(spec, op, args.device, seed=base + zlib_hash(spec.op),
                            skip_known=args.skip_known)
            c.run()
            rec.update(failures=c.failures, checks=c.checks, unchecked=c.unchecked,
                       fallback=c.fallback, elements=c.elements, skipped=c.skipped,
                       known=sorted(c.known_skips()))
        except Exception as e:  # noqa: BLE001
            rec["failures"] = [{"check": "checker", "error": f"{type(e).__name__}: {e}",
                                "traceback": traceback.format_exc()[-2000:]}]
        rec["seconds"] = round(time.time() - t0, 3)
        print(json.dumps(rec), flush=True)


def zlib_hash(s):
    import zlib
    return zlib.crc32(s.encode()) & 0xFFFF


if __name__ == "__main__":
    main()
