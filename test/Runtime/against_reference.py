#!/usr/bin/env python3
"""Trains a plan with plan-run (from PATH) and with the numpy reference
(test/Tools/plan_reference.py), and compares the two runs as the
equivalence tests compare plans:

  against_reference.py [--steps N] [--skip REGEX] [--runner "CMD ARGS"]
                       PLAN.json WORKDIR

losses and gradient norms at every step (same_losses.py, 1e-5 relative),
gradients after step 1 (same_params.py, 2e-5) and parameters after the last
step (4e-5): about 10x the worst seen over the architectures of
plan-run-reference.test (1.6e-6 and 3.7e-6). Prints each comparison's last
line; exits 1 if plan-run fails or any comparison does. --runner runs another build of plan-run (the CUDA
backend on the emulator, say) with its arguments, up to PLAN.json.
"""

import argparse
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "..", "Tools", "plan_reference.py")
GRADIENT_RTOL, PARAMETER_RTOL = "2e-5", "4e-5"


def outputs(workdir, name):
    base = os.path.join(workdir, name)
    return [base + ".log", base + ".grads", base + ".params"]


def compare(tool, *args):
    done = subprocess.run([sys.executable, os.path.join(HERE, tool), *args],
                          capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    print(lines[-1] if lines else done.stderr.strip())
    return done.returncode == 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--skip", help="tensors not to compare (regex)")
    parser.add_argument("--runner", default="plan-run",
                        help="the plan-run to run, with arguments")
    parser.add_argument("plan")
    parser.add_argument("workdir")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    log, grads, params = outputs(args.workdir, "plan-run")
    run = subprocess.run([*shlex.split(args.runner), args.plan, "--steps", str(args.steps),
                          "--log-json", log, "--dump-grads", grads,
                          "--save-params", params],
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(f"plan-run failed: {run.stderr.strip()}")
        return 1
    ref_log, ref_grads, ref_params = outputs(args.workdir, "reference")
    subprocess.run([sys.executable, REFERENCE, "--steps", str(args.steps),
                    "--log-json", ref_log, "--dump-grads", ref_grads,
                    "--save-params", ref_params, args.plan],
                   check=True, stdout=subprocess.DEVNULL)
    skip = ["--skip", args.skip] if args.skip else []
    ok = compare("same_losses.py", ref_log, log)
    ok &= compare("same_params.py", "--rtol", GRADIENT_RTOL, *skip,
                  ref_grads, grads)
    ok &= compare("same_params.py", "--rtol", PARAMETER_RTOL, *skip,
                  ref_params, params)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
