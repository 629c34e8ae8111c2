#!/usr/bin/env python3
"""Predicted against measured step time for CPU plans of the examples.

  bench/predicted_vs_measured.py [--build build] [--steps 6]

Compiles the tiny example models for `cpu` topologies under a few
strategies, runs each plan with plan-run, and prints per plan the cost
model's predicted step time, the measured median step time (first step
excluded) and the relative error, then the mean absolute error. The
topology of N ranks is what `plan-run --bandwidth-test --ranks N
--write-topology` measured on this machine, or with --preset the `cpu`
preset's documented assumptions. The trace of each run (plan-run --trace) is kept next
to the plan with --keep DIR.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PLANS = [
    ("tiny-llama", "cpu:1", "dp=1"),
    ("tiny-llama", "cpu:2", "dp=2"),
    ("tiny-llama", "cpu:2", "dp=1,tp=2"),
    ("tiny-llama", "cpu:4", "dp=1,tp=2,pp=2"),
    ("tiny-gpt2", "cpu:4", "dp=2,pp=2"),
    ("tiny-neox", "cpu:4", "dp=1,tp=4"),
]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--keep", help="keep plans and traces here")
    parser.add_argument("--preset", action="store_true",
                        help="plan for the cpu preset, not a measurement")
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or tmp
        os.makedirs(out, exist_ok=True)
        print(f"{'plan':44} {'predicted':>10} {'measured':>10} {'error':>8}")
        topologies = {}

        def topology_of(preset):
            if args.preset:
                return preset
            ranks = preset.split(":")[1]
            if ranks not in topologies:
                topologies[ranks] = os.path.join(out, f"measured{ranks}.json")
                subprocess.run([os.path.join(bin_dir, "plan-run"),
                                "--bandwidth-test", "--ranks", ranks,
                                "--max-size", "4M", "--write-topology",
                                topologies[ranks]],
                               check=True, capture_output=True)
            return topologies[ranks]

        for model, topology, strategy in PLANS:
            name = f"{model}-{topology.replace(':', '')}-{strategy}"
            plan = os.path.join(out, name + ".json")
            log = os.path.join(out, name + ".log")
            subprocess.run([os.path.join(bin_dir, "plan-opt"),
                            os.path.join(root, "examples", "models",
                                         model + ".json"),
                            f"--topology={topology_of(topology)}",
                            "--no-search",
                            f"--strategy={strategy}", "-o", plan],
                           check=True, capture_output=True)
            subprocess.run([os.path.join(bin_dir, "plan-run"), plan,
                            "--steps", str(args.steps), "--log-json", log,
                            "--trace", os.path.join(out, name + ".trace.json")],
                           check=True, capture_output=True)
            predicted = json.load(open(plan))["predicted"]["step_time_s"]
            times = [json.loads(l)["step_time_s"] for l in open(log)][1:]
            measured = statistics.median(times)
            error = (predicted - measured) / measured
            errors.append(abs(error))
            print(f"{model + ' ' + topology + ' ' + strategy:44} "
                  f"{predicted * 1e3:8.1f} ms {measured * 1e3:8.1f} ms "
                  f"{error:+8.0%}")
    print(f"mean absolute error: {statistics.mean(errors):.0%} over "
          f"{len(errors)} plans")
    return 0


if __name__ == "__main__":
    sys.exit(main())
