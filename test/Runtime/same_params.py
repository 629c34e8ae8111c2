#!/usr/bin/env python3
"""Checks that plan-run --save-params files hold the same parameters.

  same_params.py [--rtol R] [--skip REGEX] BASELINE.json OTHER.json...

Each parameter must satisfy |a - b| / |b| <= R (Frobenius norms) against
the baseline's. Exits 1 at the first that does not, naming the file and the
parameter.
"""

import argparse
import json
import math
import re
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--skip", help="parameters not to compare (regex)")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    base = json.load(open(args.files[0]))
    for path in args.files[1:]:
        other = json.load(open(path))
        if sorted(other) != sorted(base):
            print(f"DIFFERENT {path}: other parameters than the baseline")
            return 1
        worst, worst_name = 0.0, ""
        for name, ref in base.items():
            if args.skip and re.search(args.skip, name):
                continue
            values = other[name]
            diff = math.sqrt(sum((a - b) ** 2 for a, b in zip(values, ref)))
            norm = math.sqrt(sum(b * b for b in ref)) or 1.0
            if diff / norm > worst:
                worst, worst_name = diff / norm, name
        if worst > args.rtol:
            print(f"DIFFERENT {path}: {worst_name} differs by {worst:.2e} "
                  f"(relative)")
            return 1
        print(f"{path}: same parameters (worst {worst:.1e}, {worst_name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
