#!/usr/bin/env python3
"""A kernel runner whose KERNEL is off by a factor: the kernel oracle's
negative control.

    skewed_runner.py KERNEL FACTOR RUNNER [ARGS...]

Runs RUNNER on the launches of stdin and multiplies every output value of
KERNEL's launches by FACTOR.
"""
import json
import subprocess
import sys

kernel, factor, runner = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
launches = sys.stdin.read()
run = subprocess.run(runner, input=launches, text=True, capture_output=True)
sys.stderr.write(run.stderr)
if run.returncode != 0:
    sys.exit(run.returncode)
for launch, line in zip(json.loads(launches)["launches"],
                        run.stdout.splitlines()):
    outs = json.loads(line)["outs"]
    if launch["kernel"] == kernel:
        outs = [[v * factor for v in out] for out in outs]
    print(json.dumps({"outs": outs}))
