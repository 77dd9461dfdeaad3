#!/usr/bin/env python3
"""A small test-case reducer for difffuzz findings (in the manner of C-Reduce, much smaller):
deletes outputs, lets, inputs, attrs, header functions and stated derivatives, and replaces
subexpressions by one of their arguments or by a constant, keeping a candidate while the
failure persists. Candidates of one round go into one package, so a round costs one build.

    python3 tests/difffuzz/reduce.py FAILING.yaml --fusegen build-d/fusegen --out /tmp/red \\
        [--match 'bfloat16.*backward'] [--batch 8] [--rounds 12]

The failure persists when run.py's verdict for the candidate has the same kind (fusegen
rejects it, fusegen crashes, the build fails, a wrong result...) and, if --match is given,
a message matching it. Writes the smallest failing spec to OUT/reduced.yaml."""
import argparse
import copy
import os
import re
import shutil
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lang  # noqa: E402
import prims as P  # noqa: E402
from lang import FULL, Function, Node, Spec  # noqa: E402


# ---- rebuilding a spec with one node replaced ------------------------------------------------

def substitute(spec: Spec, repl) -> Spec:
    """A copy of spec in which each node n with repl(n) not None is replaced by repl(n)."""
    memo = {}

    def rebuild(n):
        if id(n) in memo:
            return memo[id(n)]
        r = repl(n)
        if r is not None:
            out = r
        elif n.args:
            out = Node(n.op, n.name, n.value, [rebuild(a) for a in n.args], n.spelling)
        else:
            out = n
        memo[id(n)] = out
        return out

    s = copy.copy(spec)
    s.lets = [(name, rebuild(n)) for name, n in spec.lets]
    s.outputs = [(name, rebuild(n)) for name, n in spec.outputs]
    return s


def size(spec: Spec) -> int:
    text = lang.print_spec(spec)
    return len(text) + (len(print_functions(spec)) if spec.functions else 0)


def print_functions(spec: Spec) -> str:
    return lang.print_header(list(spec.functions.values()))


def used_functions(spec: Spec):
    names = set()
    stack = [n for _, n in spec.outputs + spec.lets]
    for fn in spec.functions.values():
        stack.append(fn.body)
    seen = set()
    todo = list(stack)
    # functions reachable from the outputs (and from the functions they call)
    reach = set()
    frontier = [n for _, n in spec.outputs + spec.lets]
    while frontier:
        nodes = lang.walk(frontier)
        frontier = []
        for n in nodes:
            if n.op == "call" and n.name in spec.functions and n.name not in reach:
                reach.add(n.name)
                fn = spec.functions[n.name]
                frontier.append(fn.body)
                for d in fn.derivatives:
                    if d not in reach:
                        reach.add(d)
                        frontier.append(spec.functions[d].body)
    return reach


