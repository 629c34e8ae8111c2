#!/usr/bin/env python3
"""Joins the logs of scripts/gpu-check.sh into OUT/gpu-check.json and
OUT/summary.txt, and prints the summary.

  gpu_check_summary.py OUT PLANS GPU_NAME GPU_COUNT STATUS
"""
import json, os, re, statistics, sys
out, plans, gpu, gpus, status = sys.argv[1:6]
result = {"gpu": gpu, "gpus": int(gpus), "tests_passed": status == "0"}
lines = [f"GPU check on {gpus} x {gpu}"]
only_path = os.path.join(out, "only.txt")
if os.path.exists(only_path):
    # gpu-check.sh --only: tests_passed speaks of these stages alone.
    result["only"] = open(only_path).read().strip()
    lines.append(f"only the stages matching: {result['only']}")

def bf16_peak(name):
    """Dense bf16 TFLOP/s of the GPU `name`, as nvidia-smi spells it."""
    for key, peak in (("H200", 989.4), ("H100", 989.4), ("A100", 312.0),
                      ("L40S", 362.1)):
        if key in name:
            return peak
    return float("nan")


def log(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]

def benchmark(name):
    """A benchmark's JSON output: None where it did not run, {} where it
    stopped before writing all of it."""
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return None
    try:
        return json.load(open(path))
    except ValueError:
        return {}

def worst_difference(base, other):
    """The largest relative difference of `other`'s losses (and gradient
    norms, where both logs hold them) from `base`'s."""
    keys = ["loss"] + (["grad_norm"] if all("grad_norm" in e
                                           for e in base + other) else [])
    return max(abs(y[k] - x[k]) / abs(x[k]) for x, y in zip(base, other)
               for k in keys if x[k])


# Each comparison's limit: about 10x the worst an H200 showed (docs/gpu.md;
# fp32 GEMMs gave the CPU's losses exactly). Above it the check fails.
LIMITS = {"tiny_llama_fp32": 1e-5, "tiny_llama_bf16": 1e-5,
          "tiny_llama_bf16_buffers": 1e-4, "tiny_llama_f32_gradients": 1e-4,
          "tiny_gemma_bf16": 1e-4, "small_llama_head128_bf16": 3e-3,
          "small_llama_head128_bf16_mma": 3e-3,
          "small_llama_head128_bf16_mma_atomic": 3e-3,
          "small_llama_head128_bf16_cudnn": 3e-3, "equivalence": 1e-5,
          # The kernel oracle's limits are its own (a ratio of 1: at them).
          "kernel_oracle": 1.0,
          # Not yet measured on a GPU: the limit of the CPU backend against
          # the numpy reference and the CUDA emulator (docs/runtime.md).
          "tiny_llama_fp32_step1_gradients": 2e-5}
checks = {"ran": [], "failed": []}


def judge(key, label, worst):
    """Records the comparison `key` and fails it above its limit."""
    limit = LIMITS[key.split("/")[0]]
    checks["ran"].append(key)
    if worst > limit:
        checks["failed"].append(key)
        lines.append(f"FAILED {label}: {worst:.2e} is above its limit "
                     f"{limit:.0e}")

tests = os.path.join(out, "kernel-tests.json")
if os.path.exists(tests):
    t = json.load(open(tests))
    # A skipped case (no usable device) is no failure, and no pass either.
    skipped = sum(c.get("result") == "SKIPPED"
                  for suite in t.get("testsuites", [])
                  for c in suite.get("testsuite", []))
    # Which ones failed: each family of attention kernels is a test of its
    # own (CudaAttention.WmmaKernels, .RegisterKernels and
    # .RegisterKernelsSummingDq).
    failing = [f"{suite['name']}.{c['name']}"
               for suite in t.get("testsuites", [])
               for c in suite.get("testsuite", []) if c.get("failures")]
    result["kernel_tests"] = {"tests": t["tests"], "failures": t["failures"],
                              "skipped": skipped, "failing": failing}
    passed = t["tests"] - t["failures"] - skipped
    lines.append(f"kernel tests: {passed}/{t['tests']} pass"
                 + (f", {skipped} skipped" if skipped else "")
                 + (f"; failing: {' '.join(failing)}" if failing else ""))

