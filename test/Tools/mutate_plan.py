#!/usr/bin/env python3
"""Writes a copy of a plan.json with one plausible bug: the mutations that
scripts/mutation-check.sh shows the suite's comparisons catch.

  mutate_plan.py PLAN OUT MUTATION
  mutate_plan.py --list

Each mutation keeps the plan loadable and deadlock-free, so that plan-run
trains with it; only its numbers are wrong. It exits 2 when the plan has
nothing the mutation applies to (say, no pipeline for a swapped send).
"""

import copy
import json
import sys


def launches(plan):
    """(program, phase, index, launch) of every launch."""
    for program in plan["programs"]:
        for phase in program["phases"]:
            for k, launch in enumerate(phase["launches"]):
                yield program, phase, k, launch


def is_dp_gradient_reduction(launch):
    return (launch["op"] == "collective" and launch["group"] == "dp"
            and launch["collective"] == "all_reduce"
            and launch["input"].startswith("grad."))


def double_dp_gradients(plan):
    """Every data-parallel gradient all_reduce runs twice (a second
    reduction of a sum: each gradient doubled). Needs a plan without async
    collectives (--overlap=false)."""
    changed = 0
    for program in plan["programs"]:
        for phase in program["phases"]:
            out = []
            for launch in phase["launches"]:
                out.append(launch)
                if is_dp_gradient_reduction(launch) and not launch.get("async"):
                    again = copy.deepcopy(launch)
                    again.pop("bucket", None)
                    out.append(again)
                    changed += 1
            phase["launches"] = out
    return changed


def drop_reduction(plan, parameter="layers.0.mlp_norm.weight"):
    """One parameter's data-parallel gradient all_reduce (and its wait)
    deleted: each replica steps with its own micro-batches' gradient."""
    changed = 0
    buffer = "grad." + parameter
    for program in plan["programs"]:
        for phase in program["phases"]:
            keep = []
            for launch in phase["launches"]:
                if is_dp_gradient_reduction(launch) and \
                        launch["input"] == buffer:
                    changed += 1
                    continue
                if launch["op"] == "wait" and launch["buffer"] == buffer:
                    continue
                keep.append(launch)
            phase["launches"] = keep
    return changed


def missing_tied_sum(plan):
    """The tied embedding's gradient is not summed between the stages that
    hold it: each copy steps with half of its gradient."""
    changed = 0
    for program in plan["programs"]:
        for phase in program["phases"]:
            keep = [l for l in phase["launches"]
                    if not (l["op"] == "collective" and l["group"] == "tied")]
            changed += len(phase["launches"]) - len(keep)
            phase["launches"] = keep
    return changed


def double_loss_gradient(plan):
    """The loss's backward scaled twice (ce_bwd's scale doubled), as a
    mis-counted number of micro-batches would."""
    changed = 0
    for _, _, _, launch in launches(plan):
        if launch.get("kernel") == "ce_bwd":
            launch["params"]["scale"] *= 2
            changed += 1
    return changed


def norm_counts_replicas(plan):
    """The gradient norm counts every tensor-parallel replica of a
    replicated parameter (grad_sumsq's weights all 1)."""
    changed = 0
    for _, _, _, launch in launches(plan):
        if launch.get("kernel") == "grad_sumsq":
            weights = launch["params"]["weights"]
            if any(w != 1 for w in weights):
                launch["params"]["weights"] = [1] * len(weights)
                changed += 1
    return changed


def padded_vocabulary(plan):
    """The cross-entropy counts the padding rows of a vocabulary that
    tensor parallelism does not divide (its vocab_size the padded one)."""
    changed = 0
    for _, _, _, launch in launches(plan):
        params = launch.get("params", {})
        if launch.get("kernel", "").startswith("ce_") and \
                "vocab_size" in params:
            padded = -(-params["vocab_size"] // params["vocab_parts"]) * \
                params["vocab_parts"]
            if padded != params["vocab_size"]:
                params["vocab_size"] = padded
                changed += 1
    return changed


def swap_pipeline_sends(plan):
    """The first stage sends its first two micro-batches' activations in
    the wrong order (their forward runs swapped)."""
    if plan["mesh"]["pp"] < 2:
        return 0
    schedule = plan["programs"][0]["schedule"]
    forward = [run for run in schedule if run["phase"] == "forward"]
    if len(forward) < 2 or forward[0]["chunk"] != forward[1]["chunk"]:
        return 0
    forward[0]["micro_batch"], forward[1]["micro_batch"] = \
        forward[1]["micro_batch"], forward[0]["micro_batch"]
    return 1


MUTATIONS = {
    "double-dp-gradients": double_dp_gradients,
    "drop-reduction": drop_reduction,
    "missing-tied-sum": missing_tied_sum,
    "double-loss-gradient": double_loss_gradient,
    "norm-counts-replicas": norm_counts_replicas,
    "padded-vocabulary": padded_vocabulary,
    "swap-pipeline-sends": swap_pipeline_sends,
}


def main():
    if sys.argv[1:] == ["--list"]:
        for name, mutate in MUTATIONS.items():
            print(f"{name}: {' '.join(mutate.__doc__.split())}")
        return 0
    if len(sys.argv) != 4 or sys.argv[3] not in MUTATIONS:
        print(f"usage: mutate_plan.py PLAN OUT MUTATION "
              f"({', '.join(MUTATIONS)})", file=sys.stderr)
        return 2
    source, target, name = sys.argv[1:4]
    plan = json.load(open(source))
    if not MUTATIONS[name](plan):
        print(f"mutate_plan.py: {source}: nothing for {name} to change",
              file=sys.stderr)
        return 2
    with open(target, "w") as f:
        json.dump(plan, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
