#!/usr/bin/env python3
"""Predicts the Megatron-LM SC'21 Table 1 rows with Partita's cost model.

For every row of the published weak-scaling table (GPT models from 1.7B to
1T parameters on DGX A100 nodes) this builds the model spec, runs
`plan-opt --topology=dgx-a100:N --strategy=... --cost-report=...` with the
published parallel configuration, and prints the predicted hardware TFLOP/s
per GPU (the paper's FLOP-counting convention, Eq. 3, with full
recomputation) next to the published figure, and the mean absolute
percentage error. Only physical parameters of the cost model are calibrated
(docs/cost-model.md); nothing here is fitted per row.

    bench/megatron_calibration.py [--plan-opt build/bin/plan-opt]
        [--table ../shared/data/megatron-sc21-table1.json] [--markdown FILE]
        [--search]

With --search it also lets the strategy search plan each row (same model,
cluster and global batch) and prints the searched strategy's predicted
throughput next to that of the published configuration, both under the
same cost model.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# The software stack of the paper: unfused attention (the score matrix goes
# through HBM), blocking pipeline sends/receives between compute steps, and
# a full recomputation that re-runs each layer whole, its output GEMMs too.
# Efficiencies keep the cost model's defaults unless given.
COST_PARAMS = "attention=unfused,overlap_p2p=0,recompute_outputs=1"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spec_for(row):
    # GPT as in the paper: learned positions, LayerNorm, GELU, biases, tied
    # embeddings; fp16 mixed precision (2-byte activations).
    return {
        "version": 1,
        "name": "gpt-%sb" % row["params_billion"],
        "model": {
            "vocab_size": row["vocab_size"],
            "hidden_size": row["hidden_size"],
            "num_layers": row["num_layers"],
            "num_heads": row["num_attention_heads"],
            "ffn_hidden_size": row["ffn_hidden_size"],
            "norm": "layer_norm",
            "activation": "gelu",
            "position_embedding": "learned",
            "max_position_embeddings": row["seq_length"],
            "qkv_bias": True,
            "attn_out_bias": True,
            "mlp_bias": True,
            "tie_embeddings": True,
        },
        "training": {
            "seq_len": row["seq_length"],
            "global_batch": row["global_batch_size_sequences"],
            "dtype": "f16",
        },
    }


def strategy_for(row):
    """The published configuration. The paper states dp, tp, pp, full
    recomputation and the interleaved schedule, but not the micro-batch size
    or the model chunks per device: we assume mbs=1 and the smallest vpp > 1
    that divides the layers of a stage (1 when a stage has one layer)."""
    tp, pp, dp = row["tensor_parallel"], row["pipeline_parallel"], row["data_parallel"]
    parts = ["dp=%d" % dp, "tp=%d" % tp, "pp=%d" % pp, "mbs=1", "recompute=full"]
    if pp > 1:
        per_stage = row["num_layers"] // pp
        vpp = next((v for v in range(2, per_stage + 1) if per_stage % v == 0), 1)
        parts.append("vpp=%d" % vpp)
        parts.append("schedule=%s" % ("interleaved" if vpp > 1 else "1f1b"))
    return ",".join(parts)


def run_plan_opt(plan_opt, row, workdir, args, suffix):
    """Runs plan-opt on the row's model and cluster; returns the JSON report
    written with `--report` or `--cost-report` (named in `args`)."""
    spec_path = os.path.join(workdir, "gpt-%s.json" % row["params_billion"])
    report_path = spec_path.replace(".json", suffix)
    with open(spec_path, "w") as f:
        json.dump(spec_for(row), f)
    nodes = row["num_gpus"] // row["gpus_per_node"]
    cmd = [plan_opt, spec_path, "--topology=dgx-a100:%d" % nodes] + [
        a.replace("REPORT", report_path) for a in args] + ["-o", os.devnull]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("plan-opt failed for %s:\n%s" % (row["params_billion"], result.stderr))
    with open(report_path) as f:
        return json.load(f)


def search(plan_opt, row, workdir, cost_params):
    return run_plan_opt(plan_opt, row, workdir,
                        ["--cost-params=" + cost_params, "--report=REPORT"],
                        ".search.json")


def predict(plan_opt, row, workdir, cost_params):
    # Cost exactly the published configuration: no search.
    return run_plan_opt(plan_opt, row, workdir,
                        ["--no-search", "--cost-params=" + cost_params,
                         "--strategy=" + strategy_for(row),
                         "--cost-report=REPORT"], ".report.json")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan-opt", default=os.path.join(ROOT, "build", "bin", "plan-opt"))
    parser.add_argument("--table", default=os.path.join(
        ROOT, "..", "shared", "data", "megatron-sc21-table1.json"))
    parser.add_argument("--markdown", help="also write the table as Markdown here")
    parser.add_argument("--search", action="store_true",
                        help="also compare the searched strategy with the published one")
    parser.add_argument("--cost-params", default="",
                        help="extra cost-model parameters, e.g. gemm_efficiency=0.78")
    args = parser.parse_args()

    with open(args.table) as f:
        table = json.load(f)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for row in table["rows"]:
            params = ",".join(p for p in (COST_PARAMS, args.cost_params) if p)
            report = predict(args.plan_opt, row, workdir, params)
            predicted = report["predicted"]["hardware_tflops_per_gpu"]
            published = row["achieved_tflops_per_gpu"]
            searched = search(args.plan_opt, row, workdir, params) if args.search else None
            rows.append((row, strategy_for(row), predicted, published,
                         100.0 * (predicted - published) / published,
                         report["predicted"]["tokens_per_s"], searched))
    mape = sum(abs(r[4]) for r in rows) / len(rows)

    header = ("| model | GPUs | strategy | published TFLOP/s | predicted TFLOP/s | error |\n"
              "|---|---:|---|---:|---:|---:|\n")
    lines = ["| %sB | %d | `%s` | %d | %.1f | %+.1f%% |" % (
        r[0]["params_billion"], r[0]["num_gpus"], r[1], r[3], r[2], r[4]) for r in rows]
    text = header + "\n".join(lines) + "\n\nMean absolute percentage error: %.1f%% over %d rows.\n" % (mape, len(rows))
    if args.search:
        text += ("\n| model | GPUs | published strategy tokens/s | searched strategy | "
                 "searched tokens/s | gain |\n|---|---:|---:|---|---:|---:|\n")
        for r in rows:
            st = r[6]["strategy"]
            searched_tps = r[6]["predicted"]["tokens_per_s"]
            text += "| %sB | %d | %.0f | `dp=%d,tp=%d,pp=%d,vpp=%d,zero=%d,mbs=%d,recompute=%s,sp=%d` | %.0f | %+.1f%% |\n" % (
                r[0]["params_billion"], r[0]["num_gpus"], r[5], st["dp"], st["tp"],
                st["pp"], st["vpp"], st["zero"], st["micro_batch_size"], st["recompute"],
                1 if st["sequence_parallel"] else 0, searched_tps,
                100.0 * (searched_tps / r[5] - 1))
        worse = [r for r in rows if r[6]["predicted"]["tokens_per_s"] < r[5] * (1 - 1e-9)]
        text += "\nSearched at least as fast as published on %d of %d rows.\n" % (
            len(rows) - len(worse), len(rows))
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