# Every kernel against PyTorch (test/Runtime/kernel_oracle.py), which
# holds each output to its own limits: judged by the worst error over its
# limit.
oracle = benchmark("kernel-oracle.json")
if oracle:
    result["kernel_oracle"] = oracle
    lines.append(f"kernel oracle: {oracle['launches']} launches of "
                 f"{oracle['kernels']} kernels against PyTorch, worst f32 "
                 f"{oracle['worst_f32']:.1e} (limit {oracle['limit_f32']:.0e}),"
                 f" bf16 {oracle['worst_bf16']:.1e} (limit "
                 f"{oracle['limit_bf16']:.0e})")
    judge("kernel_oracle", "kernel oracle, worst error over its limit",
          oracle["worst_over_limit"])

cpu = log("tiny-cpu.jsonl")
for p in ("fp32", "bf16"):
    gpu_log = log(f"tiny-{p}.jsonl")
    if cpu and len(gpu_log) == len(cpu):
        worst = worst_difference(cpu, gpu_log)
        result[f"tiny_llama_{p}"] = {
            "max_relative_loss_difference": worst,
            "first_loss": gpu_log[0]["loss"], "last_loss": gpu_log[-1]["loss"]}
        lines.append(f"tiny Llama, {p} GEMMs: losses within {worst:.2e} of "
                     f"the CPU's over {len(cpu)} steps "
                     f"({gpu_log[0]['loss']:.4f} -> {gpu_log[-1]['loss']:.4f})")
        judge(f"tiny_llama_{p}", f"tiny Llama, {p} GEMMs", worst)
    elif cpu and os.path.exists(os.path.join(out, f"tiny-{p}.log")):
        lines.append(f"tiny Llama, {p} GEMMs: the GPU run did not finish "
                     f"(tiny-{p}.log)")

# Every gradient after step 1 of the fp32 run against the CPU's
# (same_params.py: relative Frobenius norms, the worst tensor named).
gradients = os.path.join(out, "tiny-fp32-gradients.log")
if os.path.exists(gradients):
    found = re.search(r"same tensors \(worst ([^,]+), (.+)\)$",
                      open(gradients).read(), re.M)
    if found:
        worst = float(found.group(1))
        result["tiny_llama_fp32_step1_gradients"] = {
            "max_relative_difference": worst, "worst_tensor": found.group(2)}
        lines.append(f"tiny Llama, fp32 GEMMs: gradients after step 1 within "
                     f"{worst:.2e} of the CPU's ({found.group(2)})")
        judge("tiny_llama_fp32_step1_gradients", "tiny Llama, fp32 GEMMs' "
              "gradients", worst)
    else:
        lines.append("tiny Llama, fp32 GEMMs: the gradients could not be "
                     "compared (tiny-fp32-gradients.log)")


def bf16_run(name, key, label, gpu_run="cuda"):
    """The GPU's bf16 run `name`-`gpu_run` against the CPU's."""
    a, b = log(f"{name}-cpu.jsonl"), log(f"{name}-{gpu_run}.jsonl")
    if a and len(a) == len(b):
        worst = worst_difference(a, b)
        result[key] = {"max_relative_loss_difference": worst}
        lines.append(f"{label}: losses within {worst:.2e} of the CPU's bf16 "
                     f"run over {len(a)} steps")
        judge(key, label, worst)
    elif a and os.path.exists(os.path.join(out, f"{name}-{gpu_run}.log")):
        # (No log: the run was not asked for, gpu-check.sh --only.)
        lines.append(f"{label}: the GPU run did not finish "
                     f"({name}-{gpu_run}.log)")

bf16_run("tiny-bf16-buffers", "tiny_llama_bf16_buffers",
         "tiny Llama, bf16 buffers")
bf16_run("f32-grads", "tiny_llama_f32_gradients",
         "tiny Llama, bf16 parameters and f32 gradients")
bf16_run("gemma", "tiny_gemma_bf16",
         "tiny Gemma in bf16 (GeGLU, offset norm weights, scaled embeddings)")
bf16_run("head128", "small_llama_head128_bf16",
         "small Llama, heads of 128 in bf16 (WMMA attention)")
