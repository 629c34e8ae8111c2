#!/usr/bin/env python3
"""Random models and strategies, end to end: every plan trains like one device.

  random_plans.py --plan-opt BIN --replay BIN [--seed S] [--models N]
                  [--plan-run BIN] [--keep DIR]

For each of N random tiny models (any mix of the spec's features: norms,
activations, positions, GQA, head widths, windows, biases, tied embeddings,
the parallel residual, per-head norms, odd vocabularies) it compiles a
one-device plan and plans for random strategies on 2 to 8 CPU ranks, and
checks (one more plan per model: the search's, on 2 to 8 ranks):
  - plan-opt either writes a plan or exits 1 with an `error:` line (never a
    crash or another exit status);
  - the runtime's loader accepts every plan it writes (the plan loader's
    fuzz target, which also trains each one-rank plan a step);
  - plan_reference.py gives every plan of a model the one-device plan's
    losses, gradients and parameters;
  - with --plan-run, plan-run on CPU ranks gives each plan the one-device
    plan's losses too.
Prints one line per model and a summary; exits 1 at the first failure,
naming the model (its spec is printed, and kept under --keep).
"""

import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def random_model(rng, index):
    kv_heads = rng.choice([1, 2, 4])
    heads = kv_heads * rng.choice([1, 2])
    head_dim = rng.choice([8, 16, 32])
    model = {
        "vocab_size": rng.choice([64, 97, 130, 256]),
        "hidden_size": rng.choice([heads * head_dim, 32, 48, 64]),
        "num_layers": rng.randint(1, 4),
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "ffn_hidden_size": rng.choice([32, 48, 96, 100]),
        "norm": rng.choice(["rms_norm", "layer_norm"]),
        "activation": rng.choice(
            ["gelu", "gelu_tanh", "swiglu", "geglu", "geglu_tanh"]),
        "position_embedding": rng.choice(["rope", "learned"]),
        "norm_eps": rng.choice([1e-5, 1e-6]),
    }
    seq_len = rng.choice([8, 16, 24, 32])
    if model["norm"] == "layer_norm":
        model["norm_bias"] = rng.random() < 0.7
    elif rng.random() < 0.3:
        model["norm_unit_offset"] = True
    if rng.random() < 0.2:
        model["embedding_scale"] = rng.choice([0.5, 4.0])
    if model["position_embedding"] == "learned":
        model["max_position_embeddings"] = seq_len * rng.choice([1, 2])
    else:
        model["rope_theta"] = rng.choice([10000.0, 500000.0])
        if rng.random() < 0.3:
            model["rotary_fraction"] = 0.5
        if rng.random() < 0.2:
            model["rope_scaling"] = {"type": "linear", "factor": 2.0}
    if rng.random() < 0.3:
        model["sliding_window"] = rng.choice([4, 8, 12])
    for flag in ("qkv_bias", "attn_out_bias", "mlp_bias", "tie_embeddings",
                 "parallel_residual", "qk_norm"):
        if rng.random() < 0.3:
            model[flag] = True
    return {
        "version": 1,
        "name": f"random-{index}",
        "model": model,
        "training": {
            "seq_len": seq_len,
            "global_batch": rng.choice([4, 8, 16]),
            "dtype": "f32",
        },
    }


def random_strategy(rng):
    """(ranks, --strategy) for 2 to 8 ranks."""
    ranks = rng.choice([2, 4, 8])
    factors = []
    rest = ranks
    for _ in range(2):
        f = rng.choice([d for d in (1, 2, 4, 8) if rest % d == 0])
        factors.append(f)
        rest //= f
    tp, pp = factors
    dp = rest
    pins = [f"dp={dp}", f"tp={tp}", f"pp={pp}",
            f"zero={rng.choice([0, 1, 2, 3]) if dp > 1 else 0}"]
    if tp > 1 and rng.random() < 0.5:
        pins.append("sp=1")
    pins.append("recompute=" + rng.choice(["none", "selective", "full"]))
    if pp > 1:
        schedule = rng.choice(["1f1b", "gpipe", "interleaved"])
        pins.append(f"schedule={schedule}")
        if schedule == "interleaved":
            pins.append("vpp=2")
    if rng.random() < 0.5:
        pins.append(f"mbs={rng.choice([1, 2])}")
    return ranks, ",".join(pins)


