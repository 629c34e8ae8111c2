#!/usr/bin/env python3
"""Runs a plan-run job and kills (or stops) one of its ranks mid-run.

  kill_rank.py [--stop] RANK STEP PLAN.json plan-run ARGS...

Starts the command, waits until it prints "step STEP", sends SIGKILL (with
--stop, SIGSTOP: a rank that hangs) to the rank RANK process
(OMPI_COMM_WORLD_RANK under mpirun, SLURM_PROCID under srun) of the job, and waits up to 60 s for the job to
end. Prints the job's output, its exit status and how long
it took to stop after the kill, and the ranks still running after it;
exits 1 if it did not stop.
"""

import os
import signal
import subprocess
import sys
import time


def find_rank(plan, rank):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if plan.encode() in cmdline and any(
                f"{name}={rank}".encode() in environ
                for name in ("OMPI_COMM_WORLD_RANK", "SLURM_PROCID")):
            return int(pid)
    return None


def main():
    args = sys.argv[1:]
    stop = args[0] == "--stop"
    if stop:
        args = args[1:]
    rank, step, plan = args[0], args[1], args[2]
    command = args[3:]
    job = subprocess.Popen(command, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in job.stdout:
        lines.append(line)
        if line.startswith(f"step {step} "):
            break
    pid = find_rank(plan, rank)
    if pid is None:
        print(f"kill_rank: no rank {rank} of {plan} found")
        job.kill()
        return 1
    os.kill(pid, signal.SIGSTOP if stop else signal.SIGKILL)
    killed = time.time()
    print(f"kill_rank: {'stopped' if stop else 'killed'} rank {rank}")
    try:
        rest, _ = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
        if stop:
            os.kill(pid, signal.SIGKILL)
        print("kill_rank: the job did not stop within 60 s")
        return 1
    sys.stdout.write("".join(lines) + rest)
    print(f"kill_rank: the job exited with status {job.returncode} "
          f"{time.time() - killed:.1f} s after the kill")
    left = [r for r in range(64) if find_rank(plan, r) is not None]
    print(f"kill_rank: ranks still running: {left or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
