"""Builds every spec of this folder into one package and runs each op's generated checks on
DEVICE (argv[1]); prints one line per op and check."""
import glob, importlib, os, sys, time
import yaml
import fusegen
dev = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
paths = sorted(glob.glob(os.path.join(here, "*.yaml")))
t0 = time.time()
fusegen.load(paths, name="ncops", cpu_only=(dev == "cpu"), jobs=int(os.environ.get("JOBS", "8")))
print(f"built {len(paths)} specs in {time.time() - t0:.0f} s", flush=True)
t = importlib.import_module("ncops.testing")
fails = 0
for p in paths:
    op = yaml.safe_load(open(p))["op"]
    c = importlib.import_module(f"ncops.{op}.test_{op}").CHECKS
    checks = {
        "forward": lambda: [c.forward_matches_reference(dev, d) for d in c.spec.torch_dtypes()],
        "backward": lambda: [c.backward_matches_reference(dev, d) for d in c.spec.torch_dtypes()],
        "extremes": lambda: [c.extreme_magnitudes(dev, d) for d in t.wide_dtypes(c.spec)],
        "gradcheck": lambda: c.gradcheck(dev),
        "partial": lambda: c.partial_gradients(dev),
        "odd_sizes": lambda: c.odd_sizes(dev),
        "opcheck": lambda: c.opcheck(dev),
    }
    for k, fn in checks.items():
        try:
            fn(); print(op, k, "ok", flush=True)
        except Exception as e:
            fails += 1
            print(op, k, "FAIL", type(e).__name__, str(e)[:600].replace("\n", " | "), flush=True)
print(f"{fails} failed", flush=True)
