#!/usr/bin/env python3
"""Compile time against depth: plan-opt on the tiny Llama at 125 to 1000 layers.

Each model compiles once to a plan.json (tp=2, no search, so the lowering,
backward, memory plan, simulation and export are what is timed), and the
table gives the wall time and its ratio to the model of half the depth: 2.0
is linear. The slowest passes (--mlir-timing) are named. Single-threaded;
times are this machine's, so read the ratios.

    bench/compile_scaling.py [--plan-opt build/bin/plan-opt] [--layers 125,250,500,1000]
"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan-opt", default=os.path.join(ROOT, "build", "bin", "plan-opt"))
    parser.add_argument("--layers", default="125,250,500,1000")
    args = parser.parse_args()
    with open(os.path.join(ROOT, "examples", "models", "tiny-llama.json")) as f:
        base = json.load(f)
    print("| layers | compile s | ratio to half the layers | slowest passes |")
    print("|---:|---:|---:|---|")
    previous = None
    with tempfile.TemporaryDirectory() as tmp:
        for layers in [int(n) for n in args.layers.split(",")]:
            base["model"]["num_layers"] = layers
            model = os.path.join(tmp, "model.json")
            with open(model, "w") as f:
                json.dump(base, f)
            start = time.perf_counter()
            result = subprocess.run(
                [args.plan_opt, model, "--topology=cpu:8", "--no-search",
                 "--strategy=dp=1,tp=2", "--mlir-timing",
                 "-o", os.path.join(tmp, "plan.json")],
                capture_output=True, text=True, check=True)
            seconds = time.perf_counter() - start
            passes = sorted(
                ((float(m.group(1)), m.group(2)) for m in re.finditer(
                    r"^\s+([0-9.]+) \(\s*[0-9.]+%\)\s+(\w+)$", result.stderr,
                    re.MULTILINE) if m.group(2) not in ("Total", "Rest")),
                reverse=True)[:3]
            ratio = "%.2f" % (seconds / previous) if previous else "-"
            print("| %d | %.2f | %s | %s |" % (
                layers, seconds, ratio,
                ", ".join("%s %.2f s" % (name, t) for t, name in passes)))
            previous = seconds


if __name__ == "__main__":
    main()
