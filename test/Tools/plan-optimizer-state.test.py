"""Prints the optimizer state and the adamw launch of one parameter."""
import json
import sys

PARAM = "layers.0.attn.q.weight"


def short(name):
    return "p" if name == PARAM else name.split(".")[0]


for path in sys.argv[1:]:
    plan = json.load(open(path))
    dtype = plan["training"]["dtype"]
    program = plan["programs"][0]
    buffers = {b["name"]: b for b in program["buffers"]}
    p = buffers[PARAM]
    states = []
    for prefix in ("adam_m", "adam_v", "master"):
        b = buffers.get(f"{prefix}.{PARAM}")
        states.append(f"{prefix} {b['dtype']} {b['shape']}" if b else
                      f"no {prefix}")
    print(f"{dtype}: {PARAM} {p['dtype']} {p['shape']}; " + ", ".join(states))
    for phase in program["phases"]:
        for launch in phase["launches"]:
            if launch.get("kernel") == "adamw" and launch["ins"][0] == PARAM:
                ins = ", ".join(short(n) for n in launch["ins"])
                outs = ", ".join(short(n) for n in launch["outs"])
                print(f"{dtype}: adamw ins {ins} -> {outs}")
