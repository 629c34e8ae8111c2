#!/usr/bin/env python3
"""Checks that every CUDA runtime, cuBLASLt and NCCL function the CUDA
backend calls has an emulated counterpart in runtime/cuda/emulator.

The emulator links no CUDA library, so a call it lacks fails the emulated
build's link, but only where the call is compiled for the emulator: a call
made only in the GPU build (under #ifndef PARTITA_CUDA_EMULATOR, or in a
header the emulator replaces) would reach a GPU untested. So the calls are
read from the backend's sources, every line of them, and, where the GPU
build exists, from the symbols its objects import; the emulated ones are
the symbols the emulator's archive defines. cuDNN is not emulated: its
calls build only with PARTITA_HAVE_CUDNN, which the emulator never sets
(docs/gpu.md).

usage: emulator_coverage.py --sources DIR --emulated LIB [--gpu-build LIB]
"""

import argparse
import os
import re
import subprocess
import sys

CALL = re.compile(r"\b((?:cuda|cublasLt|nccl)[A-Z]\w*)\s*\(")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
SOURCE_SUFFIXES = (".cpp", ".cu", ".cuh", ".h")
# Imported by the GPU build only through CUB's DeviceRadixSort, which the
# emulator replaces whole (emulator/include/cub): not calls of the backend.
THROUGH_REPLACED_HEADERS = {
    "cudaFuncGetAttributes": "CUB's DeviceRadixSort",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags":
        "CUB's DeviceRadixSort",
}


def declares(text, match):
    """Whether `match` names a function the backend declares itself: at
    namespace scope (not indented, as clang-format leaves it), after its
    return type, not in an initialiser."""
    start = text.rfind("\n", 0, match.start()) + 1
    before = text[start:match.start()]
    return bool(before) and not before[0].isspace() and not re.search(
        r"[=(]", before)


def backend_calls(directory):
    """{function: first "file:line" that calls it} over the backend's own
    sources (not the emulator's)."""
    calls, own = {}, set()
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not name.endswith(SOURCE_SUFFIXES) or not os.path.isfile(path):
            continue
        text = open(path, encoding="utf-8").read()
        # Blank comments out but keep their newlines, so lines still count.
        text = COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
        for match in CALL.finditer(text):
            function = match.group(1)
            if function.endswith("_t"):  # a type's constructor-style cast
                continue
            if declares(text, match):
                own.add(function)
                continue
            line = text.count("\n", 0, match.start()) + 1
            calls.setdefault(function, f"{name}:{line}")
    return {f: where for f, where in calls.items() if f not in own}


def symbols(library, defined):
    flag = "--defined-only" if defined else "--undefined-only"
    listing = subprocess.run(["nm", flag, "--format=just-symbols", library],
                             check=True, capture_output=True, text=True)
    names = set()
    for symbol in listing.stdout.split():
        symbol = symbol.split(".")[0]  # foo.cold is a part of foo
        if re.fullmatch(r"(?:cuda|cublasLt|nccl)[A-Z]\w*", symbol):
            names.add(symbol)
    return names


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sources", required=True)
    parser.add_argument("--emulated", required=True)
    parser.add_argument("--gpu-build",
                        help="the GPU build's archive, where it was built")
    args = parser.parse_args()
    emulated = symbols(args.emulated, defined=True)
    calls = backend_calls(args.sources)
    missing = [f"{where}: calls {function}, which the emulator lacks"
               for function, where in sorted(calls.items(),
                                             key=lambda item: item[1])
               if function not in emulated]
    imported = set()
    if args.gpu_build and os.path.exists(args.gpu_build):
        imported = symbols(args.gpu_build, defined=False)
        for function in sorted(imported - emulated - set(calls)):
            if function not in THROUGH_REPLACED_HEADERS:
                missing.append(f"{os.path.basename(args.gpu_build)}: imports "
                               f"{function}, which the emulator lacks")
    if missing:
        print("\n".join(missing), file=sys.stderr)
        return 1
    print(f"emulator coverage: {len(calls)} functions called by the backend's "
          f"sources, {len(imported)} imported by its GPU build, all emulated "
          f"({len(emulated)} emulated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
