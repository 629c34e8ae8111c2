#!/usr/bin/env python3
"""Regenerates the IR excerpts in docs/*.md from real plan-opt runs.

An excerpt in a document is marked

    <!-- excerpt NAME: plan-opt ARGS... -->
    ```mlir
    ...
    ```
    <!-- end excerpt -->

This script runs the command (from the repository root), keeps the lines
that the rules for NAME below select, writes "..." for what it drops, and
puts the result between the markers. With --check it changes nothing and
fails, showing the difference, when a document is out of date: a lit test
runs it so that the documents stay true to the compiler.
"""
import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys

# Per excerpt: (regex, how many matching lines to keep), first match wins.
RULES = {
    "tfm": [
        (r"^\s*(tfm\.model|\^bb0|tfm\.yield|\})", 99),
        (r"tfm\.(embedding|lm_head|cross_entropy)\b", 9),
        (r"tfm\.block \d", 2),
        (r"tfm\.param \"layers\.0\.attn_norm", 1),
        (r"tfm\.rms_norm %h", 1),
        (r"tfm\.attention", 1),
        (r"\"embed\.tokens\.weight\"", 1),
    ],
    "dist": [
        (r"^(tfm\.model|\^bb0)", 2),
        (r"dist\.(stage |send|recv|stage_return|vocab_embedding|"
         r"vocab_cross_entropy)", 99),
        (r"%\d+ = dist\.stage", 1),
        (r"tfm\.block \d", 2),
        (r"attn\.q\.weight", 1),
        (r"attn\.out\.weight", 1),
        (r"dist\.all_reduce", 2),
        (r"^\s*\}$", 99),
    ],
    "async": [
        (r"tfm\.block 0", 1),
        (r"tfm\.layer_norm %h", 2),
        (r"tfm\.attention", 1),
        (r"tfm\.linear %\d+, %\d+ :", 2),
        (r"dist\.async", 2),
        (r"^        %\d+ = dist\.all_reduce", 2),
        (r"dist\.yield", 2),
        (r"^      \}$", 2),
        (r"tfm\.gelu", 1),
        (r"dist\.wait", 2),
        (r"tfm\.bias_add", 2),
        (r"tfm\.add %h", 1),
    ],
    "exec": [
        (r"exec\.program @rank0", 1),
        (r"exec\.buffer @tokens", 1),
        (r"exec\.buffer @embed\.tokens\.weight ", 1),
        (r"exec\.phase", 3),
        (r"exec\.(send|recv)", 2),
        (r"exec\.collective all_(gather|reduce) \"tp\"", 2),
        (r"exec\.kernel \"(grad_sumsq|clip_coefficient)\"", 2),
        (r"exec\.collective all_reduce \"world\"", 1),
        (r"exec\.kernel \"adamw\"", 1),
        (r"exec\.schedule", 1),
        (r"exec\.run", 3),
    ],
}

# Longer lines are cut at a comma, with ", ..." for the rest.
WIDTH = 150

MARKER = re.compile(r"<!-- excerpt (\w+): (.*?) -->\n```mlir\n(.*?)```\n"
                    r"<!-- end excerpt -->", re.S)


def select(name, text):
    """The lines of `text` that the rules of `name` keep, gaps as '...'."""
    rules = [(re.compile(pattern), limit) for pattern, limit in RULES[name]]
    kept, counts, dropped = [], {}, False
    lines = text.splitlines()
    # Only the first program of an exec module: the rest repeat it.
    if name == "exec":
        end = next((i for i, l in enumerate(lines)
                    if l.startswith("  exec.program") and i > 1),
                   len(lines))
        lines = lines[:end]
    for line in lines:
        # The module around everything says nothing.
        if not line.startswith("  "):
            continue
        line = line[2:]
        if len(line) > WIDTH:
            line = line[:line.rindex(", ", 0, WIDTH)] + ", ..."
        keep = False
        for index, (pattern, limit) in enumerate(rules):
            if pattern.search(line):
                keep = counts.get(index, 0) < limit
                counts[index] = counts.get(index, 0) + 1
                break
        if keep:
            if dropped and kept:
                indent = len(line) - len(line.lstrip())
                kept.append(" " * max(indent, 2) + "...")
            kept.append(line)
            dropped = False
        else:
            dropped = True
    return "\n".join(kept) + "\n"


def render(match, plan_opt, root):
    name, command = match.group(1), match.group(2)
    args = shlex.split(command)
    if args[0] != "plan-opt" or name not in RULES:
        sys.exit(f"excerpt {name}: expected a known name and a plan-opt "
                 f"command, got '{command}'")
    run = subprocess.run([plan_opt] + args[1:], cwd=root,
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"excerpt {name}: '{command}' failed:\n{run.stderr}")
    return (f"<!-- excerpt {name}: {command} -->\n```mlir\n"
            f"{select(name, run.stdout)}```\n<!-- end excerpt -->")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("documents", nargs="+")
    parser.add_argument("--plan-opt", required=True)
    parser.add_argument("--check", action="store_true")
    options = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    stale = False
    for path in options.documents:
        with open(path) as f:
            old = f.read()
        new = MARKER.sub(lambda m: render(m, options.plan_opt, root), old)
        if not MARKER.search(old):
            sys.exit(f"{path}: no excerpt markers")
        if new == old:
            continue
        if options.check:
            stale = True
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True), path,
                path + " (regenerated)"))
        else:
            with open(path, "w") as f:
                f.write(new)
    if stale:
        sys.exit("out of date: run scripts/update-doc-excerpts.py "
                 "--plan-opt build/bin/plan-opt docs/architecture.md")


if __name__ == "__main__":
    main()
