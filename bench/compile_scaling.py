#!/usr/bin/env python3
"""Compile time against depth and against cluster size.

Depth: plan-opt on the tiny Llama at 125 to 1000 layers, each compiled once
to a plan.json (tp=2, no search, so the lowering, backward, memory plan,
simulation and export are what is timed). Cluster size: Llama-3 405B with
the search and its confirmation by simulation on 1,024 to 32,768 DGX H100
nodes. Each table gives the wall time and its ratio to the row before (half
the layers or nodes): 2.0 is linear. The slowest passes (--mlir-timing) are
named. Single-threaded; times are this machine's, so read the ratios.

    bench/compile_scaling.py [--plan-opt build/bin/plan-opt]
        [--layers 125,250,500,1000] [--nodes 1024,2048,...,32768]
"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(plan_opt, arguments, out):
    """Seconds of one compile and its three slowest passes."""
    start = time.perf_counter()
    result = subprocess.run([plan_opt, *arguments, "--mlir-timing", "-o", out],
                            capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    passes = sorted(
        ((float(m.group(1)), m.group(2)) for m in re.finditer(
            r"^\s+([0-9.]+) \(\s*[0-9.]+%\)\s+(\w+)$", result.stderr,
            re.MULTILINE) if m.group(2) not in ("Total", "Rest")),
        reverse=True)[:3]
    return seconds, ", ".join("%s %.2f s" % (name, t) for t, name in passes)


def table(label, rows):
    """Prints rows of (size, seconds, passes) with each one's ratio."""
    print("| %s | compile s | ratio to the row before | slowest passes |" % label)
    print("|---:|---:|---:|---|")
    previous = None
    for size, seconds, passes in rows:
        ratio = "%.2f" % (seconds / previous) if previous else "-"
        print("| %d | %.2f | %s | %s |" % (size, seconds, ratio, passes))
        previous = seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan-opt", default=os.path.join(ROOT, "build", "bin", "plan-opt"))
    parser.add_argument("--layers", default="125,250,500,1000")
    parser.add_argument("--nodes", default="1024,2048,4096,8192,16384,32768")
    args = parser.parse_args()
    with open(os.path.join(ROOT, "examples", "models", "tiny-llama.json")) as f:
        base = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "plan.json")
        model = os.path.join(tmp, "model.json")
        rows = []
        for layers in [int(n) for n in args.layers.split(",") if n]:
            base["model"]["num_layers"] = layers
            with open(model, "w") as f:
                json.dump(base, f)
            rows.append((layers, *timed(args.plan_opt, [
                model, "--topology=cpu:8", "--no-search", "--strategy=dp=1,tp=2"],
                plan)))
        table("layers", rows)
        print()
        rows = []
        for nodes in [int(n) for n in args.nodes.split(",") if n]:
            rows.append((nodes, *timed(args.plan_opt, [
                os.path.join(ROOT, "examples", "models", "llama3-405b.json"),
                "--topology=dgx-h100:%d" % nodes], plan)))
        table("nodes", rows)


if __name__ == "__main__":
    main()
