#!/usr/bin/env python3
"""Every kernel of the plan format, forward and backward, against PyTorch.

    kernel_oracle.py --runner "partita-kernel-run" [--report] [--json FILE]

Builds launches of each kernel at small, odd shapes (7 tokens, 13 vocabulary
entries, head sizes that are no power of two, grouped heads, partial
rotary with each scaling, windows, vocabulary slices with padding, sharded
AdamW), runs them
through the runner (partita-kernel-run, or its CUDA builds), and holds each
output against the same computation in float64 by PyTorch: the forward
directly, the backward kernels against torch.autograd.grad of that forward,
and AdamW against torch.optim.AdamW. Inputs are float32 values (bfloat16
values for the bf16 checks), so that both sides see the same numbers.

The error of an output is its largest absolute difference over its largest
absolute expected value. Limits: f32 5e-6, about 10x the worst measured
(2.5e-7 on the CPU backend, 3.4e-7 on the CUDA emulator with these
inputs, 4.5e-7 with others, in attention's backward); bf16 3e-2, where
rounding each output to bf16 alone costs up to 2^-9 of its largest value
(worst measured 3.6e-3 on the CPU, 3.8e-3 on the emulator with these
inputs and 8.4e-3 with others, in attention's backward, which keeps its
probabilities in bf16). Every kernel of
the registry (plan/Kernels.cpp) must have a check.

Prints "N launches of K kernels match PyTorch: worst f32 ... bf16 ..."
(with --json, those numbers to a file as well); exits 1 naming the launch,
output and element where one does not.
"""

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys

import torch
import torch.nn.functional as F

# The frequencies of RoPE's scalings, as transformers computes them (the
# rotation itself, forward and backward, is PyTorch's here).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "Tools"))
from plan_reference import rope_frequencies  # noqa: E402

F32_LIMIT = 5e-6
BF16_LIMIT = 3e-2

generator = torch.Generator().manual_seed(5)


def rand(*shape, scale=1.0):
    """float64 with float32 values."""
    return (torch.randn(shape, generator=generator) * scale).float().double()


def tokens(shape, high):
    return torch.randint(0, high, shape, generator=generator, dtype=torch.int32)


def spec(t, dtype):
    if not t.is_floating_point():
        return {"shape": list(t.shape), "dtype": "i32",
                "data": t.flatten().tolist()}
    return {"shape": list(t.shape), "dtype": dtype,
            "data": t.flatten().tolist()}


class Checks:
    """Launches and what their outputs must hold."""

    def __init__(self):
        self.launches = []
        self.expected = []  # per launch: (label, [tensor or None], limit)

    def add(self, label, kernel, ins, expected, params=None, dtype="f32",
            context=None, optimizer=None, outs=None):
        """A launch of `kernel` on `ins`; its outputs must equal `expected`
        (None: not checked). `outs` gives the output specs where they are
        more than a shape (accumulate, in place)."""
        launch = {"kernel": kernel, "params": params or {},
                  "ins": [spec(t, dtype) for t in ins],
                  "outs": outs or [{"shape": list(e.shape), "dtype": dtype}
                                   for e in expected]}
        if context:
            launch["context"] = context
        if optimizer:
            launch["optimizer"] = optimizer
        if any(o.get("accumulate") for o in launch["outs"]):
            launch["accumulate"] = [o.pop("accumulate", False)
                                    for o in launch["outs"]]
        self.launches.append(launch)
        limit = BF16_LIMIT if dtype == "bf16" else F32_LIMIT
        self.expected.append((f"{kernel} ({label})" if label else kernel,
                              expected, limit))

    def pair(self, label, kernel, leaves, fn, params, saved=None, wrt=None,
             dtype="f32", context=None):
        """`kernel` on `leaves` against fn(*leaves), and `kernel`_bwd on dy
        and the leaves at `saved` (all by default) against the gradients of
        fn with respect to the leaves at `wrt` (the float ones)."""
        if dtype == "bf16":
            leaves = [t.bfloat16().double() if t.is_floating_point() else t
                      for t in leaves]
        saved = range(len(leaves)) if saved is None else saved
        wrt = [i for i, t in enumerate(leaves)
               if t.is_floating_point()] if wrt is None else wrt
        xs = [t.clone().requires_grad_(t.is_floating_point()) for t in leaves]
        y = fn(*xs)
        self.add(label, kernel, leaves, [y.detach()], params, dtype, context)
        dy = rand(*y.shape)
        if dtype == "bf16":
            dy = dy.bfloat16().double()
        grads = torch.autograd.grad(y, [xs[i] for i in wrt], dy)
        self.add(label, kernel + "_bwd", [dy] + [leaves[i] for i in saved],
                 list(grads), params, dtype, context)

    def kernels(self):
        return {launch["kernel"] for launch in self.launches}


