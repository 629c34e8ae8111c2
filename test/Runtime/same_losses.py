#!/usr/bin/env python3
"""Checks that plan-run logs (--log-json) hold the same losses.

  same_losses.py [--rtol R] BASELINE.log OTHER.log...

Prints one line per log; exits 1 at the first log whose loss at some step
differs from the baseline's by more than R (relative), naming the step.
"""

import argparse
import json
import sys


def losses(path):
    return [json.loads(line)["loss"] for line in open(path) if line.strip()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("logs", nargs="+")
    args = parser.parse_args()
    base = losses(args.logs[0])
    print(f"{args.logs[0]}: {' '.join(f'{x:.6f}' for x in base)}")
    for path in args.logs[1:]:
        run = losses(path)
        if len(run) != len(base):
            print(f"DIVERGED {path}: {len(run)} steps, expected {len(base)}")
            return 1
        for step, (a, b) in enumerate(zip(run, base), 1):
            if abs(a - b) > args.rtol * abs(b):
                print(f"DIVERGED {path}: step {step} loss {a:.8f}, the "
                      f"single rank's {b:.8f}")
                return 1
        print(f"{path}: same losses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
