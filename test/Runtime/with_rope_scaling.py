#!/usr/bin/env python3
"""Writes a copy of a model spec whose model has the given rope_scaling.

  with_rope_scaling.py SPEC OUT JSON
"""

import json
import sys

spec = json.load(open(sys.argv[1]))
spec["model"]["rope_scaling"] = json.loads(sys.argv[3])
json.dump(spec, open(sys.argv[2], "w"), indent=1)
