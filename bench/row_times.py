"""fusegen-only forward and forward+backward medians of row ops at the benchmark's large
shapes (bf16), one line per op and shape: the quick comparison used to choose between row-plan
variants (FUSEGEN_ROW_GRID, FUSEGEN_ROW_CONFIG, or two builds), without bench/run.py's
comparison implementations.

    FUSEGEN_ROW_GRID=rows python3 bench/row_times.py rows rmsnorm,layernorm [2048x32768,...]

The third argument replaces the shapes (ROWSxD, comma-separated).
"""
import importlib
import sys

import torch

import fusegen_ops  # noqa: F401  (registers the ops)
from fusegen_ops import benchmark


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    label, ops = sys.argv[1], sys.argv[2].split(",")
    shapes = [(32768, 4096), (16384, 8192), (65536, 1024)]
    if len(sys.argv) == 4:
        shapes = [tuple(int(n) for n in s.split("x")) for s in sys.argv[3].split(",")]
    for op in ops:
        entry = importlib.import_module(f"fusegen_ops.{op}.bench_{op}").ENTRY
        for rows, D in shapes:
            try:
                forward, step, xg = benchmark.timed_steps(entry.spec, entry.op, rows, D,
                                                          torch.bfloat16, "cuda")
                fwd = benchmark._time(forward)
                both = benchmark._time(step, grad_to_none=xg)
            except RuntimeError as error:  # a FUSEGEN_ROW_CONFIG this shape cannot take
                print(f"{label} {op} {rows}x{D} refused: {error}", flush=True)
                continue
            print(f"{label} {op} {rows}x{D} fwd {fwd:.4f} fwd+bwd {both:.4f}", flush=True)


if __name__ == "__main__":
    main()
