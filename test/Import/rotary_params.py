"""Prints the scaling params of a plan's first rotary launch, sorted by key."""
import json
import sys

plan = json.load(open(sys.argv[1]))
for program in plan["programs"]:
    for phase in program["phases"]:
        for launch in phase["launches"]:
            if launch.get("kernel") == "rotary":
                params = launch["params"]
                keys = sorted(k for k in params
                              if k not in ("num_heads", "rotary_dim", "theta"))
                print("rotary: " + " ".join(f"{k}={params[k]}" for k in keys))
                sys.exit(0)
sys.exit("no rotary launch")
