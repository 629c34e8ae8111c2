#!/usr/bin/env python3
"""Checks that plan-run's tensor files hold the same tensors: parameters
(--save-params) or gradients (--dump-grads).

  same_params.py [--rtol R] [--skip REGEX] BASELINE.json OTHER.json...

Each file must hold the baseline's tensors, each with the baseline's number
of elements, and each tensor must satisfy |a - b| / |b| <= R (Frobenius
norms, default 1e-5) against the baseline's. Exits 1 at the first that does
not, naming the file and the tensor.
"""

import argparse
import json
import math
import re
import sys


def difference(path, base, other, skip):
    """The worst relative difference and its tensor, or an error line."""
    if sorted(other) != sorted(base):
        extra = sorted(set(other) - set(base))
        missing = sorted(set(base) - set(other))
        return None, (f"DIFFERENT {path}: tensors missing {missing[:3]}, "
                      f"extra {extra[:3]}")
    worst, worst_name = 0.0, ""
    for name, ref in base.items():
        values = other[name]
        if len(values) != len(ref):
            return None, (f"DIFFERENT {path}: {name} has {len(values)} "
                          f"elements, the baseline's {len(ref)}")
        if skip and re.search(skip, name):
            continue
        if any(v is None or not math.isfinite(v) for v in values):
            return None, f"DIFFERENT {path}: {name} is not finite"
        diff = math.sqrt(sum((a - b) ** 2 for a, b in zip(values, ref)))
        norm = math.sqrt(sum(b * b for b in ref)) or 1.0
        if diff / norm > worst:
            worst, worst_name = diff / norm, name
    return (worst, worst_name), None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--skip", help="tensors not to compare (regex)")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    base = json.load(open(args.files[0]))
    if not base:
        print(f"DIFFERENT {args.files[0]}: the baseline holds no tensor")
        return 1
    for path in args.files[1:]:
        result, error = difference(path, base, json.load(open(path)),
                                   args.skip)
        if error:
            print(error)
            return 1
        worst, worst_name = result
        if worst > args.rtol:
            print(f"DIFFERENT {path}: {worst_name} differs by {worst:.2e} "
                  f"(relative)")
            return 1
        print(f"{path}: same tensors (worst {worst:.1e}, {worst_name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
