"""Simulated step time of overlapped plans against synchronous ones.

Compiles each case twice (plan-opt -o plan.json, with and without
--overlap) and reads the simulator's step time from plan.json. Every
overlapped plan must be no slower; the cases marked `gain` must be faster
by at least the given fraction. Prints one line per case.
"""
import json
import os
import subprocess
import sys
import tempfile

plan_opt, examples = sys.argv[1], sys.argv[2]
# (model, topology, strategy pins or "" for the search's choice, gain)
CASES = [
    ("llama3-8b", "dgx-h100:1", "dp=8,zero=2", 0.03),  # dp-heavy
    ("llama3-8b", "dgx-h100:1", "dp=8,zero=3", 0.10),  # ZeRO-3
] + [(os.path.splitext(name)[0], "dgx-h100:16", "", 0.0)
     for name in sorted(os.listdir(os.path.join(examples, "models")))
     if not name.startswith("tiny")] + [
    (name, "cpu:4", "", 0.0) for name in ("tiny-llama", "tiny-gpt2",
                                          "tiny-neox")]


def simulated(model, topology, pins, overlap, out):
    args = [plan_opt, os.path.join(examples, "models", model + ".json"),
            "--topology=" + topology, "--overlap=" + overlap, "--confirm=0",
            # Both plans are only simulated: the closed form's choice may
            # not fit its memory plan.
            "--allow-unfit-plan",
            "-o", out]
    if pins:
        args.append("--strategy=" + pins)
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{model} on {topology}: plan-opt failed:\n{run.stderr}")
    with open(out) as f:
        plan = json.load(f)
    return (plan["simulated"]["step_time_s"], plan["strategy"],
            plan["predicted"]["step_time_s"])


failed = False
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "plan.json")
    for model, topology, pins, gain in CASES:
        fast, strategy, closed = simulated(model, topology, pins, "true", out)
        slow, same, _ = simulated(model, topology, pins, "false", out)
        assert strategy == same, (model, strategy, same)
        ok = fast <= slow * (1 + 1e-12) and fast <= slow * (1 - gain)
        failed |= not ok
        print(f"{'ok' if ok else 'WORSE'} {model} {topology} "
              f"{pins or 'searched'}: overlapped {fast:.4f} s, synchronous "
              f"{slow:.4f} s ({100 * (fast - slow) / slow:+.1f}%); closed "
              f"form {closed:.4f} s ({100 * (fast - closed) / closed:+.1f}%)")
sys.exit(1 if failed else 0)
