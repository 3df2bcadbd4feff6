"""Checks zcc --report=json's pipeline bubble fraction against GPipe's
(p - 1) / (m + p - 1) for stages of equal cost.

    check_bubble.py REPORT.json
"""
import json
import sys

report = json.load(open(sys.argv[1]))["pipeline"]
p, m = report["num_stages"], report["micro_batches"]
costs = {stage["forward_flops"] + stage["backward_flops"] for stage in report["stages"]}
expected = (p - 1) / (m + p - 1)
got = report["bubble_fraction"]
verdict = "ok" if len(costs) == 1 and abs(got - expected) < 1e-12 else "MISMATCH"
print(f"p={p} m={m} stage costs {sorted(costs)} bubble {got:.6f} expected {expected:.6f} {verdict}")
