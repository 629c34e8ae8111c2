#!/usr/bin/env python3
"""Checks the project's layering by what its sources include.

    check_layering.py ROOT

- dialects/, compiler/ and passes/ include nothing of runtime/ (the
  compiler and the runtime share only the plan format: plan/ and support/);
- plan/ includes nothing of MLIR, LLVM, CUDA or MPI, nor of the dialects,
  the compiler or the runtime (the runtime builds it on its own);
- support/ includes nothing of the project but support/.

Prints "layering: N files, no leaks"; exits 1 listing each leak as
FILE:LINE: includes HEADER (why).
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')

# (folders, what they must not include, why)
RULES = [
    (("dialects", "compiler", "passes"),
     re.compile(r"^(partita/runtime/|runtime/)"),
     "the compiler includes no runtime header"),
    (("plan",),
     re.compile(r"^(mlir/|llvm/|cuda|cublas|cudnn|nccl|mpi\.h|dialects/|"
                r"compiler/|passes/|partita/runtime/|runtime/)"),
     "plan/ is plain C++ that the runtime builds on its own"),
    (("support",),
     re.compile(r"^(mlir/|llvm/|dialects/|compiler/|passes/|plan/|"
                r"partita/|runtime/)"),
     "support/ depends on nothing of the project"),
]
SOURCES = (".h", ".cpp", ".cu", ".cuh", ".inc")


def leaks(root):
    checked, found = 0, []
    for folders, forbidden, why in RULES:
        for folder in folders:
            for dirpath, _, files in os.walk(os.path.join(root, folder)):
                for name in sorted(files):
                    if not name.endswith(SOURCES):
                        continue
                    path = os.path.join(dirpath, name)
                    checked += 1
                    with open(path, errors="replace") as f:
                        for number, line in enumerate(f, 1):
                            m = INCLUDE.match(line)
                            if m and forbidden.match(m.group(1)):
                                found.append(
                                    f"{os.path.relpath(path, root)}:{number}: "
                                    f"includes {m.group(1)} ({why})")
    return checked, found


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    checked, found = leaks(sys.argv[1])
    if found:
        print("\n".join(found), file=sys.stderr)
        sys.exit(1)
    print(f"layering: {checked} files, no leaks")


if __name__ == "__main__":
    main()
