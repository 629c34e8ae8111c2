#!/usr/bin/env python3
"""Strategy-search speed over model and cluster sizes.

For GPT-style models from 1B to 1T parameters and clusters from 8 to 16,384
GPUs (dgx-h100 nodes) this runs plan-opt's search once per pair and prints
the search time (the search alone, as the report measures it) and the
configurations costed per second. Single-threaded; times are this machine's.

    bench/search_speed.py [--plan-opt build/bin/plan-opt] [--markdown FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, layers, hidden, heads): GPT shapes in the spirit of the
# Megatron-LM and GPT-3 families.
MODELS = [
    ("1.3B", 24, 2048, 16),
    ("13B", 40, 5120, 40),
    ("175B", 96, 12288, 96),
    ("1T", 128, 25600, 160),
]
CLUSTERS = [1, 8, 64, 512, 2048]  # dgx-h100 nodes of 8 GPUs


def spec(name, layers, hidden, heads):
    return {
        "version": 1, "name": "gpt-" + name,
        "model": {"vocab_size": 51200, "hidden_size": hidden,
                  "num_layers": layers, "num_heads": heads,
                  "ffn_hidden_size": 4 * hidden, "norm": "layer_norm",
                  "activation": "gelu", "position_embedding": "learned",
                  "max_position_embeddings": 2048, "tie_embeddings": True},
        "training": {"seq_len": 2048, "global_batch": 2048},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan-opt", default=os.path.join(ROOT, "build", "bin", "plan-opt"))
    parser.add_argument("--markdown")
    args = parser.parse_args()
    lines = ["| model | GPUs | configurations | search s | configurations/s | plan |",
             "|---|---:|---:|---:|---:|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, layers, hidden, heads in MODELS:
            path = os.path.join(tmp, name + ".json")
            with open(path, "w") as f:
                json.dump(spec(name, layers, hidden, heads), f)
            for nodes in CLUSTERS:
                report = os.path.join(tmp, "report.json")
                result = subprocess.run(
                    [args.plan_opt, path, "--topology=dgx-h100:%d" % nodes,
                     "--report=" + report, "-o", os.devnull],
                    capture_output=True, text=True)
                gpus = 8 * nodes
                if result.returncode != 0:
                    reason = result.stderr.strip().splitlines()[-1]
                    lines.append("| %s | %d | - | - | - | %s |" % (
                        name, gpus, "does not fit" if "fits" in reason else reason))
                    continue
                with open(report) as f:
                    r = json.load(f)
                s = r["strategy"]
                plan = "dp=%d tp=%d pp=%d zero=%d" % (s["dp"], s["tp"], s["pp"], s["zero"])
                lines.append("| %s | %d | %d | %.3f | %.0f | %s |" % (
                    name, gpus, r["candidates_costed"], r["search_time_s"],
                    r["candidates_costed"] / max(r["search_time_s"], 1e-9), plan))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
