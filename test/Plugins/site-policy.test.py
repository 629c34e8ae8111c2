"""GEMM times under the measured table versus the closed form."""
import json
import sys

closed, measured = (json.load(open(path)) for path in sys.argv[1:3])
assert measured["cost_overrides"] == [
    "site-gemm-efficiency (1 measured shapes)"], measured["cost_overrides"]
times = [{op["op"]: op["forward_time_s"] for op in report["layer"]}
         for report in (closed, measured)]
# attn.q is 8192 x 4096 x 4096 per device: closed form 0.74 * 8192/8256 *
# (4096/4160)^2 = 0.7118, the table 0.355.
ratio = times[1]["attn.q"] / times[0]["attn.q"]
assert abs(ratio - 0.7118 / 0.355) < 0.01, ratio
assert times[1]["attention"] == times[0]["attention"], times
print(f"attn.q forward time ratio {ratio:.3f}")
