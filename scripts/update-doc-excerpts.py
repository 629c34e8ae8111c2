#!/usr/bin/env python3
"""Regenerates the IR excerpts and command outputs in docs/*.md from real runs.

An IR excerpt in a document is marked

    <!-- excerpt NAME: plan-opt ARGS... -->
    ```mlir
    ...
    ```
    <!-- end excerpt -->

and a command's output

    <!-- output NAME -->
    ```sh
    build/bin/plan-opt ... (the commands the reader runs)
    ```
    ```
    ...
    ```
    <!-- end output -->

This script runs the command (from the repository root; for outputs, the
sh block with build/bin/ the tools given and the other build/ paths in a
scratch folder), keeps the lines that the rules for NAME below select,
writes "..." for what it drops, and puts the result between the markers.
With --check it changes nothing and fails, showing the difference, when a
document is out of date, comparing outputs with the numbers that vary
from run to run masked (times, rates, host names): a lit test runs it so
that the documents stay true to the tools.
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

# Per output: (regex, how many matching lines to keep), first match wins.
OUTPUT_RULES = {
    "search-report": [
        (r"^model ", 1),
        (r"^  parameters ", 1),
        (r"^  parameter memory|^  step  ", 2),
        (r"^plan for|^  strategy|^  stage layers|^  why|^  step |^  memory ",
         6),
        (r"^  runners-up", 1),
        # The confirmation's rows (two times) before the runners-up (one).
        (r"^  [* ] dp=\S+( layers \S+)?\s+[\d.]+ s\s+[\d.]+ s", 3),
        (r"^    dp=", 1),
        (r"^  searched", 1),
        (r"^confirmed by simulation", 1),
    ],
    "pinned-report": [
        (r"^plan for|^  strategy |^  stage layers|^  why |^  step \d|"
         r"^  memory \d", 6),
        (r"^cost of ", 1),
        (r"^time per step", 1),
        (r"^  tp communication", 1),
        (r"^  step\s+\d+\.\d+$", 1),
        (r"^communication per step", 1),
        (r"^  collective  |^  all_gather |^  reduce_scatter |^  send_recv ",
         4),
    ],
    "gpt2-run": [
        (r"^plan for|^  strategy ", 2),
        (r"^plan-run: ", 3),
        (r"^step 1 |^step 10 ", 2),
    ],
    "profile-run": [
        (r"^plan-run: starting", 1),
        (r"^step 10 ", 1),
        # Its rows' order depends on the machine.
        (r"^time by launch", 1),
    ],
    "hf-config": [
        (r'^\{$|^  "architectures"|^    "LlamaForCausalLM"|^  \],|'
         r'"num_hidden_layers"|"num_key_value_heads"|"torch_dtype"', 99),
    ],
    # Every line (an error, a one-line result).
    "whole": [(r"", 999)],
    "tiny-run": [
        (r"^plan-run: ", 3),
        (r"^step 1 ", 1),
        (r"^step 10 ", 1),
    ],
}

# What varies from run to run: masked when --check compares outputs.
VOLATILE = [
    (re.compile(r"in \d+\.\d+ s \("), "in <seconds> s ("),
    (re.compile(r"tokens/s \d+ step_time \d+\.\d+ s"),
     "tokens/s <rate> step_time <seconds> s"),
    (re.compile(r"on (\d+ ranks \(cpu, )?\d+ BLAS thread(s?)"),
     "on <ranks> <threads>"),
    (re.compile(r"^plan-run: ranks (\S+) on \S+$", re.M),
     r"plan-run: ranks \1 on <host>"),
    (re.compile(r"which has [\d.]+ GiB available"),
     "which has <memory> GiB available"),
]

OUTPUT = re.compile(r"<!-- output (\S+) -->\n```sh\n(.*?)```\n```\n(.*?)```\n"
                    r"<!-- end output -->", re.S)

# Longer lines are cut at a comma, with ", ..." for the rest.
WIDTH = 150

MARKER = re.compile(r"<!-- excerpt (\w+): (.*?) -->\n```mlir\n(.*?)```\n"
                    r"<!-- end excerpt -->", re.S)


def keep_by_rules(lines, rules, outer_gaps, min_indent):
    """The `lines` that `rules` keep, each run of others as one '...' line
    at the next kept line's indentation (at least `min_indent`); with
    `outer_gaps`, a run before the first or after the last too."""
    rules = [(re.compile(pattern), limit) for pattern, limit in rules]
    kept, counts, dropped = [], {}, False
    for line in lines:
        keep = False
        for index, (pattern, limit) in enumerate(rules):
            if pattern.search(line):
                keep = counts.get(index, 0) < limit
                counts[index] = counts.get(index, 0) + 1
                break
        if keep:
            if dropped and (kept or outer_gaps):
                indent = len(line) - len(line.lstrip())
                kept.append(" " * max(indent, min_indent) + "...")
            kept.append(line)
            dropped = False
        else:
            dropped = True
    if dropped and outer_gaps:
        kept.append("...")
    return "\n".join(kept) + "\n"


def select(name, text):
    """The lines of IR `text` that the rules of `name` keep."""
    lines = text.splitlines()
    # Only the first program of an exec module: the rest repeat it.
    if name == "exec":
        end = next((i for i, l in enumerate(lines)
                    if l.startswith("  exec.program") and i > 1),
                   len(lines))
        lines = lines[:end]
    # The module around everything says nothing.
    lines = [l[2:] for l in lines if l.startswith("  ")]
    lines = [l[:l.rindex(", ", 0, WIDTH)] + ", ..." if len(l) > WIDTH else l
             for l in lines]
    return keep_by_rules(lines, RULES[name], outer_gaps=False, min_indent=2)


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


def select_output(name, text):
    """The lines of a command's output that the rules of `name` keep."""
    return keep_by_rules(text.splitlines(), OUTPUT_RULES[name],
                         outer_gaps=True, min_indent=0)


