#!/usr/bin/env python3
"""Writes a copy of a plan with one rule broken, to test check_plan.py.

  break_plan.py IN.json OUT.json MUTATION
"""

import json
import sys


def first_phase(plan, kind):
    for program in plan["programs"]:
        for phase in program["phases"]:
            if phase["kind"] == kind:
                return program, phase
    raise SystemExit(f"no {kind} phase")


def main():
    src, dst, mutation = sys.argv[1:]
    plan = json.load(open(src))
    if mutation == "drop-recv":
        # The last rank's first receive: its neighbour's send is never read.
        program = plan["programs"][-1]
        for phase in program["phases"]:
            launches = phase["launches"]
            for i, launch in enumerate(launches):
                if launch["op"] == "recv":
                    del launches[i]
                    break
            else:
                continue
            break
    elif mutation == "reverse-schedule":
        plan["programs"][0]["schedule"].reverse()
    elif mutation == "unknown-buffer":
        _, phase = first_phase(plan, "forward")
        phase["launches"][0]["ins"][0] = "no.such.buffer"
    elif mutation == "unknown-kernel":
        _, phase = first_phase(plan, "forward")
        phase["launches"][0]["kernel"] = "conv2d"
    elif mutation == "skip-update":
        _, phase = first_phase(plan, "step")
        launches = phase["launches"]
        del launches[next(i for i, l in enumerate(launches)
                          if l.get("kernel") == "adamw")]
    elif mutation == "drop-grad-reduce":
        # The first tp all-reduce of an activation gradient: the gradient
        # of a column-parallel projection's input stays partial.
        _, phase = first_phase(plan, "backward")
        launches = phase["launches"]
        del launches[next(i for i, l in enumerate(launches)
                          if l.get("collective") == "all_reduce" and
                          l["group"] == "tp" and l["input"].startswith("d."))]
    elif mutation == "skip-world-reduce":
        # Pipeline rank 0 skips the global-norm all-reduce the others wait
        # in: a hang, unless a watchdog stops it.
        step = next(p for p in plan["programs"][0]["phases"]
                    if p["kind"] == "step")
        step["launches"] = [l for l in step["launches"]
                            if l.get("group") != "world"]
    else:
        raise SystemExit(f"unknown mutation {mutation}")
    json.dump(plan, open(dst, "w"))


if __name__ == "__main__":
    main()
