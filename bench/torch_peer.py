#!/usr/bin/python3
"""plan-run against PyTorch on the same model, batch and CPU: one rank
against PyTorch eager, and dp=2 against PyTorch DDP (gloo), in one run.

  bench/torch_peer.py [--build build] [--steps 6] [--hidden 512]

Needs Debian's python3-torch. Both train the Llama-style model of
bench/cpu_efficiency.py (4 layers, f32, RMSNorm, RoPE, grouped-query
attention, SwiGLU, untied head) with AdamW and gradient clipping on
synthetic tokens; each rank of either uses the cores it may run on divided
by the ranks (plan-run's default). Prints tokens/s (the median step after
the first) of each and their ratio: plan-run's over PyTorch's.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time


def spec(hidden, seq_len, batch):
    return {
        "version": 1, "name": f"llama-4x{hidden}",
        "model": {"vocab_size": 4096, "hidden_size": hidden, "num_layers": 4,
                  "num_heads": hidden // 64, "num_kv_heads": hidden // 128,
                  "ffn_hidden_size": 8 * hidden // 3 // 64 * 64,
                  "norm": "rms_norm", "activation": "swiglu",
                  "position_embedding": "rope",
                  "max_position_embeddings": seq_len},
        "training": {"seq_len": seq_len, "global_batch": batch,
                     "dtype": "f32"},
    }


def plan_run_tokens_per_s(bin_dir, spec_path, ranks, batch, steps, tmp):
    plan = os.path.join(tmp, f"plan-{ranks}.json")
    log = os.path.join(tmp, f"log-{ranks}.json")
    subprocess.run([os.path.join(bin_dir, "plan-opt"), spec_path,
                    f"--topology=cpu:{ranks}", "--no-search",
                    f"--strategy=dp={ranks},mbs={batch // ranks}", "-o", plan],
                   check=True, capture_output=True)
    subprocess.run([os.path.join(bin_dir, "plan-run"), plan, "--steps",
                    str(steps), "--log-json", log], check=True,
                   capture_output=True)
    return statistics.median(
        [json.loads(l)["tokens_per_s"] for l in open(log)][1:])


def build_model(torch, m):
    nn, F = torch.nn, torch.nn.functional
    h, heads, kv = m["hidden_size"], m["num_heads"], m["num_kv_heads"]
    head, ffn = h // heads, m["ffn_hidden_size"]

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(h))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) \
                * self.weight

    def rotate(x, cos, sin):
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm, self.mlp_norm = RMSNorm(), RMSNorm()
            self.q = nn.Linear(h, h, bias=False)
            self.k = nn.Linear(h, kv * head, bias=False)
            self.v = nn.Linear(h, kv * head, bias=False)
            self.o = nn.Linear(h, h, bias=False)
            self.gate = nn.Linear(h, ffn, bias=False)
            self.up = nn.Linear(h, ffn, bias=False)
            self.down = nn.Linear(ffn, h, bias=False)

        def forward(self, x, cos, sin, mask):
            b, s, _ = x.shape
            y = self.attn_norm(x)
            q = self.q(y).view(b, s, heads, head).transpose(1, 2)
            k = self.k(y).view(b, s, kv, head).transpose(1, 2)
            v = self.v(y).view(b, s, kv, head).transpose(1, 2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            k = k.repeat_interleave(heads // kv, 1)
            v = v.repeat_interleave(heads // kv, 1)
            scores = q @ k.transpose(-1, -2) / math.sqrt(head) + mask
            a = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, h)
            x = x + self.o(a)
            y = self.mlp_norm(x)
            return x + self.down(F.silu(self.gate(y)) * self.up(y))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(m["vocab_size"], h)
            self.blocks = nn.ModuleList(Block() for _ in range(m["num_layers"]))
            self.norm = RMSNorm()
            self.head = nn.Linear(h, m["vocab_size"], bias=False)

        def forward(self, tokens, labels):
            s = tokens.shape[1]
            position = torch.arange(s, dtype=torch.float32)
            inverse = 10000.0 ** (-torch.arange(0, head, 2) / head)
            angles = torch.outer(position, inverse).repeat(1, 2)
            cos, sin = angles.cos(), angles.sin()
            mask = torch.full((s, s), float("-inf")).triu(1)
            x = self.embed(tokens)
            for block in self.blocks:
                x = block(x, cos, sin, mask)
            logits = self.head(self.norm(x))
            return F.cross_entropy(logits.flatten(0, 1), labels.flatten())

    return Model()


def torch_steps(rank, ranks, model_spec, batch, seq_len, steps, port, out):
    import torch
    torch.manual_seed(0)
    cores = len(os.sched_getaffinity(0))
    torch.set_num_threads(max(1, cores // ranks))
    model = build_model(torch, model_spec)
    if ranks > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                rank=rank, world_size=ranks)
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4,
                                  weight_decay=0.1)
    vocab = model_spec["vocab_size"]
    times = []
    for _ in range(steps):
        data = torch.randint(0, vocab, (batch // ranks, seq_len + 1))
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = model(data[:, :-1], data[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if ranks > 1:
            torch.distributed.barrier()
        times.append(time.perf_counter() - start)
    if rank == 0:
        json.dump(times, open(out, "w"))


def torch_tokens_per_s(model_spec, ranks, batch, seq_len, steps, tmp):
    import torch.multiprocessing as mp
    out = os.path.join(tmp, f"torch-{ranks}.json")
    port = 29500 + os.getpid() % 1000
    mp.spawn(torch_steps, args=(ranks, model_spec, batch, seq_len, steps,
                                port, out), nprocs=ranks, join=True)
    return batch * seq_len / statistics.median(json.load(open(out))[1:])


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch_peer.py: needs PyTorch (apt-get install python3-torch) "
              "under /usr/bin/python3")
        return 1
    bin_dir = os.path.join(args.build, "bin")
    model_spec = spec(args.hidden, args.seq_len, args.batch)
    print(f"model {model_spec['name']}: {args.batch} x {args.seq_len} tokens "
          f"a step, f32; tokens/s of the median step after the first of "
          f"{args.steps}")
    print(f"{'setup':24} {'plan-run':>10} {'PyTorch':>10} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = os.path.join(tmp, "model.json")
        json.dump(model_spec, open(spec_path, "w"))
        for ranks, peer in ((1, "1 rank vs eager"), (2, "dp=2 vs DDP (gloo)")):
            ours = plan_run_tokens_per_s(bin_dir, spec_path, ranks,
                                         args.batch, args.steps, tmp)
            theirs = torch_tokens_per_s(model_spec["model"], ranks,
                                        args.batch, args.seq_len, args.steps,
                                        tmp)
            print(f"{peer:24} {ours:10.0f} {theirs:10.0f} "
                  f"{ours / theirs:6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
