#!/usr/bin/env python3
"""Edits one file of a checkpoint and updates its manifest to match, as
something other than plan-run might write it: the size and CRC-32 agree,
so only the file's own format can tell.

  forge_checkpoint.py STEP_DIR FILE STATEMENT

STATEMENT is Python run with `data` bound to the file's bytes (a
bytearray, edited in place) and `struct` imported. Offsets: the header is
the magic (0), version (4), step count (8) and entry count (16); the
first entry's name length is at 20.
"""

import json
import os
import struct
import sys
import zlib


def main():
    step_dir, name, statement = sys.argv[1:4]
    path = os.path.join(step_dir, name)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    exec(statement, {"data": data, "struct": struct})
    with open(path, "wb") as f:
        f.write(data)
    manifest_path = os.path.join(step_dir, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    manifest["files"][name] = {"bytes": len(data), "crc32": zlib.crc32(data)}
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)


if __name__ == "__main__":
    main()
