#!/usr/bin/env python3
"""A reference executor of plan.json, in one process, with numpy (fp32).

Runs every rank of a plan, with exact collectives and buffered pipeline
messages, for a few training steps, exactly as docs/plan-format.md says.
It is slow and simple on purpose: it is the oracle that shows a plan trains
like one device, by comparing plans of one model under different
strategies:

  plan_reference.py --steps 3 BASELINE.json OTHER.json...

prints, per plan, the loss of each step and the global gradient norm of
the first, and exits 1 when a plan's numbers differ from the baseline's
beyond fp32 rounding (naming the plan, the step and the quantity).
"""

import argparse
import json
import math
import sys

import numpy as np

# fp32 like the CPU backend; --gradcheck runs in fp64.
FLOAT = np.float32

# How far a plan's gradients after step 1, and its parameters after the
# last step, may be from the baseline plan's (relative to each tensor's
# largest element): about 10x the worst seen for gradients (1.4e-6), 5x
# for parameters (2.0e-5: AdamW's first steps turn rounding noise in a
# small gradient into a step of full size).
GRADIENT_RTOL, PARAMETER_RTOL = 2e-5, 1e-4

# -- Initialisation and data: functions of the model, not of the plan ------


M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x):
    """SplitMix64 of each uint64 in x (docs/plan-format.md)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return np.uint64(h)


def init_global(param):
    """The unsharded tensor of a parameter: element i of a normal(std)
    parameter is std * sqrt(-2 ln u1) cos(2 pi u2), u1 and u2 from
    splitmix64(key + 2i) and splitmix64(key + 2i + 1), key = FNV-1a of the
    name."""
    shape = param["global_shape"]
    if param["init"] == "zeros":
        return np.zeros(shape, FLOAT)
    if param["init"] == "ones":
        return np.ones(shape, FLOAT)
    n = math.prod(shape)
    with np.errstate(over="ignore"):
        i = np.arange(n, dtype=np.uint64) * np.uint64(2) + fnv1a64(
            param["name"])
        z, w = splitmix64(i), splitmix64(i + np.uint64(1))
    u1 = ((z >> np.uint64(11)).astype(np.float64) + 1) * 2.0 ** -53
    u2 = (w >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    normal = np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)
    return (param["init_std"] * normal).astype(np.float32).astype(
        FLOAT).reshape(shape)


def synthetic_batch(step, global_batch, seq_len, vocab):
    """Sequence j of step n is an arithmetic progression modulo vocab, so
    that a model can learn it: with h = splitmix64(0x5EED + n *
    global_batch + j), token k is (h mod vocab + k * (1 + (h >> 32) mod 4))
    mod vocab, for k in [0, seq_len]; tokens are the first seq_len, labels
    the last."""
    with np.errstate(over="ignore"):
        index = np.uint64(0x5EED) + np.arange(
            step * global_batch, (step + 1) * global_batch, dtype=np.uint64)
        h = splitmix64(index)
    start = (h % np.uint64(vocab)).astype(np.int64)
    stride = 1 + ((h >> np.uint64(32)) % np.uint64(4)).astype(np.int64)
    k = np.arange(seq_len + 1, dtype=np.int64)
    seqs = (start[:, None] + k[None, :] * stride[:, None]) % vocab
    return seqs[:, :-1].astype(np.int32), seqs[:, 1:].astype(np.int32)


def local_slice(param, tensor, tp_rank, tp):
    """The slice of the unsharded tensor tp rank `tp_rank` holds."""
    if param["tp_dim"] is None:
        return tensor.copy()
    dim, parts = param["tp_dim"], param["tp_parts"]
    size = param["local_shape"][dim]
    padded = list(tensor.shape)
    padded[dim] = size * parts
    full = np.zeros(padded, FLOAT)
    full[tuple(slice(0, n) for n in tensor.shape)] = tensor
    part = tp_rank * parts // tp
    index = [slice(None)] * tensor.ndim
    index[dim] = slice(part * size, (part + 1) * size)
    return full[tuple(index)].copy()


def flat_part(array, rank, size):
    """Rank `rank`'s contiguous slice of `array` flattened and padded to a
    multiple of `size`."""
    flat = array.reshape(-1)
    chunk = -(-flat.size // size)
    padded = np.zeros(chunk * size, array.dtype)
    padded[:flat.size] = flat
    return padded[rank * chunk:(rank + 1) * chunk].copy()


# -- Kernels -----------------------------------------------------------------


def rope_frequencies(rotary_dim, params):
    """RoPE's inverse frequencies (float64) and the magnitude of its
    rotated channels, with the plan's scaling as transformers computes it."""
    inv = 1.0 / (params["theta"] ** (np.arange(0, rotary_dim, 2) / rotary_dim))
    kind = params.get("scaling")
    if kind == "linear":
        inv = inv / params["scaling_factor"]
    elif kind == "llama3":
        factor = params["scaling_factor"]
        low, high = params["low_freq_factor"], params["high_freq_factor"]
        old = params["original_max_positions"]
        wavelen = 2 * math.pi / inv
        smooth = (old / wavelen - low) / (high - low)
        scaled = np.where(wavelen > old / low, inv / factor, inv)
        middle = (wavelen <= old / low) & (wavelen >= old / high)
        inv = np.where(middle, (1 - smooth) * inv / factor + smooth * inv,
                       scaled)
    elif kind == "yarn":
        # As transformers' _compute_yarn_parameters writes it.
        base, old = params["theta"], params["original_max_positions"]

        def correction_dim(rotations):
            return (rotary_dim * math.log(old / (rotations * 2 * math.pi))
                    / (2 * math.log(base)))

        low = correction_dim(params["beta_fast"])
        high = correction_dim(params["beta_slow"])
        if params["truncate"]:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, rotary_dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(rotary_dim // 2) - low) / (high - low), 0, 1)
        extrapolation = 1 - ramp
        inv = (inv / params["scaling_factor"]) * (1 - extrapolation) + \
            inv * extrapolation
    elif kind == "longrope":
        inv = inv / np.asarray(params["frequency_factors"], dtype=np.float64)
    magnitude = params.get("attention_factor", 1.0) \
        if kind in ("yarn", "longrope") else 1.0
    return inv, magnitude


def rope_tables(seq, rotary_dim, params):
    inv, magnitude = rope_frequencies(rotary_dim, params)
    angles = np.outer(np.arange(seq), inv)
    return ((magnitude * np.cos(angles)).astype(FLOAT),
            (magnitude * np.sin(angles)).astype(FLOAT))


def rotate(x, params, sign):
    b, s, width = x.shape
    heads, rd = params["num_heads"], params["rotary_dim"]
    d = width // heads
    cos, sin = rope_tables(s, rd, params)
    y = x.reshape(b, s, heads, d).copy()
    x1, x2 = y[..., :rd // 2].copy(), y[..., rd // 2:rd].copy()
    c, sn = cos[None, :, None, :], sign * sin[None, :, None, :]
    y[..., :rd // 2] = x1 * c - x2 * sn
    y[..., rd // 2:rd] = x2 * c + x1 * sn
    return y.reshape(b, s, width)


def attention_probs(q, k, params):
    b, s, _ = q.shape
    h, kv = params["num_heads"], params["num_kv_heads"]
    d = q.shape[-1] // h
    qh = q.reshape(b, s, h, d).transpose(0, 2, 1, 3)
    kh = np.repeat(k.reshape(b, s, kv, d).transpose(0, 2, 1, 3), h // kv, 1)
    scores = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(d)
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    masked = np.zeros((s, s), bool)
    if params.get("causal"):
        masked |= j > i
    if params.get("window"):
        masked |= j <= i - params["window"]
    scores = np.where(masked, -np.inf, scores)
    mx = scores.max(-1, keepdims=True)
    p = np.exp(scores - mx)
    total = p.sum(-1, keepdims=True)
    # The log-sum-exp of each row, [b, h, s], which plans keep.
    lse = (mx + np.log(total))[..., 0]
    return p / total, qh, kh, lse


def attention(q, k, v, params):
    b, s, _ = q.shape
    h, kv = params["num_heads"], params["num_kv_heads"]
    d = q.shape[-1] // h
    p, _, _, lse = attention_probs(q, k, params)
    vh = np.repeat(v.reshape(b, s, kv, d).transpose(0, 2, 1, 3), h // kv, 1)
    return (p @ vh).transpose(0, 2, 1, 3).reshape(b, s, h * d), lse


def attention_bwd(do, q, k, v, params):
    b, s, _ = q.shape
    h, kv = params["num_heads"], params["num_kv_heads"]
    d, g = q.shape[-1] // h, h // kv
    p, qh, kh, _ = attention_probs(q, k, params)
    vh = np.repeat(v.reshape(b, s, kv, d).transpose(0, 2, 1, 3), g, 1)
    doh = do.reshape(b, s, h, d).transpose(0, 2, 1, 3)
    dvh = p.transpose(0, 1, 3, 2) @ doh
    dp = doh @ vh.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / math.sqrt(d)
    dqh = ds @ kh
    dkh = ds.transpose(0, 1, 3, 2) @ qh
    fold = lambda t: t.reshape(b, kv, g, s, d).sum(2).transpose(0, 2, 1, 3) \
        .reshape(b, s, kv * d)
    return dqh.transpose(0, 2, 1, 3).reshape(b, s, h * d), fold(dkh), fold(dvh)


def gelu(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / math.sqrt(2)))


def gelu_grad(x, approximate):
    if approximate == "tanh":
        u = 0.7978845608 * (x + 0.044715 * x ** 3)
        t = np.tanh(u)
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608 * (
            1 + 3 * 0.044715 * x * x)
    from math import erf
    cdf = 0.5 * (1 + np.vectorize(erf)(x / math.sqrt(2)))
    return cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def norm_stats(x, eps, rms):
    mean = 0 if rms else x.mean(-1, keepdims=True)
    xc = x - mean
    inv = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    return xc, inv


def spans(x, w):
    """x cut along its last dimension into spans of w's length, each
    normalised on its own (one head each in a per-head norm)."""
    return x.reshape(x.shape[:-1] + (x.shape[-1] // w.shape[0], w.shape[0]))


def norm_bwd(dy, x, w, eps, rms):
    shape = x.shape
    dy, x = spans(dy, w), spans(x, w)
    xc, inv = norm_stats(x, eps, rms)
    xhat = xc * inv
    dxhat = dy * w
    n = x.shape[-1]
    dx = inv * (dxhat - (dxhat * xhat).mean(-1, keepdims=True) * xhat)
    if not rms:
        dx -= inv * dxhat.mean(-1, keepdims=True)
    dw = (dy * xhat).reshape(-1, n).sum(0)
    db = dy.reshape(-1, n).sum(0)
    return dx.reshape(shape), dw, db


def vocab_range(logits, params, tp_rank):
    local = logits.shape[-1]
    start = tp_rank * local if params["vocab_parts"] > 1 else 0
    valid = start + np.arange(local) < params["vocab_size"]
    return start, valid


class Kernels:
    """Forward, backward and optimizer kernels over numpy arrays."""

    def __init__(self, plan, coords, step):
        self.plan, self.coords, self.step = plan, coords, step

    def run(self, name, ins, params):
        return getattr(self, name)(*ins, **params)

    def embedding(self, table, tokens, vocab_parts, scale=1.0):
        start = self.coords["tp"] * table.shape[0] if vocab_parts > 1 else 0
        local = tokens - start
        ok = (local >= 0) & (local < table.shape[0])
        rows = table[np.where(ok, local, 0)] * table.dtype.type(scale)
        return [np.where(ok[..., None], rows, 0)]

    def embedding_bwd(self, dy, tokens, vocab_parts, rows, scale=1.0):
        start = self.coords["tp"] * rows if vocab_parts > 1 else 0
        local = tokens - start
        ok = (local >= 0) & (local < rows)
        d = np.zeros((rows, dy.shape[-1]), dy.dtype)
        np.add.at(d, local[ok], dy[ok] * dy.dtype.type(scale))
        return [d]

    def position_embedding(self, x, table):
        return [x + table[None, :x.shape[1]]]

    def position_embedding_bwd(self, dy, rows):
        d = np.zeros((rows, dy.shape[-1]), FLOAT)
        d[:dy.shape[1]] = dy.sum(0)
        return [d]

    def shard_slice(self, x, dim, group):
        size = x.shape[dim] // self.group_size(group)
        index = [slice(None)] * x.ndim
        r = self.group_rank(group)
        index[dim] = slice(r * size, (r + 1) * size)
        return [x[tuple(index)]]

    def rms_norm(self, x, w, eps, weight_offset=0.0):
        xc, inv = norm_stats(spans(x, w), eps, True)
        return [(xc * inv * (w + w.dtype.type(weight_offset))).reshape(x.shape)]

    def layer_norm(self, x, w, b=None, eps=1e-5):
        xc, inv = norm_stats(spans(x, w), eps, False)
        return [(xc * inv * w + (0 if b is None else b)).reshape(x.shape)]

    def rms_norm_bwd(self, dy, x, w, eps, weight_offset=0.0):
        dx, dw, _ = norm_bwd(dy, x, w + w.dtype.type(weight_offset), eps, True)
        return [dx, dw]

    def layer_norm_bwd(self, dy, x, w, eps, outputs):
        dx, dw, db = norm_bwd(dy, x, w, eps, False)
        return [dx, dw, db][:outputs]

    def linear(self, x, w, b=None):
        return [x @ w.T + (0 if b is None else b)]

    def linear_bwd(self, dy, x, w, outputs):
        n = dy.shape[-1]
        dy2, x2 = dy.reshape(-1, n), x.reshape(-1, x.shape[-1])
        return [dy @ w, dy2.T @ x2, dy2.sum(0)][:outputs]

    def bias_add(self, x, b):
        return [x + b]

    def bias_add_bwd(self, dy):
        return [dy, dy.reshape(-1, dy.shape[-1]).sum(0)]

    def rotary(self, x, **params):
        return [rotate(x, params, 1)]

    def rotary_bwd(self, dy, **params):
        return [rotate(dy, params, -1)]

    def attention(self, q, k, v, **params):
        return list(attention(q, k, v, params))

    def attention_bwd(self, do, q, k, v, o, lse=None, **params):
        return list(attention_bwd(do, q, k, v, params))

    def gelu(self, x, approximate):
        return [gelu(x, approximate)]

    def gelu_bwd(self, dy, x, approximate):
        return [dy * gelu_grad(x, approximate)]

    def silu(self, x):
        return [x * sigmoid(x)]

    def silu_bwd(self, dy, x):
        s = sigmoid(x)
        return [dy * (s + x * s * (1 - s))]

    def swiglu(self, g, u):
        return [g * sigmoid(g) * u]

    def swiglu_bwd(self, dy, g, u):
        s = sigmoid(g)
        return [dy * u * (s + g * s * (1 - s)), dy * g * s]

    def geglu(self, g, u, approximate):
        return [gelu(g, approximate) * u]

    def geglu_bwd(self, dy, g, u, approximate):
        return [dy * u * gelu_grad(g, approximate), dy * gelu(g, approximate)]

    def add(self, *xs):
        return [sum(xs)]

    def copy(self, x):
        return [x.copy()]

    def ce_max(self, logits, vocab_parts, vocab_size):
        _, valid = vocab_range(logits, locals(), self.coords["tp"])
        return [np.where(valid, logits, -np.inf).max(-1)]

    def ce_stats(self, logits, mx, labels, vocab_parts, vocab_size):
        start, valid = vocab_range(logits, locals(), self.coords["tp"])
        e = np.where(valid, np.exp(logits - mx[..., None]), 0).sum(-1)
        local = labels - start
        ok = (local >= 0) & (local < logits.shape[-1])
        target = np.take_along_axis(logits, np.where(ok, local, 0)[..., None],
                                    -1)[..., 0]
        return [np.stack([e, np.where(ok, target, 0)], -1)]

    def ce_loss(self, mx, stats, scale):
        return [FLOAT(scale) *
                (np.log(stats[..., 0]) + mx - stats[..., 1]).sum()]

    def ce_bwd(self, logits, mx, stats, labels, scale, vocab_parts,
               vocab_size):
        start, valid = vocab_range(logits, locals(), self.coords["tp"])
        p = np.where(valid, np.exp(logits - mx[..., None]) /
                     stats[..., 0][..., None], 0)
        local = labels - start
        ok = (local >= 0) & (local < logits.shape[-1])
        onehot = np.zeros_like(p)
        np.put_along_axis(onehot, np.where(ok, local, 0)[..., None],
                          ok[..., None].astype(FLOAT), -1)
        return [(scale * (p - onehot)).astype(FLOAT)]

    def grad_sumsq(self, *grads, weights):
        return [FLOAT(sum(w * float((g.astype(np.float64) ** 2).sum())
                               for g, w in zip(grads, weights)))]

    def clip_coefficient(self, sumsq):
        clip = self.plan["optimizer"]["clip_norm"]
        if clip == 0:
            return [FLOAT(1)]
        return [FLOAT(min(1.0, clip / (math.sqrt(sumsq) + 1e-6)))]

    def adamw(self, p, g, m, v, c, weight_decay, dp_shard):
        o = self.plan["optimizer"]
        t = self.step + 1
        lr = learning_rate(o, self.step)
        target = p
        if dp_shard:
            target = flat_part(p, self.coords["dp"], self.plan["mesh"]["dp"])
        g = g.reshape(-1)[:target.size].reshape(target.shape) * c \
            if dp_shard else g * c
        m = o["beta1"] * m.reshape(target.shape) + (1 - o["beta1"]) * g
        v = o["beta2"] * v.reshape(target.shape) + (1 - o["beta2"]) * g * g
        mhat, vhat = m / (1 - o["beta1"] ** t), v / (1 - o["beta2"] ** t)
        if weight_decay:
            target = target * (1 - lr * o["weight_decay"])
        target = target - lr * mhat / (np.sqrt(vhat) + o["eps"])
        if dp_shard:
            flat = p.reshape(-1).copy()
            chunk = target.size
            begin = self.coords["dp"] * chunk
            n = max(0, min(chunk, flat.size - begin))
            flat[begin:begin + n] = target[:n]
            target = flat.reshape(p.shape)
        return [target.astype(FLOAT), m.astype(FLOAT),
                v.astype(FLOAT)]


def learning_rate(o, step):
    if step < o["warmup_steps"]:
        return o["lr"] * (step + 1) / o["warmup_steps"]
    if o["decay_steps"] == 0 or o["decay"] == "constant":
        return o["lr"]
    done = min(1.0, (step - o["warmup_steps"]) / o["decay_steps"])
    shape = 0.5 * (1 + math.cos(math.pi * done)) if o["decay"] == "cosine" \
        else 1 - done
    return o["min_lr"] + (o["lr"] - o["min_lr"]) * shape


# -- Ranks and the scheduler -------------------------------------------------


class Rank:
    def __init__(self, plan, rank):
        self.plan = plan
        self.rank = rank
        self.coords = plan["devices"][rank]
        self.program = plan["programs"][self.coords["pp"]]
        self.kinds = {b["name"]: b for b in self.program["buffers"]}
        self.state = {}      # persistent buffers
        self.per_mb = {}     # (micro-batch, name) -> array
        self.groups = {}
        for name, groups in plan["groups"].items():
            for index, members in enumerate(groups):
                if rank in members:
                    self.groups[name] = (index, members)

    def zeros(self, name):
        b = self.kinds[name]
        dtype = np.int32 if b["dtype"].startswith("i") else FLOAT
        return np.zeros(b["shape"], dtype)

    def transient(self, name):
        return self.kinds[name]["kind"] in ("tokens", "labels", "activation",
                                            "activation_grad")

    def get(self, name, mb):
        store, key = (self.per_mb, (mb, name)) if self.transient(name) \
            else (self.state, name)
        if key not in store:
            store[key] = self.zeros(name)
        return store[key]

    def put(self, name, mb, value, accumulate=False):
        store, key = (self.per_mb, (mb, name)) if self.transient(name) \
            else (self.state, name)
        value = np.asarray(value, FLOAT if not self.kinds[name][
            "dtype"].startswith("i") else np.int32).reshape(
                self.kinds[name]["shape"])
        store[key] = store[key] + value if accumulate and key in store \
            else value.copy()


def initialise(plan, ranks):
    for param in plan["parameters"]:
        tensor = init_global(param)
        for rank in ranks:
            c = rank.coords
            for h in param["holders"]:
                if h["pp_rank"] != c["pp"]:
                    continue
                local = local_slice(param, tensor, c["tp"], plan["mesh"]["tp"])
                if h["dp_shard"]:
                    local = flat_part(local, c["dp"], plan["mesh"]["dp"])
                rank.state[h["buffer"]] = local


def run_step(plan, ranks, step):
    t = plan["training"]
    m, mbs = t["num_micro_batches"], t["micro_batch_size"]
    vocab = t["vocab_size"]
    tokens, labels = synthetic_batch(step, t["global_batch"], t["seq_len"],
                                     vocab)
    for rank in ranks:
        rank.per_mb = {}
        for name, b in rank.kinds.items():
            if b["kind"] in ("param_grad", "grad_shard", "scalar"):
                rank.state[name] = rank.zeros(name)
        d = rank.coords["dp"]
        for mb in range(m):
            rows = slice((d * m + mb) * mbs, (d * m + mb + 1) * mbs)
            for name, b in rank.kinds.items():
                if b["kind"] == "tokens":
                    rank.put(name, mb, tokens[rows])
                elif b["kind"] == "labels":
                    rank.put(name, mb, labels[rows])
    kernels = {r.rank: Kernels(plan, r.coords, step) for r in ranks}
    for r in ranks:
        kernels[r.rank].group_size = lambda g, r=r: len(r.groups[g][1])
        kernels[r.rank].group_rank = lambda g, r=r: r.groups[g][1].index(r.rank)
    programs = {r.rank: execute(plan, r, kernels[r.rank]) for r in ranks}
    schedule(plan, ranks, programs)


def execute(plan, rank, kernels):
    """A generator over one rank's step: yields at collectives and
    receives, which the scheduler completes."""
    phases = {(p["kind"], p.get("chunk")): p for p in rank.program["phases"]}
    runs = [(r["phase"], r["chunk"], r["micro_batch"])
            for r in rank.program["schedule"]] + [("step", None, 0)]
    for kind, chunk, mb in runs:
        for launch in phases[(kind, chunk)]["launches"]:
            if launch.get("last_micro_batch") and \
                    mb != plan["training"]["num_micro_batches"] - 1:
                continue
            op = launch["op"]
            if op == "kernel":
                ins = [rank.get(n, mb) for n in launch["ins"]]
                params = dict(launch["params"])
                name = launch["kernel"]
                if name in ("linear_bwd", "layer_norm_bwd"):
                    params["outputs"] = len(launch["outs"])
                if name in ("embedding_bwd", "position_embedding_bwd"):
                    params["rows"] = rank.kinds[launch["outs"][0]]["shape"][0]
                outs = kernels.run(name, ins, params)
                acc = launch.get("accumulate", [False] * len(outs))
                for n, value, a in zip(launch["outs"], outs, acc):
                    rank.put(n, mb, value, a)
            elif op == "send":
                yield ("send", launch, mb)
            elif op == "wait":
                # Collectives complete where they start: the verifier keeps
                # what runs before their wait away from their buffers.
                continue
            else:
                yield (op, launch, mb)


def peer(rank, direction, pp):
    c = rank.coords
    p = (c["pp"] + (1 if direction == "next" else -1)) % pp
    mesh = rank.plan["mesh"]
    return (p * mesh["dp"] + c["dp"]) * mesh["tp"] + c["tp"]


def schedule(plan, ranks, programs):
    pp = plan["mesh"]["pp"]
    waiting = {}   # rank -> request
    queues = {}    # (src, dst) -> [array]
    live = set(programs)

    def advance(r):
        try:
            waiting[r] = next(programs[r])
        except StopIteration:
            live.discard(r)
            waiting.pop(r, None)

    for r in list(live):
        advance(r)
    while live:
        progress = False
        for r in list(live):
            kind, launch, mb = waiting[r]
            rank = ranks[r]
            if kind == "send":
                dst = peer(rank, launch["peer"], pp)
                queues.setdefault((r, dst), []).append(
                    rank.get(launch["buffer"], mb).copy())
                advance(r)
                progress = True
            elif kind == "recv":
                src = peer(rank, launch["peer"], pp)
                if queues.get((src, r)):
                    rank.put(launch["buffer"], mb, queues[(src, r)].pop(0))
                    advance(r)
                    progress = True
        # Collectives complete when every member of the group waits at one.
        for r in list(live):
            if r not in waiting or waiting[r][0] != "collective":
                continue
            launch = waiting[r][1]
            _, members = ranks[r].groups[launch["group"]]
            if all(m in live and waiting.get(m, ("",))[0] == "collective" and
                   waiting[m][1]["group"] == launch["group"] for m in members):
                collective([ranks[m] for m in members],
                           [waiting[m] for m in members])
                for m in members:
                    advance(m)
                progress = True
        if not progress:
            raise SystemExit(f"the ranks deadlock: {sorted(live)} wait at "
                             f"{[(r, waiting[r][0]) for r in sorted(live)]}")


def collective(members, requests):
    launch = requests[0][1]
    kind, group = launch["collective"], launch["group"]
    inputs = [m.get(req[1]["input"], req[2]) for m, req in zip(members,
                                                                 requests)]
    n = len(members)
    dim = launch.get("dim")
    acc = launch.get("accumulate", False)
    for i, (m, req) in enumerate(zip(members, requests)):
        out, mb = req[1]["output"], req[2]
        if kind == "all_reduce":
            stack = np.stack(inputs)
            value = stack.max(0) if launch["reduction"] == "max" \
                else stack.sum(0)
        elif kind == "all_gather" and dim is not None:
            value = np.concatenate(inputs, dim)
        elif kind == "all_gather":
            shape = m.kinds[out]["shape"]
            size = math.prod(shape)
            if req[1]["input"] == out:  # in place: each rank's own slice
                parts = [flat_part(x, j, n) for j, x in enumerate(inputs)]
            else:
                parts = [x.reshape(-1) for x in inputs]
            value = np.concatenate(parts)[:size].reshape(shape)
        elif dim is not None:  # reduce_scatter
            value = np.split(np.stack(inputs).sum(0), n, dim)[i]
        else:
            value = flat_part(np.stack(inputs).sum(0), i, n)
        m.put(out, mb, value, acc)


class CopiesDiffer(Exception):
    pass


def global_tensor(plan, ranks, param, gradient=False):
    """Reassembles a parameter (or its reduced gradient) from the ranks of
    data-parallel rank 0, gathering ZeRO shards over dp; every
    data-parallel replica of an unsharded one must hold it exactly."""
    holder = param["holders"][0]
    mesh = plan["mesh"]
    name = holder["buffer"]
    sharded = holder["dp_shard"]
    if gradient:
        base = name[:-len(".shard")] if name.endswith(".shard") else name
        sharded = "grad_shard." + base in ranks[0].kinds or any(
            "grad_shard." + base in r.kinds for r in ranks)
        name = ("grad_shard." if sharded else "grad.") + base

    def rank_of(d, t):
        return ranks[(holder["pp_rank"] * mesh["dp"] + d) * mesh["tp"] + t]

    parts = []
    for t in range(mesh["tp"]):
        if sharded:
            shards = [rank_of(d, t).state[name] for d in range(mesh["dp"])]
            size = math.prod(param["local_shape"])
            parts.append(np.concatenate(shards)[:size]
                         .reshape(param["local_shape"]))
        else:
            copies = [rank_of(d, t).state[name] for d in range(mesh["dp"])]
            for d, copy in enumerate(copies[1:], 1):
                if not np.array_equal(copy, copies[0]):
                    raise CopiesDiffer(
                        f"{'gradient of ' if gradient else ''}"
                        f"{param['name']}: dp rank {d}'s copy differs from "
                        f"dp rank 0's")
            parts.append(copies[0])
    if param["tp_dim"] is None:
        return parts[0]
    per = mesh["tp"] // param["tp_parts"]
    whole = np.concatenate(parts[::per], param["tp_dim"])
    return whole[tuple(slice(0, n) for n in param["global_shape"])]


def train(plan, steps):
    ranks = [Rank(plan, r) for r in range(plan["mesh"]["world_size"])]
    initialise(plan, ranks)
    losses, norms = [], []
    last = plan["mesh"]["pp"] - 1
    for step in range(steps):
        run_step(plan, ranks, step)
        loss_rank = next(r for r in ranks if r.coords["pp"] == last)
        losses.append(float(loss_rank.state["loss"]))
        # grad_sumsq is reduced over the world: every rank holds it.
        norms.append(math.sqrt(float(ranks[0].state["grad_sumsq"])))
        if step == 0:
            grads = {p["name"]: global_tensor(plan, ranks, p, gradient=True)
                     for p in plan["parameters"]}
    params = {p["name"]: global_tensor(plan, ranks, p)
              for p in plan["parameters"]}
    return losses, norms, grads, params


def gradcheck(plan):
    """Central differences of the loss against the plan's gradients, for a
    few elements of every parameter (fp64, the plan's first step)."""
    global FLOAT
    FLOAT = np.float64
    plan["optimizer"]["clip_norm"] = 0

    def loss_and_grads(overrides):
        ranks = [Rank(plan, r) for r in range(plan["mesh"]["world_size"])]
        initialise(plan, ranks)
        for name, (index, delta) in overrides.items():
            ranks[0].state[name][index] += delta
        run_step(plan, ranks, 0)
        return float(ranks[-1].state["loss"]), ranks

    assert plan["mesh"]["world_size"] == 1, "gradcheck runs single-rank plans"
    _, ranks = loss_and_grads({})
    rng = np.random.default_rng(0)
    worst = 0.0
    for param in plan["parameters"]:
        name = param["holders"][0]["buffer"]
        grad = ranks[0].state["grad." + name]
        for _ in range(2):
            index = tuple(int(rng.integers(0, n)) for n in grad.shape)
            h = 1e-5
            up, _ = loss_and_grads({name: (index, h)})
            down, _ = loss_and_grads({name: (index, -h)})
            numeric = (up - down) / (2 * h)
            analytic = float(grad[index])
            err = abs(numeric - analytic) / max(abs(numeric), 1e-6)
            worst = max(worst, err)
            if err > 1e-4:
                print(f"MISMATCH gradient of {param['name']}{list(index)}: "
                      f"{analytic} != {numeric} (finite difference)")
                return 1
    print(f"gradients of {len(plan['parameters'])} parameters match finite "
          f"differences (worst relative error {worst:.1e})")
    return 0


def write_tensors(path, tensors):
    with open(path, "w") as f:
        json.dump({name: [float(x) for x in value.reshape(-1)]
                   for name, value in tensors.items()}, f)


def write_outputs(args, losses, norms, grads, params):
    """The first plan's log, gradients and parameters, in plan-run's
    formats."""
    if args.log_json:
        with open(args.log_json, "w") as log:
            for step, (loss, norm) in enumerate(zip(losses, norms), 1):
                log.write(json.dumps({"step": step, "loss": loss,
                                      "grad_norm": norm}) + "\n")
    if args.dump_grads:
        write_tensors(args.dump_grads, grads)
    if args.save_params:
        write_tensors(args.save_params, params)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rtol", type=float, default=2e-4)
    parser.add_argument("--log-json",
                        help="write the first plan's losses as plan-run "
                        "--log-json does")
    parser.add_argument("--dump-grads",
                        help="write the first plan's gradients after step 1 "
                        "as plan-run --dump-grads does")
    parser.add_argument("--save-params",
                        help="write the first plan's parameters after the "
                        "last step as plan-run --save-params does")
    parser.add_argument("--gradcheck", action="store_true",
                        help="check the first plan's gradients against "
                        "finite differences of its loss (in fp64)")
    parser.add_argument("plans", nargs="+")
    args = parser.parse_args()
    if args.gradcheck:
        return gradcheck(json.load(open(args.plans[0])))
    base = None
    for path in args.plans:
        plan = json.load(open(path))
        s = plan["strategy"]
        label = (f"dp={s['dp']},tp={s['tp']},pp={s['pp']},vpp={s['vpp']},"
                 f"zero={s['zero']},sp={int(s['sequence_parallel'])},"
                 f"recompute={s['recompute']},schedule={s['schedule']}")
        try:
            losses, norms, grads, params = train(plan, args.steps)
        except CopiesDiffer as e:
            print(f"MISMATCH {label}: {e}")
            return 1
        norm = norms[0]
        print(f"{label}: losses {' '.join(f'{x:.6f}' for x in losses)} "
              f"grad norm {norm:.6f}")
        if base is None:
            base = (losses, norm, grads, params)
            write_outputs(args, losses, norms, grads, params)
            continue
        for step, (a, b) in enumerate(zip(losses, base[0])):
            if abs(a - b) > args.rtol * abs(b):
                print(f"MISMATCH {label}: step {step} loss {a} != {b}")
                return 1
        if abs(norm - base[1]) > args.rtol * base[1]:
            print(f"MISMATCH {label}: gradient norm {norm} != {base[1]}")
            return 1
        for name, value in grads.items():
            ref = base[2][name]
            # Relative to the gradient, or to the whole model's for one that
            # is zero by construction (the key bias: softmax ignores it).
            scale = max(np.abs(ref).max(), 1e-5 * base[1])
            err = np.abs(value - ref).max() / scale
            if err > GRADIENT_RTOL:
                print(f"MISMATCH {label}: gradient of {name} differs by "
                      f"{err:.2e} (relative)")
                return 1
        for name, value in params.items():
            # Adam turns a zero gradient's rounding noise into full-size
            # steps: elements whose gradient is zero by construction, or
            # nearly (a key bias's channels that the rotary embedding
            # barely turns), cannot be compared after an update.
            settled = np.abs(base[2][name]) >= 1e-5 * base[1]
            if not settled.any():
                continue
            ref = base[3][name]
            err = (np.abs(value - ref)[settled].max()
                   / max(np.abs(ref).max(), 1e-12))
            if err > PARAMETER_RTOL:
                print(f"MISMATCH {label}: parameter {name} after "
                      f"{args.steps} steps differs by {err:.2e} (relative)")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