bf16_run("head128", "small_llama_head128_bf16_mma",
         "small Llama, heads of 128 in bf16 (register-resident attention)",
         "cuda-mma")
bf16_run("head128", "small_llama_head128_bf16_mma_atomic",
         "small Llama, heads of 128 in bf16 (register-resident attention, "
         "one-pass backward)", "cuda-mma-atomic")
cudnn_skipped = os.path.join(out, "cudnn-skipped.txt")
if os.path.exists(cudnn_skipped):
    result["cudnn_skipped"] = open(cudnn_skipped).read().strip()
    lines.append(f"cudnn attention runs skipped: {result['cudnn_skipped']}")
else:
    bf16_run("head128", "small_llama_head128_bf16_cudnn",
             "small Llama, heads of 128 in bf16 (cuDNN's fused attention)",
             "cuda-cudnn")

for s in ("dp2", "tp2", "pp2", "zero3"):
    a, b = log(f"equiv-{s}-cpu.jsonl"), log(f"equiv-{s}-cuda.jsonl")
    if a and len(a) == len(b):
        worst = worst_difference(a, b)
        result.setdefault("equivalence", {})[s] = worst
        lines.append(f"2 GPUs, {s}: losses within {worst:.2e} of the CPU's")
        judge(f"equivalence/{s}", f"2 GPUs, {s}", worst)

gemm = os.path.join(out, "gemm.json")
if os.path.exists(gemm):
    g = json.load(open(gemm))
    result["gemm"] = g
    for row in g.get("gemms", []):
        line = (f"GEMM {row['gemm']} ({row['m']}x{row['n']}x{row['k']}): ours "
                f"bf16 {row['ours_bf16_tflops']:.0f} TFLOP/s = "
                f"{row['ours_vs_cublas_bf16']:.2f}x plain cuBLAS; bf16 buffers "
                f"{row['cublas_bf16_buffers_tflops']:.0f} TFLOP/s")
        if "ours_bf16_buffers_tflops" in row:
            line += (f", ours {row['ours_bf16_buffers_tflops']:.0f} = "
                     f"{row['ours_vs_cublas_bf16_buffers']:.2f}x")
        lines.append(line)

