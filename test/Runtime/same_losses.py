#!/usr/bin/env python3
"""Checks that plan-run logs (--log-json) hold the same losses.

  same_losses.py [--rtol R] [--grad-norm] [--same-steps] BASELINE.log OTHER.log...

Steps are matched by number: every step of another log must be in the
baseline (a resumed run logs only its later steps); with --same-steps the
logs must hold exactly the baseline's steps. With --grad-norm each step's
gradient norm must match too (a scaled or missing gradient hardly moves the
first steps' losses). Prints one line per log; exits 1 at the first log
whose loss (or gradient norm) at some step differs from the baseline's by
more than R (relative), naming the step.
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
    parser.add_argument("--grad-norm", action="store_true")
    parser.add_argument("--same-steps", action="store_true")
    parser.add_argument("logs", nargs="+")
    args = parser.parse_args()
    base = entries(args.logs[0])
    keys = ["loss"] + (["grad_norm"] if args.grad_norm else [])
    losses = " ".join(f"{base[k]['loss']:.6f}" for k in sorted(base))
    print(f"{args.logs[0]}: {losses}")
    for path in args.logs[1:]:
        run = entries(path)
        missing = sorted(set(run) - set(base))
        if not run or missing:
            print(f"DIVERGED {path}: steps {missing or 'none'} are not the "
                  f"baseline's")
            return 1
        if args.same_steps and set(run) != set(base):
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
        what = "losses and gradient norms" if args.grad_norm else "losses"
        print(f"{path}: same {what} at steps {min(run)}-{max(run)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
