"""Checks the reference pages generated from ODS (build/docs).

Every operation, attribute, type and pass has a heading there; each must be
followed by its summary (the generator's `_summary_` line), and each page
must document something. Prints the counts; fails naming what lacks one.
"""
import os
import re
import sys

docs = sys.argv[1]
pages = {name: os.path.join(docs, name + ".md") for name in sys.argv[2:]}
missing, counted = [], {}
for name, path in pages.items():
    lines = open(path).read().splitlines()
    headings = [i for i, line in enumerate(lines) if line.startswith("### ")]
    if not headings:
        missing.append(f"{path}: documents nothing")
    for i in headings:
        following = next((l for l in lines[i + 1:] if l.strip()), "")
        if not re.fullmatch(r"_\S.*_", following):
            missing.append(f"{path}: {lines[i][4:]} has no summary")
    counted[name] = len(headings)
if missing:
    sys.exit("\n".join(missing))
print(" ".join(f"{name}={count}" for name, count in counted.items()))