# The models in bf16 (the runtime's bf16 path: bf16 GEMMs on bf16 buffers,
# tensor-core attention) and in f32 buffers (f32 kernels, bf16 GEMMs).
# A -mma run is its plan with the register-resident attention kernels, a
# -mma-atomic one with their one-pass backward, a -cudnn one with cuDNN's
# fused attention.
for model in ("llama3-8b-block", "llama3-8b-block-cudnn",
              "llama3-8b-block-mma", "gpt2-small", "gpt2-small-cudnn",
              "llama3-8b-block-f32", "gpt2-small-f32",
              "llama3-8b-block-mma-atomic"):
    steps = log(f"{model}.jsonl")
    if len(steps) < 2:
        continue
    plan_name = re.sub(r"-(mma(-atomic)?|cudnn)$", "", model)
    plan = json.load(open(os.path.join(plans, f"{plan_name}.json")))
    predicted = plan["predicted"]
    dtype = plan.get("training", {}).get("dtype", "f32")
    # The first step pays for allocation and cuBLASLt's heuristics.
    measured = statistics.median(s["step_time_s"] for s in steps[1:])
    # The cost model's FLOPs of one step on this GPU, against the GPU's
    # dense bf16 peak (an f32 plan's own MFU is against the fp32 peak).
    tflop = predicted["tflops_per_gpu"] * predicted["step_time_s"]
    peak = bf16_peak(gpu)
    mfu = tflop / measured / peak
    result[model] = {"step_time_s": measured, "tflop_per_step": tflop,
                     "achieved_tflops": tflop / measured,
                     "bf16_peak_tflops": peak, "mfu": mfu,
                     "predicted_step_time_s": predicted["step_time_s"],
                     "dtype": dtype}
    lines.append(f"{model}: forward + backward + AdamW {measured * 1e3:.1f} ms, "
                 f"{tflop / measured:.0f} TFLOP/s, MFU {mfu:.1%} of {peak:.0f} "
                 f"(cost model, {dtype}: {predicted['step_time_s'] * 1e3:.1f} "
                 f"ms)")
    # Where the compute stream's time went (plan-run --profile, timed by
    # CUDA events): the kernels that bound the step.
    profile = os.path.join(out, f"{model}.log")
    shares, seconds, profiled_steps = {}, {}, 0
    if os.path.exists(profile):
        for line in open(profile):
            found = re.match(r"^  (\S+) +([0-9.]+) s +([0-9.]+)%$", line)
            if found:
                shares[found.group(1)] = float(found.group(3)) / 100
                seconds[found.group(1)] = float(found.group(2))
            found = re.match(r"^time by launch over (\d+) steps", line)
            if found:
                profiled_steps = int(found.group(1))
    # One attention launch's time (and its backward's): each kernel's time
    # in the profile over its launches in those steps (a recomputed forward
    # launches attention in the backward phase too).
    programs = plan.get("programs") or [{}]
    def calls(kernel):
        return plan.get("training", {}).get("num_micro_batches", 1) * sum(
            1 for phase in programs[0].get("phases", [])
            for launch in phase.get("launches", [])
            if launch.get("kernel") == kernel)
    if profiled_steps and "attention" in seconds and calls("attention"):
        result[model]["attention_ms"] = {
            kind: seconds.get(kernel, 0) / profiled_steps /
            max(calls(kernel), 1) * 1e3
            for kind, kernel in (("forward", "attention"),
                                 ("backward", "attention_bwd"))}
    if shares:
        result[model]["compute_stream_share"] = shares
        top = sorted(shares.items(), key=lambda kv: -kv[1])[:4]
        lines.append(f"{model}: compute stream by launch: " + ", ".join(
            f"{name} {share:.0%}" for name, share in top))
    # What the device holds against the memory plan and its allowance for
    # the runtime (CUDA context, workspaces, NCCL): the numbers to set
    # plan-opt's runtime_gib and nccl_*_gib from.
    in_use = steps[0].get("memory_in_use_bytes")
    memory = plan.get("memory", {})
    if in_use and "device_bytes_per_rank" in memory:
        arena = memory["peak_bytes_per_rank"]
        result[model].update(
            memory_in_use_bytes=in_use, planned_device_bytes=memory[
                "device_bytes_per_rank"], planned_runtime_bytes=memory[
                "runtime_bytes_per_rank"], measured_runtime_bytes=in_use - arena)
        gib = 2**30
        lines.append(
            f"{model}: {in_use / gib:.2f} GiB of device memory in use after "
            f"step 1, {(in_use - arena) / gib:.2f} GiB beside the arena "
            f"(the plan allows {memory['runtime_bytes_per_rank'] / gib:.2f}; "
            f"{memory['device_bytes_per_rank'] / gib:.2f} GiB in all)")

# The runtime's attention against PyTorch's fused attention on the block's
# shape (bench/gpu/torch_attention.py).
reference = benchmark("torch-attention.json")
if reference is not None:
    if "skipped" in reference:
        lines.append(f"attention reference skipped: {reference['skipped']}")
    elif "forward_ms" in reference:
        result["torch_attention"] = reference
        line = (f"attention on the block's shape: PyTorch {reference['torch']} "
                f"forward {reference['forward_ms']:.2f} ms "
                f"({reference['forward_tflops']:.0f} TFLOP/s causal), "
                f"backward {reference['backward_ms']:.2f} ms "
                f"({reference['backward_tflops']:.0f})")
        for model, kernels in (("llama3-8b-block", "wmma"),
                               ("llama3-8b-block-mma", "mma"),
                               ("llama3-8b-block-mma-atomic", "mma-atomic"),
                               ("llama3-8b-block-cudnn", "cudnn")):
            ours = result.get(model, {}).get("attention_ms")
            if ours:
                line += (f"; ours ({kernels}) forward {ours['forward']:.2f} "
                         f"ms ({ours['forward'] / reference['forward_ms']:.2f}"
                         f"x its time), backward {ours['backward']:.2f} ms "
                         f"({ours['backward'] / reference['backward_ms']:.2f}"
                         f"x)")
        lines.append(line)

