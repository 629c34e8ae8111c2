#!/usr/bin/env python3
"""Checks that plan-run logs (--log-json) hold the same losses.

  same_losses.py [--rtol R] BASELINE.log OTHER.log...

Steps are matched by number: every step of another log must be in the
baseline (a resumed run logs only its later steps). Prints one line per
log; exits 1 at the first log whose loss at some step differs from the
baseline's by more than R (relative), naming the step.
"""

import argparse
import json
import sys


def losses(path):
    steps = {}
    for line in open(path):
        if line.strip():
            entry = json.loads(line)
            steps[entry["step"]] = entry["loss"]
    return steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("logs", nargs="+")
    args = parser.parse_args()
    base = losses(args.logs[0])
    print(f"{args.logs[0]}: {' '.join(f'{base[k]:.6f}' for k in sorted(base))}")
    for path in args.logs[1:]:
        run = losses(path)
        missing = sorted(set(run) - set(base))
        if not run or missing:
            print(f"DIVERGED {path}: steps {missing or 'none'} are not the "
                  f"baseline's")
            return 1
        for step in sorted(run):
            a, b = run[step], base[step]
            if a is None:  # plan-run logs a loss that is not finite as null
                print(f"DIVERGED {path}: step {step} loss is not finite")
                return 1
            if abs(a - b) > args.rtol * abs(b):
                print(f"DIVERGED {path}: step {step} loss {a:.8f}, the "
                      f"single rank's {b:.8f}")
                return 1
        print(f"{path}: same losses at steps {min(run)}-{max(run)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