# -- Reference computations ---------------------------------------------------


def spans(x, width):
    """x with its last dimension split into spans of `width`."""
    return x.reshape(*x.shape[:-1], x.shape[-1] // width, width)


def rms_norm(x, w, eps, offset=0.0):
    xs = spans(x, w.shape[0])
    y = xs * torch.rsqrt(xs.pow(2).mean(-1, keepdim=True) + eps)
    return (y * (w + offset)).reshape(x.shape)


def layer_norm(x, w, b, eps):
    xs = spans(x, w.shape[0])
    y = F.layer_norm(xs, (w.shape[0],), w, b, eps)
    return y.reshape(x.shape)


def rotary(x, params):
    heads, rd = params["num_heads"], params["rotary_dim"]
    b, s, width = x.shape
    xh = x.reshape(b, s, heads, width // heads)
    inv, magnitude = rope_frequencies(rd, params)
    angle = torch.arange(s, dtype=torch.float64)[:, None] * \
        torch.from_numpy(inv)[None, :]
    cos = magnitude * angle.cos()[None, :, None, :]
    sin = magnitude * angle.sin()[None, :, None, :]
    x1, x2, rest = xh[..., :rd // 2], xh[..., rd // 2:rd], xh[..., rd:]
    y = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], -1)
    return y.reshape(b, s, width)


def attention(q, k, v, params):
    """o and the log-sum-exp of each query row's scaled scores."""
    h, kv = params["num_heads"], params["num_kv_heads"]
    b, s, width = q.shape
    d = width // h
    qh = q.reshape(b, s, h, d).transpose(1, 2)
    kh = k.reshape(b, s, kv, d).transpose(1, 2).repeat_interleave(h // kv, 1)
    vh = v.reshape(b, s, kv, d).transpose(1, 2).repeat_interleave(h // kv, 1)
    scores = qh @ kh.transpose(-1, -2) / math.sqrt(d)
    i = torch.arange(s)[:, None]
    j = torch.arange(s)[None, :]
    masked = torch.zeros(s, s, dtype=torch.bool)
    if params.get("causal"):
        masked |= j > i
    if params.get("window", 0) > 0:
        masked |= j <= i - params["window"]
    scores = scores.masked_fill(masked, -math.inf)
    lse = torch.logsumexp(scores, -1)
    o = torch.softmax(scores, -1) @ vh
    return o.transpose(1, 2).reshape(b, s, width), lse


def gelu(x, approximate):
    return F.gelu(x, approximate=approximate)


# -- The checks ---------------------------------------------------------------


def dense_checks(c, dtype="f32"):
    x, w, b = rand(2, 7, 13), rand(11, 13), rand(11)
    c.pair("with bias", "linear", [x, w, b], lambda x, w, b: F.linear(x, w, b),
           {}, saved=[0, 1], dtype=dtype)
    c.pair("no bias", "linear", [rand(9, 13), w], lambda x, w: F.linear(x, w),
           {}, dtype=dtype)
    c.pair("", "bias_add", [x, rand(13)], lambda x, b: x + b, {}, saved=[],
           dtype=dtype)
    for label, width, offset in [("whole row", 12, None), ("per head", 4, None),
                                 ("weight offset", 12, 1.0)]:
        params = {"eps": 1e-5}
        if offset is not None:
            params["weight_offset"] = offset
        c.pair(label, "rms_norm", [rand(3, 5, 12), rand(width)],
               lambda x, w, p=params: rms_norm(x, w, 1e-5,
                                               p.get("weight_offset", 0.0)),
               params, dtype=dtype)
    x = rand(3, 5, 12, scale=2.0) + 0.5
    c.pair("bias", "layer_norm", [x, rand(12), rand(12)],
           lambda x, w, b: layer_norm(x, w, b, 1e-5), {"eps": 1e-5},
           saved=[0, 1], dtype=dtype)
    c.pair("per head, no bias", "layer_norm", [x, rand(6)],
           lambda x, w: layer_norm(x, w, None, 1e-5), {"eps": 1e-5},
           dtype=dtype)


def activation_checks(c, dtype="f32"):
    x, up = rand(2, 7, 10, scale=2.0), rand(2, 7, 10)
    for approximate in ["none", "tanh"]:
        params = {"approximate": approximate}
        c.pair(approximate, "gelu", [x], lambda x, a=approximate: gelu(x, a),
               params, dtype=dtype)
        c.pair(approximate, "geglu", [x, up],
               lambda g, u, a=approximate: gelu(g, a) * u, params, dtype=dtype)
    c.pair("", "silu", [x], F.silu, {}, dtype=dtype)
    c.pair("", "swiglu", [x, up], lambda g, u: F.silu(g) * u, {}, dtype=dtype)


def rotary_checks(c):
    x = rand(2, 7, 3 * 12)
    for label, params in [
            ("whole head", {"rotary_dim": 12}),
            ("partial", {"rotary_dim": 4}),
            ("linear scaling", {"rotary_dim": 12, "scaling": "linear",
                                "scaling_factor": 4.0}),
            ("llama3 scaling", {"rotary_dim": 12, "scaling": "llama3",
                                "scaling_factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0,
                                "original_max_positions": 64}),
            ("yarn scaling", {"rotary_dim": 12, "scaling": "yarn",
                              "scaling_factor": 4.0,
                              "original_max_positions": 16, "beta_fast": 32.0,
                              "beta_slow": 1.0, "truncate": True,
                              "attention_factor": 1.25}),
            ("longrope scaling", {"rotary_dim": 12, "scaling": "longrope",
                                  "original_max_positions": 16,
                                  "attention_factor": 1.1,
                                  "frequency_factors": [1.0, 1.5, 2.0, 3.0,
                                                        5.0, 8.0]})]:
        params = dict(params, num_heads=3, theta=500000.0)
        c.pair(label, "rotary", [x], lambda x, p=params: rotary(x, p), params,
               saved=[])


def attention_checks(c, dtype="f32"):
    for label, heads, kv, d, causal, window in [
            ("causal, grouped", 4, 2, 12, True, 0),
            ("window", 3, 3, 8, True, 3),
            ("not causal, one kv head", 2, 1, 10, False, 0)]:
        params = {"num_heads": heads, "num_kv_heads": kv, "causal": causal}
        if window:
            params["window"] = window
        q, k, v = rand(2, 7, heads * d), rand(2, 7, kv * d), rand(2, 7, kv * d)
        if dtype == "bf16":
            q, k, v = (t.bfloat16().double() for t in (q, k, v))
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        o, lse = attention(*leaves, params)
        o32 = o.detach().float().double()
        lse32 = lse.detach().float().double()
        outs = [{"shape": list(o.shape), "dtype": dtype},
                {"shape": list(lse.shape), "dtype": "f32"}]
        c.add(label, "attention", [q, k, v], [o.detach(), lse.detach()],
              params, dtype, outs=outs)
        do = rand(*o.shape)
        if dtype == "bf16":
            do, o32 = do.bfloat16().double(), o.detach().bfloat16().double()
        grads = list(torch.autograd.grad(o, leaves, do))
        ins = [do, q, k, v, o32]
        c.add(label, "attention_bwd", ins, grads, params, dtype)
        lse_in = {"shape": list(lse.shape), "dtype": "f32",
                  "data": lse32.flatten().tolist()}
        c.add(label + ", given lse", "attention_bwd", ins, grads, params,
              dtype)
        c.launches[-1]["ins"].append(lse_in)


def embedding_checks(c):
    vocab, hidden = 13, 6
    table = rand(14, hidden)  # two slices of 7 rows, the last one padding
    ids = tokens((2, 7), vocab)
    for parts, rank, scale in [(1, 0, 1.0), (2, 0, math.sqrt(hidden)),
                               (2, 1, 1.0)]:
        rows = 14 // parts
        local = table[rank * rows:(rank + 1) * rows]
        inside = ((ids >= rank * rows) & (ids < (rank + 1) * rows))
        params = {"vocab_parts": parts, "scale": scale}
        context = {"tp_rank": rank}

        def embed(t, ids, start=rank * rows, inside=inside, scale=scale):
            gathered = F.embedding((ids.long() - start).clamp(0, t.shape[0] - 1),
                                   t)
            return gathered * inside[..., None] * scale

        c.pair(f"{parts} parts, rank {rank}", "embedding", [local, ids], embed,
               params, saved=[1], wrt=[0], context=context)
    # The kernels' order is (table, tokens) forward and (dy, tokens) backward.
    positions = rand(9, hidden)
    c.pair("", "position_embedding", [rand(2, 7, hidden), positions],
           lambda x, t: x + t[:7], {}, saved=[], wrt=[1])


def loss_checks(c):
    """Cross-entropy over a vocabulary of 13 padded to 14, whole and in two
    slices of 7: each slice's kernels given what the collectives between
    them would hold (the largest logit of all slices, the summed stats)."""
    vocab, scale = 13, 1.0 / 14
    logits, labels = rand(2, 7, 14, scale=3.0), tokens((2, 7), vocab)
    real = logits[..., :vocab].clone().requires_grad_()
    loss = F.cross_entropy(real.reshape(-1, vocab), labels.long().reshape(-1),
                           reduction="sum") * scale
    (dreal,) = torch.autograd.grad(loss, [real])
    dlogits = torch.cat([dreal, torch.zeros(2, 7, 1, dtype=torch.float64)], -1)
    top = real.detach().max(-1).values
    top32 = top.float().double()
    sums = torch.exp(real.detach() - top32[..., None]).sum(-1)
    target = real.detach().gather(-1, labels.long()[..., None])[..., 0]
    stats = torch.stack([sums, target], -1)
    for parts in [1, 2]:
        width = 14 // parts
        for rank in range(parts):
            part = logits[..., rank * width:(rank + 1) * width]
            params = {"vocab_parts": parts, "vocab_size": vocab,
                      "scale": scale}
            context = {"tp_rank": rank}
            label = f"{parts} parts, rank {rank}"
            lo = rank * width
            real_part = part[..., :max(0, min(width, vocab - lo))]
            c.add(label, "ce_max", [part], [real_part.max(-1).values], params,
                  context=context)
            mine = (labels >= lo) & (labels < lo + width)
            part_stats = torch.stack([
                torch.exp(real_part - top32[..., None]).sum(-1),
                torch.where(mine, target, torch.zeros_like(target))], -1)
            c.add(label, "ce_stats", [part, top32, labels], [part_stats],
                  params, context=context)
            c.add(label, "ce_bwd",
                  [part, top32, stats.float().double(), labels],
                  [dlogits[..., rank * width:(rank + 1) * width]], params,
                  context=context)
    c.add("", "ce_loss", [top32, stats.float().double()],
          [loss.detach().reshape(1)], {"scale": scale})


def plumbing_checks(c):
    a, b, x = rand(3, 5), rand(3, 5), rand(3, 8, 6)
    c.add("two", "add", [a, b], [a + b])
    c.add("three", "add", [a, b, x[0, :5, :3].T.contiguous()],
          [a + b + x[0, :5, :3].T])
    c.add("", "copy", [x], [x])
    c.add("dim 1, rank 1 of 2", "shard_slice", [x], [x[:, 4:]], {"dim": 1},
          context={"group_rank": 1, "group_size": 2})
    c.add("dim 2, rank 2 of 3", "shard_slice", [x], [x[..., 4:]], {"dim": 2},
          context={"group_rank": 2, "group_size": 3})
    # An accumulating output: linear_bwd adds dw to what the buffer held.
    dy, xin, w, held = rand(9, 11), rand(9, 13), rand(11, 13), rand(11, 13)
    outs = [{"shape": [9, 13]},
            {"shape": [11, 13], "data": held.flatten().tolist(),
             "accumulate": True}]
    c.add("accumulating dw", "linear_bwd", [dy, xin, w],
          [dy @ w, held + dy.T @ xin], outs=outs)


def optimizer_checks(c):
    gs = [rand(4, 5), rand(7), rand(3, 3)]
    weights = [1.0, 0.5, 0.25]
    sumsq = sum(wt * g.pow(2).sum() for wt, g in zip(weights, gs))
    c.add("", "grad_sumsq", gs, [sumsq.reshape(1)], {"weights": weights})
    for label, value, clip in [("clipped", 9.0, 1.0), ("under", 0.25, 1.0),
                               ("no clipping", 9.0, 0.0)]:
        coefficient = 1.0 if clip == 0 else min(
            1.0, clip / (math.sqrt(value) + 1e-6))
        c.add(label, "clip_coefficient", [torch.tensor([value]).double()],
              [torch.tensor([coefficient]).double()],
              optimizer={"clip_norm": clip})
    adamw_checks(c)


def torch_adamw(p, g, m, v, step, settings, decay):
    """p, m, v after torch.optim.AdamW's update of step `step` (from 0)."""
    param = torch.nn.Parameter(p.clone())
    opt = torch.optim.AdamW([param], lr=settings["lr"],
                            betas=(settings["beta1"], settings["beta2"]),
                            eps=settings["eps"],
                            weight_decay=settings["weight_decay"] if decay
                            else 0.0)
    opt.state[param] = {"step": torch.tensor(float(step)),
                        "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    param.grad = g.clone()
    opt.step()
    state = opt.state[param]
    return param.detach(), state["exp_avg"], state["exp_avg_sq"]


def adamw_checks(c):
    settings = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8,
                "weight_decay": 0.1}
    clip = torch.tensor([0.75]).double()
    p, g, m = rand(5, 7), rand(5, 7), rand(5, 7, scale=0.1)
    v = rand(5, 7, scale=0.1).abs()
    for decay in [True, False]:
        want = torch_adamw(p, g * clip, m, v, 3, settings, decay)
        outs = [{"shape": [5, 7], "same_as": 0}, {"shape": [5, 7], "same_as": 2},
                {"shape": [5, 7], "same_as": 3}]
        c.add(f"weight decay {decay}", "adamw", [p, g, m, v, clip],
              list(want), {"weight_decay": decay, "dp_shard": False},
              context={"step": 3}, optimizer=settings, outs=outs)
    # dp_shard: rank 1 of 2 updates elements [18, 35) of the 35, and its
    # moments' last element is the padding of the last shard.
    g1, m1 = rand(18), rand(18, scale=0.1)
    v1 = rand(18, scale=0.1).abs()
    padded = torch.cat([p.flatten()[18:], torch.zeros(1).double()])
    np_, nm, nv = torch_adamw(padded, g1 * clip, m1, v1, 0, settings, True)
    whole = p.flatten().clone()
    whole[18:] = np_[:17]
    outs = [{"shape": [5, 7], "same_as": 0}, {"shape": [18], "same_as": 2},
            {"shape": [18], "same_as": 3}]
    c.add("dp_shard rank 1 of 2", "adamw", [p, g1, m1, v1, clip],
          [whole.reshape(5, 7), nm, nv],
          {"weight_decay": True, "dp_shard": True},
          context={"step": 0, "dp_rank": 1}, optimizer=settings, outs=outs)
    # With an f32 master copy w: the update applies to w, and p takes it.
    master = rand(5, 7)
    want = torch_adamw(master, g * clip, m, v, 1, settings, True)
    outs = [{"shape": [5, 7], "same_as": 0}, {"shape": [5, 7], "same_as": 2},
            {"shape": [5, 7], "same_as": 3}, {"shape": [5, 7], "same_as": 5}]
    c.add("master copy", "adamw", [p, g, m, v, clip, master],
          [want[0], want[1], want[2], want[0]],
          {"weight_decay": True, "dp_shard": False}, context={"step": 1},
          optimizer=settings, outs=outs)


def all_checks():
    c = Checks()
    dense_checks(c)
    activation_checks(c)
    rotary_checks(c)
    attention_checks(c)
    embedding_checks(c)
    loss_checks(c)
    plumbing_checks(c)
    optimizer_checks(c)
    dense_checks(c, "bf16")
    activation_checks(c, "bf16")
    attention_checks(c, "bf16")
    return c


# -- Running and comparing ----------------------------------------------------


def plan_kernels():
    registry = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                            "..", "plan", "Kernels.cpp")
    with open(registry) as f:
        return set(re.findall(r'entry\(K::\w+,\s*"(\w+)"', f.read()))


def error_of(got, want):
    """The largest difference over the largest expected value, and where."""
    got = torch.tensor(got, dtype=torch.float64)
    want = want.flatten()
    if got.numel() != want.numel():
        return math.inf, f"{got.numel()} values for {want.numel()}"
    difference = (got - want).abs()
    difference[torch.isnan(difference)] = math.inf
    where = int(difference.argmax())
    error = float(difference[where]) / max(float(want.abs().max()), 1e-30)
    return error, (f"element {where}: got {float(got[where]):.9g}, "
                   f"want {float(want[where]):.9g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runner", required=True,
                        help="the command that runs launches")
    parser.add_argument("--report", action="store_true",
                        help="print every launch's error")
    parser.add_argument("--json", metavar="FILE",
                        help="write the worst errors and mismatches to FILE")
    args = parser.parse_args()
    checks = all_checks()
    missing = plan_kernels() - checks.kernels()
    if missing:
        sys.exit(f"no check for kernels: {', '.join(sorted(missing))}")
    run = subprocess.run(shlex.split(args.runner), text=True,
                         capture_output=True,
                         input=json.dumps({"launches": checks.launches}))
    if run.returncode != 0:
        sys.exit(f"{args.runner} failed ({run.returncode}): {run.stderr}")
    results = [json.loads(line)["outs"] for line in run.stdout.splitlines()]
    if len(results) != len(checks.launches):
        sys.exit(f"{len(results)} results for {len(checks.launches)} launches")
    worst = {"f32": 0.0, "bf16": 0.0}
    worst_over_limit = 0.0
    failures = []
    for (label, expected, limit), outs in zip(checks.expected, results):
        kind = "bf16" if limit == BF16_LIMIT else "f32"
        for k, want in enumerate(expected):
            if want is None:
                continue
            error, where = error_of(outs[k], want)
            worst[kind] = max(worst[kind], error)
            worst_over_limit = max(worst_over_limit, error / limit)
            if args.report:
                print(f"{kind} {label} output {k}: {error:.1e}")
            if not error <= limit:
                failures.append(f"{label} [{kind}] output {k}: error "
                                f"{error:.2e} above {limit:.0e}, {where}")
    for failure in failures:
        print("MISMATCH", failure)
    print(f"{len(checks.launches)} launches of {len(checks.kernels())} kernels "
          f"{'do not match' if failures else 'match'} PyTorch: worst f32 "
          f"{worst['f32']:.1e} (limit {F32_LIMIT:.0e}), bf16 "
          f"{worst['bf16']:.1e} (limit {BF16_LIMIT:.0e})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"launches": len(checks.launches),
                       "kernels": len(checks.kernels()),
                       "worst_f32": worst["f32"], "limit_f32": F32_LIMIT,
                       "worst_bf16": worst["bf16"], "limit_bf16": BF16_LIMIT,
                       "worst_over_limit": worst_over_limit,
                       "mismatches": failures}, f, indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
