#!/usr/bin/env python3
"""Runs a plan-run job and kills (or stops) one of its ranks mid-run.

  kill_rank.py [--stop] RANK STEP PLAN.json plan-run ARGS...

Starts the command, waits up to 120 s until it prints "step STEP", sends
SIGKILL (with --stop, SIGSTOP: a rank that hangs) to the rank RANK process
(OMPI_COMM_WORLD_RANK under mpirun, SLURM_PROCID under srun) of the job, and
waits up to 60 s for the job to end. Prints the job's output, its exit status
and how long it took to stop after the kill, and the ranks still running
after it; exits 1 if it did not stop. Whatever goes wrong, no process of the
job outlives this script.
"""

import os
import queue
import signal
import subprocess
import sys
import threading
import time

REACH_STEP_S = 120
STOP_S = 60


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


def end_job(job, plan):
    """Ends the launcher's process group, then every rank of `plan` left
    (ranks under srun or on another host are outside that group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(job.pid, sig)
        except ProcessLookupError:
            pass
        try:
            job.wait(timeout=5)
            break
        except subprocess.TimeoutExpired:
            pass
    for rank in range(64):
        pid = find_rank(plan, rank)
        if pid is not None:
            for sig in (signal.SIGKILL, signal.SIGCONT):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass


def read_lines(stream, lines):
    for line in stream:
        lines.put(line)
    lines.put(None)


def main():
    args = sys.argv[1:]
    stop = args[0] == "--stop"
    if stop:
        args = args[1:]
    rank, step, plan = args[0], args[1], args[2]
    command = args[3:]
    job = subprocess.Popen(command, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    lines = queue.Queue()
    reader = threading.Thread(target=read_lines, args=(job.stdout, lines),
                              daemon=True)
    reader.start()
    seen = []

    def drain():
        while True:
            try:
                line = lines.get_nowait()
            except queue.Empty:
                return
            if line is not None:
                seen.append(line)

    deadline = time.time() + REACH_STEP_S
    reached = False
    while not reached and time.time() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.time()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        reached = line.startswith(f"step {step} ")
    pid = find_rank(plan, rank) if reached else None
    if pid is None:
        end_job(job, plan)
        drain()
        sys.stdout.write("".join(seen))
        print(f"kill_rank: no rank {rank} of {plan} found" if reached else
              f"kill_rank: the job did not reach step {step} "
              f"within {REACH_STEP_S} s")
        return 1
    os.kill(pid, signal.SIGSTOP if stop else signal.SIGKILL)
    killed = time.time()
    print(f"kill_rank: {'stopped' if stop else 'killed'} rank {rank}")
    try:
        job.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        end_job(job, plan)
        drain()
        sys.stdout.write("".join(seen))
        print(f"kill_rank: the job did not stop within {STOP_S} s")
        return 1
    reader.join(timeout=10)
    drain()
    sys.stdout.write("".join(seen))
    print(f"kill_rank: the job exited with status {job.returncode} "
          f"{time.time() - killed:.1f} s after the kill")
    left = [r for r in range(64) if find_rank(plan, r) is not None]
    print(f"kill_rank: ranks still running: {left or 'none'}")
    if left:
        end_job(job, plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