# Each family of our attention kernels on the block's shape
# (partita-cuda-bench attention), against PyTorch's where it ran.
kernels = benchmark("attention.json")
if kernels is not None:
    reference = result.get("torch_attention")
    for family, row in kernels.get("attention", {}).items():
        result.setdefault("attention_kernels", {})[family] = row
        if "skipped" in row:
            lines.append(f"attention kernels ({family}): skipped: "
                         f"{row['skipped']}")
            continue
        if family == "cudnn" and kernels.get("cudnn_version"):
            version = kernels["cudnn_version"]
            family = (f"cudnn, cuDNN {version // 10000}.{version // 100 % 100}"
                      f".{version % 100}")
        line = (f"attention kernels ({family}) on the block's shape: forward "
                f"{row['forward_ms']:.2f} ms ({row['forward_tflops']:.0f} "
                f"TFLOP/s causal), backward {row['backward_ms']:.2f} ms "
                f"({row['backward_tflops']:.0f})")
        if reference:
            line += (f"; {row['forward_ms'] / reference['forward_ms']:.2f}x "
                     f"and {row['backward_ms'] / reference['backward_ms']:.2f}"
                     f"x PyTorch's time")
        lines.append(line)

# The memory-bound kernels on the block's shapes (partita-cuda-bench
# memory): bytes moved over time, against a device-to-device copy's.
memory = benchmark("memory.json")
if memory is not None and "memory_bound" in memory:
    result["memory_bound"] = memory
    rates = ", ".join(
        f"{name} {row['gbytes_per_s']:.0f} GB/s ({100 * row['of_copy']:.0f}%)"
        for name, row in sorted(memory["memory_bound"].items()))
    lines.append(f"memory-bound kernels on the block's shapes, against a "
                 f"copy's {memory['copy_gbytes_per_s']:.0f} GB/s: {rates}")

# The choice of default attention kernels (attentionKernels): each family
# by the bf16 block's step, those whose kernel cases pass first.
failing_cases = result.get("kernel_tests", {}).get("failing", [])
ranked = sorted(
    ((result[run]["step_time_s"], family,
      f"CudaAttention.{case}" not in failing_cases)
     for family, run, case in (
         ("wmma", "llama3-8b-block", "WmmaKernels"),
         ("mma", "llama3-8b-block-mma", "RegisterKernels"),
         ("mma-atomic", "llama3-8b-block-mma-atomic",
          "RegisterKernelsSummingDq"),
         ("cudnn", "llama3-8b-block-cudnn", "CudnnKernels"))
     if run in result),
    key=lambda row: (not row[2], row[0]))
if ranked:
    result["attention_families_by_step"] = [
        {"family": family, "step_time_s": seconds, "kernel_case_passes": ok}
        for seconds, family, ok in ranked]
    lines.append("attention families by the block's step: " + ", ".join(
        f"{family} {seconds * 1e3:.1f} ms"
        + ("" if ok else " (its kernel case fails)")
        for seconds, family, ok in ranked))

ar = os.path.join(out, "allreduce.json")
if os.path.exists(ar):
    try:
        a = json.load(open(ar))
        result["nccl"] = a
        best = max(r["bus_gbytes_per_s"] for r in a["all_reduce"])
        lines.append(f"NCCL all-reduce over {a['ranks']} GPUs: "
                     f"{best:.0f} GB/s bus bandwidth at best")
    except (ValueError, KeyError):
        pass

skipped_path = os.path.join(out, "skipped.txt")
skipped = open(skipped_path).read().split() if os.path.exists(skipped_path) else []
if skipped:
    result["skipped_for_time"] = skipped
    lines.append(f"out of time, skipped: {' '.join(skipped)}")

not_run = [k for k in LIMITS if k != "equivalence" and k not in checks["ran"]]
result["numeric_checks"] = {"ran": checks["ran"], "failed": checks["failed"],
                            "not_run": not_run}
lines.append(f"numeric checks: {len(checks['ran']) - len(checks['failed'])} "
             f"of {len(checks['ran'])} within their limits"
             + (f"; not run: {' '.join(not_run)}" if not_run else ""))
json.dump(result, open(os.path.join(out, "gpu-check.json"), "w"), indent=2)
open(os.path.join(out, "summary.txt"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(1 if checks["failed"] else 0)