class Failure(Exception):
    pass


# Why plan-opt refused strategies: the message, numbers elided, and count.
refusals = collections.Counter()


def compile_plan(args, spec_path, ranks, strategy, out):
    """Compiles the spec for `ranks` CPU ranks with `strategy` pinned, or
    searched where it is None."""
    cmd = [args.plan_opt, spec_path, f"--topology=cpu:{ranks}", "-o", out]
    if strategy is not None:
        cmd += ["--no-search", f"--strategy={strategy}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 0:
        return True
    # A refusal is one clear line and exit status 1; anything else is a bug.
    if p.returncode != 1 or "error:" not in p.stderr:
        raise Failure(f"plan-opt exited {p.returncode} for "
                      f"{strategy or 'the search'} on {ranks} ranks:\n"
                      f"{p.stderr[-2000:]}")
    error = p.stderr[p.stderr.index("error:") + 7:].splitlines()[0]
    refusals[re.sub(r"[0-9]+", "N", error)[:100]] += 1
    return False


def run_losses(args, plan, log):
    cmd = [args.plan_run, plan, "--steps", "2", "--log-json", log]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise Failure(f"plan-run {plan} exited {p.returncode}:\n"
                      f"{p.stdout[-1000:]}{p.stderr[-2000:]}")
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def check_model(args, rng, index, work):
    spec = random_model(rng, index)
    spec_path = os.path.join(work, f"model-{index}.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
    one = os.path.join(work, f"m{index}-0.json")
    if not compile_plan(args, spec_path, 1, "dp=1", one):
        return spec, "refused", 0
    plans = [(one, "dp=1")]
    for k in range(args.strategies + 1):
        # Random pins, and one plan the search chooses.
        ranks, strategy = (random_strategy(rng) if k < args.strategies else
                           (rng.choice([2, 4, 8]), None))
        out = os.path.join(work, f"m{index}-{k + 1}.json")
        if compile_plan(args, spec_path, ranks, strategy, out):
            plans.append((out, strategy))
    names = [p for p, _ in plans]
    p = subprocess.run([args.replay] + names, capture_output=True, text=True)
    if p.returncode != 0 or f": 0 refused, {len(names)} loaded" not in p.stdout:
        raise Failure(f"the runtime's loader on {len(names)} plans:\n"
                      f"{p.stdout}{p.stderr[-3000:]}")
    p = subprocess.run([sys.executable, os.path.join(HERE, "plan_reference.py"),
                        "--steps", "2"] + names, capture_output=True, text=True)
    if p.returncode != 0:
        raise Failure(f"plan_reference.py:\n{p.stdout[-3000:]}"
                      f"{p.stderr[-3000:]}")
    if args.plan_run:
        base = run_losses(args, one, os.path.join(work, "base.log"))
        for plan, strategy in plans[1:]:
            losses = run_losses(args, plan, os.path.join(work, "run.log"))
            if any(abs(a - b) > 1e-5 * abs(b) for a, b in zip(losses, base)):
                raise Failure(f"plan-run {plan} ({strategy or 'searched'}): "
                              f"losses {losses}, one device {base}")
    return spec, "checked", len(plans) - 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan-opt", required=True)
    ap.add_argument("--replay", required=True,
                    help="plan-loader-corpus-replay")
    ap.add_argument("--plan-run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--strategies", type=int, default=4,
                    help="random strategies tried per model")
    ap.add_argument("--keep", help="keep specs and plans in this folder")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = args.keep or tempfile.mkdtemp(prefix="random-plans-")
    os.makedirs(work, exist_ok=True)
    models = parallel = refused = 0
    for index in range(args.models):
        try:
            spec, outcome, plans = check_model(args, rng, index, work)
        except Failure as e:
            with open(os.path.join(work, f"model-{index}.json")) as f:
                print(f.read())
            print(f"FAIL model {index} (seed {args.seed}): {e}")
            return 1
        features = sorted(spec["model"].items())
        print(f"model {index}: {outcome}, {plans} parallel plans; "
              + ",".join(f"{k}={v}" for k, v in features))
        if outcome == "refused":
            refused += 1
        else:
            models += 1
            parallel += plans
    print(f"{models} models trained like one device under {parallel} "
          f"parallel plans; {refused} models refused")
    for message, count in refusals.most_common():
        print(f"refused {count} times: {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
