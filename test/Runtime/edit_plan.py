#!/usr/bin/env python3
"""Writes a copy of a plan.json with one edit, for the bad-plan tests.

  edit_plan.py PLAN OUT STATEMENT

STATEMENT is Python run with `plan` bound to the parsed plan, and helpers
`buffer(name)` (program 0's buffer of that name) and `launch(phase, k)`
(launch k of program 0's first phase of that kind).
"""

import json
import sys


def main():
    source, target, statement = sys.argv[1:4]
    with open(source) as f:
        plan = json.load(f)
    program = plan["programs"][0]

    def buffer(name):
        return next(b for b in program["buffers"] if b["name"] == name)

    def launch(phase, k):
        kind = next(p for p in program["phases"] if p["kind"] == phase)
        return kind["launches"][k]

    exec(statement, {"plan": plan, "buffer": buffer, "launch": launch})
    with open(target, "w") as f:
        json.dump(plan, f)


if __name__ == "__main__":
    main()
