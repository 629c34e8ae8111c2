#!/usr/bin/env python3
"""Checks plan.json files against docs/plan-format.md.

  check_plan.py --docs DOCS PLAN.json...
  check_plan.py --docs DOCS --plan-opt BIN --model SPEC... --topology T... \
      [--strategy S...] [--search]

The second form compiles every SPEC for every T under each strategy
(pinned, or as search pins with --search; without --strategy, the
search's choice) and checks each plan. Prints one line per plan
and exits 1 on the first plan that breaks a rule, naming it.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile


class PlanError(Exception):
    pass


def require(cond, message):
    if not cond:
        raise PlanError(message)


def documented_kernels(docs):
    """Kernel names from the kernel table of plan-format.md."""
    text = open(os.path.join(docs, "plan-format.md")).read()
    table = text.split("### Kernels", 1)[1].split("## Optimizer", 1)[0]
    names = set()
    for line in table.splitlines():
        cell = line.split("|")[1].strip() if line.startswith("|") else ""
        names.update(re.findall(r"`([a-z_]+)`", cell))
    return names


def check_groups(plan):
    mesh = plan["mesh"]
    world = mesh["world_size"]
    require(world == mesh["dp"] * mesh["tp"] * mesh["pp"], "mesh sizes")
    require(len(plan["devices"]) == world, "one device entry per rank")
    places = {(d["node"], d["local_device"]) for d in plan["devices"]}
    require(len(places) == world, "two ranks share a device")
    for d in plan["devices"]:
        rank = (d["pp"] * mesh["dp"] + d["dp"]) * mesh["tp"] + d["tp"]
        require(rank == d["rank"], f"rank {d['rank']} has wrong coordinates")
    sizes = {"tp": mesh["tp"], "dp": mesh["dp"], "pp": mesh["pp"],
             "world": world, "tied": 2,
             "tp_kv": mesh["tp"] // mesh["kv_parts"]}
    for name, groups in plan["groups"].items():
        require(name in sizes, f"unknown group {name}")
        members = sorted(r for g in groups for r in g)
        for g in groups:
            require(len(g) == sizes[name], f"a {name} group has {len(g)} ranks")
        # Every rank is in one group of each kind (tied: the end stages).
        if name != "tied":
            require(members == list(range(world)), f"{name} groups do not "
                    "cover every rank once")


def check_program(plan, program, kernels):
    name = f"program pp_rank {program['pp_rank']}"
    buffers = {}
    for b in program["buffers"]:
        require(b["name"] not in buffers, f"{name}: buffer {b['name']} twice")
        buffers[b["name"]] = b
        elems = math.prod(b["shape"])
        width = {"f32": 4, "i32": 4, "bf16": 2, "f16": 2, "i64": 8}[b["dtype"]]
        require(b["bytes"] == elems * width, f"{name}: {b['name']} bytes")
    groups = set(plan["groups"])
    chunks = {}
    p2p = {}
    step = 0
    for phase in program["phases"]:
        kind = phase["kind"]
        if kind == "step":
            step += 1
        else:
            chunks.setdefault(phase["chunk"], set()).add(kind)
        sends = recvs = 0
        for launch in phase["launches"]:
            op = launch["op"]
            if op == "kernel":
                require(launch["kernel"] in kernels,
                        f"{name}: undocumented kernel {launch['kernel']}")
                names = launch["ins"] + launch["outs"]
                if "accumulate" in launch:
                    require(len(launch["accumulate"]) == len(launch["outs"]),
                            f"{name}: accumulate flags")
            elif op == "collective":
                require(launch["group"] in groups,
                        f"{name}: group {launch['group']} is not in groups")
                names = [launch["input"], launch["output"]]
            elif op == "wait":
                names = [launch["buffer"]]
            else:
                names = [launch["buffer"]]
                if op == "send":
                    sends += 1
                else:
                    recvs += 1
            for n in names:
                require(n in buffers, f"{name}: {op} names unknown buffer {n}")
        if kind != "step":
            p2p[(kind, phase["chunk"])] = (sends, recvs)
    require(step == 1, f"{name}: {step} step phases")
    for chunk, kinds in chunks.items():
        require(kinds == {"forward", "backward"},
                f"{name}: chunk {chunk} lacks a forward or backward phase")

    m = plan["training"]["num_micro_batches"]
    seen = {}
    for run in program["schedule"]:
        key = (run["chunk"], run["micro_batch"])
        seen.setdefault(key, []).append(run["phase"])
    for chunk in chunks:
        for mb in range(m):
            require(seen.get((chunk, mb)) == ["forward", "backward"],
                    f"{name}: chunk {chunk} micro-batch {mb} runs "
                    f"{seen.get((chunk, mb))}")
    require(len(program["schedule"]) == 2 * m * len(chunks),
            f"{name}: schedule length")
    return buffers, p2p


def simulate(plan, programs):
    """Runs every rank's schedule with buffered sends; fails on a deadlock
    or a message of the wrong size."""
    pp = plan["mesh"]["pp"]
    phases = {}
    for prog in programs:
        for phase in prog["phases"]:
            if phase["kind"] != "step":
                phases[(prog["pp_rank"], phase["kind"], phase["chunk"])] = \
                    phase["launches"]
    sizes = {prog["pp_rank"]: {b["name"]: b["bytes"] for b in prog["buffers"]}
             for prog in programs}
    queues = {}  # (src, dst) -> [bytes]
    cursor = {prog["pp_rank"]: 0 for prog in programs}
    schedules = {prog["pp_rank"]: prog["schedule"] for prog in programs}
    progress = True
    while progress:
        progress = False
        for rank in cursor:
            while cursor[rank] < len(schedules[rank]):
                run = schedules[rank][cursor[rank]]
                launches = phases[(rank, run["phase"], run["chunk"])]
                # All receives of the phase must be available to run it.
                need = {}
                for launch in launches:
                    if launch["op"] == "recv":
                        src = (rank + (1 if launch["peer"] == "next" else -1)) % pp
                        need[src] = need.get(src, 0) + 1
                if any(len(queues.get((src, rank), [])) < n
                       for src, n in need.items()):
                    break
                for launch in launches:
                    size = sizes[rank].get(launch.get("buffer"))
                    if launch["op"] == "recv":
                        src = (rank + (1 if launch["peer"] == "next" else -1)) % pp
                        got = queues[(src, rank)].pop(0)
                        require(got == size, f"pp_rank {rank} receives "
                                f"{got} bytes into {launch['buffer']} of {size}")
                    elif launch["op"] == "send":
                        dst = (rank + (1 if launch["peer"] == "next" else -1)) % pp
                        queues.setdefault((rank, dst), []).append(size)
                cursor[rank] += 1
                progress = True
    stuck = {r: c for r, c in cursor.items() if c < len(schedules[r])}
    require(not stuck, f"the schedules deadlock (pipeline ranks stop at "
            f"schedule entries {stuck})")
    require(all(not q for q in queues.values()), "messages left unreceived")


def check_parameters(plan, programs):
    buffers = {p["pp_rank"]: {b["name"]: b for b in p["buffers"]}
               for p in programs}
    tp = plan["mesh"]["tp"]
    total = 0
    for p in plan["parameters"]:
        local, glob = p["local_shape"], list(p["global_shape"])
        if p["tp_dim"] is not None:
            d = p["tp_dim"]
            padded = -(-glob[d] // p["tp_parts"]) * p["tp_parts"]
            require(local[d] * p["tp_parts"] == padded,
                    f"{p['name']}: local {local} is not 1/{p['tp_parts']} of "
                    f"{glob}")
            require(p["tp_parts"] <= tp and tp % p["tp_parts"] == 0,
                    f"{p['name']}: {p['tp_parts']} parts over tp={tp}")
        total += math.prod(glob)
        # Our models name a decoder layer's parameters layers.N.*.
        layer = re.match(r"layers\.(\d+)\.", p["name"])
        require(p.get("layer") == (int(layer.group(1)) if layer else None),
                f"{p['name']}: layer {p.get('layer')}")
        for h in p["holders"]:
            b = buffers[h["pp_rank"]].get(h["buffer"])
            require(b is not None and b.get("param") == p["name"],
                    f"{p['name']}: holder buffer {h['buffer']} missing")
    # One adamw per parameter buffer.
    for prog in programs:
        step = next(ph for ph in prog["phases"] if ph["kind"] == "step")
        updated = [l["outs"][0] for l in step["launches"]
                   if l["op"] == "kernel" and l["kernel"] == "adamw"]
        held = [b["name"] for b in prog["buffers"]
                if b["kind"] in ("param", "param_shard")]
        require(sorted(updated) == sorted(held),
                f"pp_rank {prog['pp_rank']}: adamw does not update every "
                "parameter once")
    return total


def check(plan, kernels):
    require(plan.get("format") == "partita-plan", "format")
    require(plan.get("version") == 1, "version")
    t = plan["training"]
    s = plan["strategy"]
    require(t["global_batch"] == s["dp"] * t["micro_batch_size"] *
            t["num_micro_batches"], "global batch")
    require(plan["predicted"]["step_time_s"] > 0, "predicted step time")
    check_groups(plan)
    programs = plan["programs"]
    require(sorted(p["pp_rank"] for p in programs) ==
            list(range(plan["mesh"]["pp"])), "one program per pipeline rank")
    for program in programs:
        check_program(plan, program, kernels)
    simulate(plan, programs)
    return check_parameters(plan, programs)


def describe(plan, params):
    s = plan["strategy"]
    return (f"dp={s['dp']},tp={s['tp']},pp={s['pp']},vpp={s['vpp']},"
            f"zero={s['zero']},sp={int(s['sequence_parallel'])},"
            f"recompute={s['recompute']},schedule={s['schedule']} "
            f"params={params}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", required=True)
    parser.add_argument("--plan-opt", default=shutil.which("plan-opt"))
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--topology", action="append", default=[])
    parser.add_argument("--strategy", action="append", default=[])
    parser.add_argument("--search", action="store_true",
                        help="search with the strategies as pins")
    parser.add_argument("plans", nargs="*")
    args = parser.parse_args()
    kernels = documented_kernels(args.docs)

    jobs = [(path, None) for path in args.plans]
    with tempfile.TemporaryDirectory() as tmp:
        strategies = args.strategy or [None]
        combos = [(m, t, st) for m in args.model for t in args.topology
                  for st in strategies]
        for i, (model, topology, strategy) in enumerate(combos):
            out = os.path.join(tmp, f"plan{i}.json")
            cmd = [args.plan_opt, model, f"--topology={topology}", "-o", out]
            if strategy:
                cmd.append(f"--strategy={strategy}")
            if not args.search:
                cmd.append("--no-search")
            label = f"{os.path.basename(model)} on {topology}" + (
                f" with {strategy}" if strategy else "")
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"FAIL {label}: plan-opt exited {run.returncode}:\n"
                      f"{run.stderr[-2000:]}")
                return 1
            jobs.append((out, label))
        for path, strategy in jobs:
            label = strategy or path
            try:
                plan = json.load(open(path))
                params = check(plan, kernels)
            except (PlanError, KeyError, StopIteration, TypeError) as e:
                print(f"FAIL {label}: {type(e).__name__}: {e}")
                return 1
            print(f"ok {plan['model']} on {plan['topology']['name']}:"
                  f"{plan['topology']['nodes']} {describe(plan, params)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