def candidates(spec: Spec):
    """Smaller variants of spec, the biggest cuts first."""
    out = []
    # drop an output
    if len(spec.outputs) > 1:
        for i in range(len(spec.outputs)):
            s = copy.copy(spec)
            s.outputs = spec.outputs[:i] + spec.outputs[i + 1:]
            out.append(("drop output " + spec.outputs[i][0], s))
    # drop every unused let, or inline a let
    roots = [n for _, n in spec.outputs]
    reach = {id(n) for n in lang.walk(roots)}
    unused = [name for name, n in spec.lets if id(n) not in reach]
    if unused:
        s = copy.copy(spec)
        s.lets = [(name, n) for name, n in spec.lets if name not in unused]
        out.append(("drop unused lets", s))
    for i, (name, n) in enumerate(spec.lets):
        s = copy.copy(spec)
        s.lets = spec.lets[:i] + spec.lets[i + 1:]
        out.append((f"inline let {name}", s))
    # drop calls directive, dtypes
    if spec.calls:
        s = copy.copy(spec)
        s.calls = []
        out.append(("default attrs only", s))
    if spec.dtypes:
        s = copy.copy(spec)
        s.dtypes = None
        out.append(("default dtypes", s))
    # functions: drop unused, drop stated derivatives
    if spec.functions:
        reach_f = used_functions(spec)
        if set(spec.functions) - reach_f:
            s = copy.copy(spec)
            s.functions = {k: v for k, v in spec.functions.items() if k in reach_f}
            out.append(("drop unused functions", s))
        for name, fn in spec.functions.items():
            if fn.derivatives:
                s = copy.copy(spec)
                s.functions = dict(spec.functions)
                s.functions[name] = Function(fn.name, fn.params, fn.body, [], fn.locals)
                out.append((f"no stated derivative for {name}", s))
    # replace a node by an argument, or by a constant
    nodes = [n for n in lang.walk(roots) if n.op == "call"]
    nodes.sort(key=lambda n: -len(lang.walk([n])))
    for n in nodes:
        for k, a in enumerate(n.args):
            if n.name in lang.CMP_SPELL or n.name == "chunk":  # (a packed input is read by chunks)
                continue
            if n.name == "where" and k == 0:
                continue
            out.append((f"{n.name}(...) -> its argument {k + 1}", substitute(spec, lambda m, n=n, a=a: a if m is n else None)))
        if n.name not in lang.CMP_SPELL:
            out.append((f"{n.name}(...) -> 1", substitute(spec, lambda m, n=n: lang.num(1.0) if m is n else None)))
    # function bodies: replace a node by an argument
    for name, fn in spec.functions.items():
        for n in [m for m in lang.walk([fn.body]) if m.op == "call" and m.name not in lang.CMP_SPELL]:
            for k, a in enumerate(n.args):
                if n.name == "where" and k == 0:
                    continue
                s = copy.copy(spec)
                s.functions = dict(spec.functions)
                memo = {}
                body = _replace(fn.body, n, a, memo)
                locs = [(ln, _replace(lv, n, a, memo)) for ln, lv in fn.locals]
                s.functions[name] = Function(fn.name, fn.params, body, fn.derivatives, locs)
                out.append((f"in {name}: {n.name}(...) -> argument {k + 1}", s))
    # drop an input or an attr: its uses become constants
    for name, cls in spec.inputs:
        if cls == FULL and sum(1 for _, c in spec.inputs if c == FULL) == 1:
            continue
        sh = spec.shape(name)
        if sh.batch and sh.d and sum(1 for n, _ in spec.inputs if spec.shape(n).batch and spec.shape(n).d and (
                spec.shape(n).dims or not spec.dims)) == 1 and (sh.dims or not spec.dims):
            continue  # the input that gives the op its shape and dims

        def gone(m, name=name):
            if m.op == "input" and m.name == name or (
                    m.op == "call" and m.name == "chunk" and m.args[0].op == "input" and m.args[0].name == name):
                return lang.num(0.5)
            return None
        s = substitute(spec, gone)
        s.inputs = [(n, c) for n, c in spec.inputs if n != name]
        s.shapes = {n: x for n, x in spec.shapes.items() if n != name}
        out.append((f"drop input {name}", s))
    for a in spec.attrs:
        if a.default is None:
            continue
        v = float(a.default)
        s = substitute(spec, lambda m, a=a, v=v: lang.num(v) if m.op == "attr" and m.name == a.name else None)
        s.attrs = [b for b in spec.attrs if b.name != a.name]
        s.calls = [{k: x for k, x in c.items() if k != a.name} for c in spec.calls]
        out.append((f"drop attr {a.name}", s))
    return out


def _replace(n, old, new, memo):
    if n is old:
        return new
    if id(n) in memo:
        return memo[id(n)]
    out = Node(n.op, n.name, n.value, [_replace(a, old, new, memo) for a in n.args], n.spelling) if n.args else n
    memo[id(n)] = out
    return out


