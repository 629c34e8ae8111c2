#!/usr/bin/env python3
"""Predicted against measured step time and exposed communication on real
links: a 2-host namespace cluster (scripts/cluster.sh) whose host links are
limited to each given rate.

  bench/multi_host_prediction.py [--build build] [--rates 100mbit,1gbit]
                                 [--steps 10] [--keep DIR]

Needs root. For each rate: brings the cluster up, limits both hosts' links,
measures them (plan-run --bandwidth-test --write-topology), compiles
communication-bound plans of the 12-sequence tiny Llama for the measured
topology, and trains each on the cluster through --hostfile. Prints per plan
plan-opt's predicted step time and exposed communication, and plan-run's:
the median step time after the first, and the median of each step's time
less the reporting rank's compute (its kernels in the trace). The errors
are measurements, not checks.
"""

import argparse
import json
import os
import statistics
import sys

from namespace_cluster import MODEL, ROOT, BenchCluster

PLANS = ["dp=4", "dp=2,tp=2", "pp=2,dp=2"]


def measured_exposed(trace, steps):
    """Per step: its time less the reporting rank's kernel time."""
    events = json.load(open(trace))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("name") == "process_name"}
    # The reporting rank: the last pipeline stage's dp and tp rank 0.
    last_pp = max(int(n.split("pp ")[1].split(",")[0]) for n in names.values())
    reporter = next(pid for pid, n in names.items()
                    if f"pp {last_pp}, dp 0, tp 0" in n)
    compute = {}
    for e in events:
        if (e.get("ph") == "X" and e["pid"] == reporter and e["tid"] == 0
                and e["name"] != "wait"):
            step = e["args"]["step"]
            compute[step] = compute.get(step, 0) + e["dur"] / 1e6
    return [steps[s] - compute.get(s, 0) for s in sorted(steps)
            if s in compute]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--rates", default="100mbit,1gbit")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--keep", help="keep plans, logs and traces here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("multi_host_prediction.py: needs root (scripts/cluster.sh)")
        return 1
    bench = BenchCluster(args.build, args.keep)
    out, run = bench.out, bench.run
    hostfile = bench.hostfile(2)
    print(f"{'rate':8} {'plan':12} {'predicted step':>15} {'measured':>9} "
          f"{'error':>6} {'predicted comm':>15} {'measured':>9} {'error':>6}")
    errors = []
    try:
        bench.cluster("up", "2")
        for rate in args.rates.split(","):
            for host in ("node1", "node2"):
                bench.cluster("rate", host, rate)
            topology = os.path.join(out, f"measured-{rate}.json")
            bench.cluster("exec", "node1", "plan-run", "--bandwidth-test",
                "--hostfile", hostfile, "--max-size", "16M",
                "--write-topology", topology)
            for strategy in PLANS:
                name = f"{rate}-{strategy}"
                plan = os.path.join(out, name + ".json")
                log = os.path.join(out, name + ".log")
                trace = os.path.join(out, name + ".trace.json")
                run("plan-opt", MODEL,
                    f"--topology={topology}", "--no-search",
                    f"--strategy={strategy}", "-o", plan)
                bench.cluster("exec", "node1", "plan-run", plan, "--hostfile",
                    hostfile, "--steps", str(args.steps), "--log-json", log,
                    "--trace", trace)
                predicted = json.load(open(plan))["predicted"]
                steps = {json.loads(l)["step"]: json.loads(l)["step_time_s"]
                         for l in open(log)}
                del steps[min(steps)]
                step = statistics.median(steps.values())
                comm = statistics.median(measured_exposed(trace, steps))
                step_error = predicted["step_time_s"] / step - 1
                comm_error = predicted["exposed_comm_s"] / comm - 1
                errors += [abs(step_error)]
                print(f"{rate:8} {strategy:12} "
                      f"{predicted['step_time_s'] * 1e3:12.1f} ms "
                      f"{step * 1e3:6.1f} ms {step_error:+6.0%} "
                      f"{predicted['exposed_comm_s'] * 1e3:12.1f} ms "
                      f"{comm * 1e3:6.1f} ms {comm_error:+6.0%}")
    finally:
        bench.down()
    print(f"mean absolute step-time error: {statistics.mean(errors):.0%} "
          f"over {len(errors)} plans")
    return 0


if __name__ == "__main__":
    sys.exit(main())
