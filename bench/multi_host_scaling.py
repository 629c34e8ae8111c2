#!/usr/bin/env python3
"""Is another host worth it, predicted and measured: the 12-sequence tiny
Llama data-parallel over 1, 2 and 3 hosts of a namespace cluster
(scripts/cluster.sh) with 2 ranks each, host links limited to a rate.

  bench/multi_host_scaling.py [--build build] [--rate 100mbit] [--steps 10]
                              [--keep DIR]

Needs root. For n = 1, 2, 3 hosts: measures them (plan-run --bandwidth-test
--write-topology on those hosts), compiles dp=2n for the measured topology,
trains it on them, and prints predicted and measured tokens/s and scaling
efficiency (tokens/s per rank against one host). Each host count is
measured on its own because the namespace hosts share this machine's cores:
with 3 hosts running, a rank computes at about a third of its speed with
one (on a real cluster, one measurement cut to n hosts would do). The
errors are measurements, not checks.
"""

import argparse
import json
import os
import statistics
import sys

from namespace_cluster import MODEL, ROOT, BenchCluster


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--rate", default="100mbit")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--keep", help="keep plans and logs here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("multi_host_scaling.py: needs root (scripts/cluster.sh)")
        return 1
    bench = BenchCluster(args.build, args.keep)
    out, hostfile = bench.out, bench.hostfile
    rows = []
    try:
        bench.cluster("up", "3")
        for i in (1, 2, 3):
            bench.cluster("rate", f"node{i}", args.rate)
        for n in (1, 2, 3):
            topology_path = os.path.join(out, f"topology{n}.json")
            bench.cluster("exec", "node1", "plan-run", "--bandwidth-test",
                "--hostfile", hostfile(n), "--max-size", "4M",
                "--write-topology", topology_path)
            plan = os.path.join(out, f"dp{2 * n}.json")
            log = os.path.join(out, f"dp{2 * n}.log")
            bench.run("plan-opt", MODEL,
                f"--topology={topology_path}", "--no-search",
                f"--strategy=dp={2 * n}", "-o", plan)
            bench.cluster("exec", "node1", "plan-run", plan, "--hostfile",
                hostfile(n), "--steps", str(args.steps), "--log-json", log)
            predicted = json.load(open(plan))["predicted"]["tokens_per_s"]
            measured_rate = statistics.median(
                [json.loads(l)["tokens_per_s"] for l in open(log)][1:])
            rows.append((n, predicted, measured_rate))
    finally:
        bench.down()
    print(f"tiny-llama-b12, dp = 2 ranks per host, host links at {args.rate}")
    print(f"{'hosts':>5} {'predicted tokens/s':>19} {'efficiency':>10} "
          f"{'measured tokens/s':>18} {'efficiency':>10}")
    for n, predicted, measured_rate in rows:
        print(f"{n:5} {predicted:19.0f} {predicted / n / rows[0][1]:10.0%} "
              f"{measured_rate:18.0f} "
              f"{measured_rate / n / rows[0][2]:10.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
