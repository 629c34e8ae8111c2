#!/usr/bin/env python3
"""The CPU backend's efficiency: model FLOP/s of plan-run on one rank
against OpenBLAS sgemm FLOP/s on the model's GEMM shapes, measured in the
same run.

  bench/cpu_efficiency.py [--build build] [--steps 6] [--hidden 512]

Compiles a 4-layer Llama-style model (hidden 512 by default, f32) for one
CPU rank, trains it for a few steps, and prints model GFLOP/s (the cost
model's model FLOPs per step over the measured step time, first step
excluded), the sgemm GFLOP/s and their ratio.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    h = args.hidden
    spec = {
        "version": 1, "name": f"llama-4x{h}",
        "model": {"vocab_size": 4096, "hidden_size": h, "num_layers": 4,
                  "num_heads": h // 64, "num_kv_heads": h // 128,
                  "ffn_hidden_size": 8 * h // 3 // 64 * 64,
                  "norm": "rms_norm", "activation": "swiglu",
                  "position_embedding": "rope",
                  "max_position_embeddings": args.seq_len},
        "training": {"seq_len": args.seq_len, "global_batch": args.batch,
                     "dtype": "f32"},
    }
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = os.path.join(tmp, "model.json")
        json.dump(spec, open(spec_path, "w"))
        plan_path = os.path.join(tmp, "plan.json")
        subprocess.run([os.path.join(bin_dir, "plan-opt"), spec_path,
                        "--topology=cpu:1", "--no-search",
                        f"--strategy=dp=1,mbs={args.batch}", "-o", plan_path],
                       check=True, capture_output=True)
        plan = json.load(open(plan_path))
        p = plan["predicted"]
        flops_per_step = p["tflops_per_gpu"] * 1e12 * p["step_time_s"]
        log = os.path.join(tmp, "log.jsonl")
        subprocess.run([os.path.join(bin_dir, "plan-run"), plan_path,
                        "--steps", str(args.steps), "--log-json", log],
                       check=True, capture_output=True)
        times = [json.loads(l)["step_time_s"] for l in open(log)][1:]
    step = statistics.median(times)
    model = flops_per_step / step / 1e9
    tokens = args.batch * args.seq_len
    ffn = spec["model"]["ffn_hidden_size"]
    shapes = [(tokens, h, h), (tokens, ffn, h), (tokens, h, ffn)]
    gemm = []
    for m, n, k in shapes:
        out = subprocess.run([os.path.join(bin_dir, "partita-gemm-bench"),
                              str(m), str(n), str(k)], check=True,
                             capture_output=True, text=True).stdout
        gemm.append(float(out.split()[0]))
    sgemm = statistics.mean(gemm)
    print(f"model {spec['name']}: {tokens} tokens per step, "
          f"{flops_per_step / 1e9:.1f} GFLOP per step (cost model)")
    print(f"plan-run, 1 rank: {step * 1e3:.1f} ms per step (median of "
          f"{len(times)}), {model:.1f} GFLOP/s")
    print(f"OpenBLAS sgemm on the model's GEMM shapes: {sgemm:.1f} GFLOP/s "
          f"({', '.join(f'{g:.1f}' for g in gemm)})")
    print(f"efficiency: {model / sgemm:.1%} of sgemm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