def write(spec: Spec, folder: str, op: str) -> str:
    s = copy.copy(spec)
    s.op = op
    os.makedirs(folder, exist_ok=True)
    if s.functions:
        s.functions_file = op + ".h"
        with open(os.path.join(folder, s.functions_file), "w") as f:
            f.write(print_functions(s))
    else:
        s.functions_file = None
    path = os.path.join(folder, op + ".yaml")
    with open(path, "w") as f:
        f.write(lang.print_spec(s))
    return path


def reparse(path):
    try:
        return lang.load_spec(path)
    except Exception:  # noqa: BLE001
        return None


def run_batch(paths, args, out):
    """run.py's pipeline on the given spec files; returns {op: result}."""
    import run
    ns = types.SimpleNamespace(out=out, fusegen=args.fusegen, jobs=args.jobs, device=args.device, seed=1,
                               first=0, regressions=False, specs=None, also_regressions=False, reuse=True, features=None, no_features=None,
                               skip_known=False, count=len(paths), time_limit=None)
    b = run.Batch(ns)
    if os.path.exists(b.spec_dir):
        shutil.rmtree(b.spec_dir)
    os.makedirs(b.spec_dir)
    for p in paths:
        shutil.copy(p, b.spec_dir)
        sp = lang.load_spec(p)
        if sp.functions_file:
            shutil.copy(os.path.join(os.path.dirname(p), sp.functions_file), b.spec_dir)
        b.specs[sp.op] = os.path.join(b.spec_dir, os.path.basename(p))
    if os.path.isdir(b.pkg):
        for entry in os.listdir(b.pkg):
            p = os.path.join(b.pkg, entry)
            if os.path.isfile(os.path.join(p, entry + "_ops.cpp")) and entry not in b.specs:
                shutil.rmtree(p)
    b.generate()
    b.build()
    b.check()
    return b.results


def fails_like(result, kind, match):
    if not result or result["status"] != "FAIL" or result["kind"] != kind:
        return False
    if match:
        return any(re.search(match, m) for m in result["messages"])
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec")
    ap.add_argument("--fusegen", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--match", help="regex a failure message must match")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    P.load()
    import gen
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    spec = lang.load_spec(args.spec)
    base = spec.op
    first = run_batch([write(spec, os.path.join(out, "cands"), base)], args, os.path.join(out, "work"))
    r = first.get(base)
    if not r or r["status"] != "FAIL":
        raise SystemExit("reduce: the spec does not fail")
    kind = r["kind"]
    print(f"reduce: {base} fails with {kind}: {r['messages'][0][:200]}", flush=True)
    best = spec
    k = 0
    for rnd in range(args.rounds):
        cands = []
        for desc, c in candidates(best):
            if size(c) >= size(best):
                continue
            k += 1
            path = write(c, os.path.join(out, "cands"), f"{base}_r{k}")
            parsed = reparse(path)
            if parsed is None:
                continue
            if kind == "wrong-result" and not gen.validate(parsed):
                continue  # the reference is not finite there: not a test
            cands.append((size(c), desc, path, parsed))
        cands.sort(key=lambda t: t[0])
        progress = False
        # test the candidates a batch at a time, smallest first within each batch of big cuts
        ordered = sorted(cands, key=lambda t: t[0])
        for i in range(0, len(ordered), args.batch):
            chunk = ordered[i:i + args.batch]
            res = run_batch([p for _, _, p, _ in chunk], args, os.path.join(out, "work"))
            good = [(s, d, p, sp) for s, d, p, sp in chunk if fails_like(res.get(sp.op), kind, args.match)]
            if good:
                s, d, p, sp = min(good, key=lambda t: t[0])
                print(f"reduce: round {rnd}: {d} -> size {s}", flush=True)
                best = sp
                write(best, out, "reduced")  # the best so far, should the run be cut short
                progress = True
                break
        if not progress:
            break
    final = write(best, out, "reduced")
    print(f"reduce: wrote {final} (size {size(best)})")


if __name__ == "__main__":
    main()
