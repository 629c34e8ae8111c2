"""Checks that each quoted #include in runtime/ names a file in runtime/ or in
plan/, the registry it builds with."""
import os
import re
import sys

root = os.path.abspath(sys.argv[1])
# runtime/CMakeLists.txt's include directories.
dirs = [os.path.join(root, d) for d in
        ("include", "", "cuda/emulator/include", "cuda/emulator",
         "../plan/include")]
include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
checked, outside = 0, []
for here, _, files in os.walk(root):
    for name in files:
        if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
            continue
        path = os.path.join(here, name)
        for target in include.findall(open(path, encoding="utf-8").read()):
            checked += 1
            if not any(os.path.isfile(os.path.join(d, target))
                       for d in [here] + dirs):
                outside.append(f"{os.path.relpath(path, root)}: {target}")
if outside:
    sys.exit("includes that resolve outside runtime/ and plan/:\n  " +
             "\n  ".join(outside))
print(f"runtime includes: {checked} checked, all inside runtime/ and plan/")
