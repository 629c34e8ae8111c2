#!/usr/bin/env python3
"""Times PyTorch's fused attention on one shape: the reference that
scripts/gpu-check.sh sets beside the runtime's own attention kernels.

  torch_attention.py [--batch B] [--seq S] [--heads H] [--kv-heads K]
                     [--head-dim D]

Causal, bf16, grouped key/value heads (K of them for H query heads), as the
Llama-3-8B block runs it. Prints one JSON object: the median forward and
backward milliseconds of torch.nn.functional.scaled_dot_product_attention
(whichever fused kernel PyTorch picks), and TFLOP/s counting the causal
half of the s x s square (2 b H s^2 D forward, twice that backward). Without
PyTorch or a GPU it prints {"skipped": why} and exits 0.
"""

import argparse
import json
import statistics


def timed(torch, run, warmup=3, reps=10):
    """Median milliseconds of run() on the current stream."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    args = parser.parse_args()
    b, s, h, kv, d = (args.batch, args.seq, args.heads, args.kv_heads,
                      args.head_dim)
    if h % kv:
        parser.error("--heads must be a multiple of --kv-heads")
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print(json.dumps({"skipped": "PyTorch is not installed"}))
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "PyTorch sees no GPU"}))
        return 0

    def leaf(heads):
        return torch.randn(b, heads, s, d, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True)

    q, k, v = leaf(h), leaf(kv), leaf(kv)
    dout = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    try:
        F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                       enable_gqa=True)
        grouped = True
    except TypeError:  # before PyTorch 2.5: repeat the key/value heads
        k = k.detach().repeat_interleave(h // kv, 1).requires_grad_()
        v = v.detach().repeat_interleave(h // kv, 1).requires_grad_()
        grouped = False
    extra = {"enable_gqa": True} if grouped else {}

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, **extra)

    forward_ms = timed(torch, forward)
    out = forward()
    backward_ms = timed(
        torch, lambda: torch.autograd.grad(out, (q, k, v), dout,
                                           retain_graph=True))
    flop = 2.0 * b * h * s * s * d
    print(json.dumps({
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
        "shape": {"batch": b, "seq": s, "heads": h, "kv_heads": kv,
                  "head_dim": d, "causal": True, "dtype": "bf16",
                  "grouped_kv": grouped},
        "forward_ms": forward_ms, "backward_ms": backward_ms,
        "forward_tflops": flop / forward_ms * 1e-9,
        "backward_tflops": 2 * flop / backward_ms * 1e-9}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