def render_output(match, bin_dir, scratch):
    name, commands = match.group(1), match.group(2)
    if name not in OUTPUT_RULES:
        sys.exit(f"output {name}: no rules for it in {__file__}")
    script = commands.replace("\\\n", " ")
    script = re.sub(r"(?<![\w/.])build/bin/", bin_dir + "/", script)
    script = re.sub(r"(?<![\w/.])build/", scratch + "/", script)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # A documented command may fail on purpose (an error shown); what it
    # prints is checked either way.
    run = subprocess.run(["bash", "-c", f"mkdir -p {scratch}/tutorial\n"
                          + script], cwd=root, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    if not run.stdout.strip():
        sys.exit(f"output {name}: the commands printed nothing:\n{commands}")
    # The scratch folder stands for build/ in what the commands print.
    run.stdout = run.stdout.replace(scratch + "/", "build/")
    return (f"<!-- output {name} -->\n```sh\n{commands}```\n```\n"
            f"{select_output(name, run.stdout)}```\n<!-- end output -->")


def masked(text):
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("documents", nargs="+")
    parser.add_argument("--plan-opt", required=True)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--scratch", default="/tmp/partita-doc-outputs",
                        help="where the commands' other build/ paths go")
    options = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bin_dir = os.path.dirname(os.path.abspath(options.plan_opt))
    stale = False
    for path in options.documents:
        with open(path) as f:
            old = f.read()
        if not MARKER.search(old) and not OUTPUT.search(old):
            sys.exit(f"{path}: no excerpt or output markers")
        new = MARKER.sub(lambda m: render(m, options.plan_opt, root), old)
        new = OUTPUT.sub(lambda m: render_output(m, bin_dir, options.scratch),
                         new)
        if masked(new) == masked(old) if options.check else new == old:
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
                 "--plan-opt build/bin/plan-opt docs/architecture.md "
                 "docs/tutorial.md docs/user-guide.md")


if __name__ == "__main__":
    main()
