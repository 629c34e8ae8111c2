#!/usr/bin/env python3
"""Checks that plan-run logs (--log-json) hold the same losses and gradient
norms.

  same_losses.py [--rtol R] [--loss-only] [--some-steps] BASELINE.log OTHER.log...

Steps are matched by number, and each log must hold exactly the baseline's
steps; with --some-steps a log may hold only some of them (a resumed run
logs only its later steps, a shorter run its first). Each step's gradient norm must match as well as
its loss (a scaled or missing gradient hardly moves the first steps'
losses); --loss-only compares losses alone, for runs that log no gradient
norm. Prints one line per log; exits 1 at the first log whose loss (or
gradient norm) at some step differs from the baseline's by more than R
(relative, default 1e-5), naming the step.
"""

import argparse
import json
import sys


def entries(path):
    steps = {}
    for line in open(path):
        if line.strip():
            entry = json.loads(line)
            steps[entry["step"]] = entry
    return steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--loss-only", action="store_true")
    parser.add_argument("--some-steps", action="store_true")
    parser.add_argument("logs", nargs="+")
    args = parser.parse_args()
    base = entries(args.logs[0])
    keys = ["loss"] + ([] if args.loss_only else ["grad_norm"])
    losses = " ".join(f"{base[k]['loss']:.6f}" for k in sorted(base))
    print(f"{args.logs[0]}: {losses}")
    for path in args.logs[1:]:
        run = entries(path)
        missing = sorted(set(run) - set(base))
        if not run or missing:
            print(f"DIVERGED {path}: steps {missing or 'none'} are not the "
                  f"baseline's")
            return 1
        if not args.some_steps and set(run) != set(base):
            print(f"DIVERGED {path}: steps {sorted(set(base) - set(run))} "
                  f"are missing")
            return 1
        for step in sorted(run):
            for key in keys:
                a, b = run[step][key], base[step][key]
                # plan-run logs a value that is not finite as null
                if a is None:
                    print(f"DIVERGED {path}: step {step} {key} is not finite")
                    return 1
                if abs(a - b) > args.rtol * abs(b):
                    print(f"DIVERGED {path}: step {step} {key} {a:.8f}, the "
                          f"baseline's {b:.8f}")
                    return 1
        also = "" if args.loss_only else " (gradient norms too)"
        print(f"{path}: same losses at steps {min(run)}-{max(run)}{also}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
