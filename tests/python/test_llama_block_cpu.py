"""The Llama-style block of bench/llama_block_tp.py (issue #18) in 2 CPU processes with gloo
(torchrun), tiny shapes, no torch.compile: tensor + sequence parallel (fusegen's add_rmsnorm,
rmsnorm, rope and swiglu on DTensors, through the sharding rules the package registers) and
FSDP2, 2 SGD steps of the fusegen and eager variants, loss and every gradient against the
unparallelized block on rank 0. Then the same with add_rmsnorm's backward rule broken (its
Partial weight gradient declared Replicate: no all-reduce): the check must catch it. The ops
are built with fusegen.load (CPU only) from specs/. Run by ctest (python.load) with FUSEGEN set."""
import json
import os
import subprocess
import sys

import fusegen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "llama_block_tp.py")
SPECS = [os.path.join(ROOT, "specs", f"{s}.yaml")
         for s in ("add_rmsnorm", "rmsnorm", "rope", "swiglu")]


def _run(ops, out, *extra):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           SCRIPT, "--device", "cpu", "--steps", "2", "--warmup", "0", "--iters", "1",
           "--no-compile", "--variants", "fusegen,eager", "--out", str(out),
           "--ops", ops.__name__, "--ops-path", os.path.dirname(os.path.dirname(ops.__file__)),
           *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    report = None
    if os.path.isfile(os.path.join(out, "llama_block.json")):
        with open(os.path.join(out, "llama_block.json")) as f:
            report = json.load(f)
    return result, report


def test_llama_block_tp_sp_and_fsdp2_match_one_process_and_a_broken_rule_fails(tmp_path):
    ops = fusegen.load(SPECS, name="llama_block_ops", cpu_only=True)

    result, report = _run(ops, tmp_path / "ok")
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert report["passed"] and "llama_block_tp: PASSED" in result.stdout, log[-4000:]
    for config in ("tp_sp", "fsdp2"):
        for variant in ("fusegen", "eager"):
            r = report["results"][config][variant]
            assert r["passed"], (config, variant, r)
            assert r["grad_rel_err"] and r["max_grad_rel_err"] <= report["tolerance"]
    # Under TP + SP the ops ran on DTensors: the norms on the sequence shards, rope on the heads,
    # swiglu on the columns, the backward ops too.
    calls = report["results"]["tp_sp"]["fusegen"]["fusegen_op_calls"]
    assert "add_rmsnorm(S(1), S(1), R)" in calls, calls
    assert "rmsnorm(S(1), R)" in calls, calls
    assert "rope(S(2), R, R)" in calls, calls
    assert "swiglu(S(2), S(2))" in calls, calls
    assert any(k.startswith("add_rmsnorm_backward(") for k in calls), calls
    assert any(k.startswith("rope_backward(") for k in calls), calls
    assert all("S(" not in k for k in report["results"]["fsdp2"]["fusegen"]["fusegen_op_calls"])

    result, report = _run(ops, tmp_path / "broken", "--break-rule", "add_rmsnorm",
                          "--configs", "tp_sp", "--variants", "fusegen", "--steps", "1")
    log = result.stdout + result.stderr
    assert result.returncode == 1, log[-4000:]
    r = report["results"]["tp_sp"]["fusegen"]
    assert not r["passed"], r
    assert any("step 0: layers.0.ffn_norm.weight: gradient relative error" in f
               for f in r["failures"]), r
