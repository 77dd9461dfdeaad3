import sys, torch
sys.path.insert(0, "tests/difffuzz")
import checker as C, lang, prims
prims.load(); torch.set_num_threads(2)
fo = C.load_package("/tmp/difffuzz-regressions/pkg")
spec = lang.load_spec("tests/difffuzz/regressions/fz407_26.yaml")
c = C.SpecChecker(spec, getattr(fo, spec.op), "cpu", seed=int(spec.directives["seed"]) + C.zlib_hash(spec.op))
C.EXPLAIN = True
# the CUDA plan's order (checker.run with device cuda), run on the CPU
sets = c.call_sets(); kw0 = sets[0]; plan = []
if torch.float64 in c.dtypes:
    plan += [(torch.float64, (6,), 7, kw0), (torch.float64, (2, 1, 3), 33, kw0), (torch.float64, (5,), 1, kw0)]
    plan += [(torch.float64, (4,), 9, kw) for kw in sets[1:]]
for dt, lead, D in [(torch.float32, (4, 5), 33), (torch.float32, (3,), 64), (torch.bfloat16, (8,), 64), (torch.bfloat16, (3,), 7), (torch.float16, (8,), 33), (torch.float16, (2, 3), 1)]:
    if dt in c.dtypes: plan.append((dt, lead, D, kw0))
big = [(torch.float32, (5,), 1000), (torch.bfloat16, (3,), 4096), (torch.float64, (2,), 2049), (torch.float32, (1500,), 40)]
plan = [p + (None,) for p in plan] + [(dt, lead, D, kw0, None) for dt, lead, D in big if dt in c.dtypes]
plan = [(dt, *c.shape_for(lead, D, k), kw, lay) for k, (dt, lead, D, kw, lay) in enumerate(plan)]
for dt, lead, D, kw, lay in plan:
    try:
        c.forward_backward(dt, lead, D, kw, backward=True, layout=lay)
        print("ok", dt, lead, D)
    except C.Failure as f:
        print("FAIL", dt, lead, D, str(f)[:600])
