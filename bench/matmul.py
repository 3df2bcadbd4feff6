#!/usr/bin/env python3
"""zcc's cuda matrix products against torch's, shape by shape.

  bench/matmul.py [--build build-gpu] [--repeats 30] [--rows 4096 8192]
                  [--candidates 1 8 16 32 64]

For the products of a gpt2-xl block and its output layer (width 1600,
vocabulary 50304; the output layer reads the embedding transposed) at ROWS tokens (4096: a pipeline stage's micro-batch of
4 x 1024; 8192: training's micro-batch of 8), runs zcc-bench-matmul (the
`matmul` kernel zrun launches, with the epilogue the plan fuses into it)
once for each count of cuBLASLt candidates timed on the shape's first run
(ZCC_MATMUL_ALGOS=measured:N; 1 is the heuristic's first choice), and
torch's bf16 product of the same shape (torch.nn.functional.linear, plus
the GELU or the residual where the plan fuses one), and prints the median
milliseconds, TFLOP/s (2 M N K) and the ratio of torch's time to zcc's
best (above 1: zcc is faster). The sum over one block and the output
layer, weighted by the 48 blocks, is the forward's product time.
"""

import argparse
import json
import os
import subprocess

import torch

from cuda_timing import median_ms

WIDTH, VOCAB, BLOCKS = 1600, 50304, 48
# name, N, K, epilogue, uses per forward
PRODUCTS = [
    ("qkv", 3 * WIDTH, WIDTH, "bias", BLOCKS),
    ("proj", WIDTH, WIDTH, "bias_residual", BLOCKS),
    ("fc1", 4 * WIDTH, WIDTH, "bias_gelu", BLOCKS),
    ("fc2", WIDTH, 4 * WIDTH, "bias_residual", BLOCKS),
    ("lm_head", VOCAB, WIDTH, "none", 1),
]


def torch_ms(m, n, k, epilogue, repeats):
    gen = torch.Generator(device="cuda").manual_seed(0)
    sets = []
    for _ in range(3):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen) * 0.05
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen) * 0.05
        b = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen) * 0.05
        r = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=gen) * 0.05
        sets.append((x, w, b, r))
    f = torch.nn.functional

    def run(i):
        x, w, b, r = sets[i]
        if epilogue == "none":
            return x @ w.t()
        y = f.linear(x, w, b)
        if epilogue == "bias_gelu":
            return f.gelu(y, approximate="tanh")
        if epilogue == "bias_residual":
            return y + r
        return y

    with torch.no_grad():
        return median_ms(run, repeats)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build-gpu"))
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rows", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--candidates", type=int, nargs="+", default=[1, 8, 16, 32, 64])
    args = parser.parse_args()
    binary = os.path.join(args.build, "bin", "zcc-bench-matmul")
    rows = []
    for m in args.rows:
        for name, n, k, epilogue, uses in PRODUCTS:
            row = {"product": name, "m": m, "n": n, "k": k, "epilogue": epilogue, "uses": uses}
            for count in args.candidates:
                out = subprocess.run([binary, str(m), str(n), str(k), "bf16", epilogue, str(count),
                                      str(args.repeats)] + (["transpose_rhs"] if name == "lm_head" else []),
                                     capture_output=True, text=True)
                row[f"zcc{count}"] = json.loads(out.stdout)["ms"] if out.returncode == 0 else None
                if out.returncode != 0:
                    row[f"zcc{count}_error"] = out.stderr.strip()
            row["torch"] = torch_ms(m, n, k, epilogue, args.repeats)
            rows.append(row)
            print(json.dumps(row), flush=True)

    counts = args.candidates
    print(f"\nmatmul, bf16, torch {torch.__version__}; ms (TFLOP/s at the best count); "
          f"zcc with N candidates timed")
    header = f"{'product':8} {'rows':>5} {'N':>6} {'K':>5} " + " ".join(f"{'zcc' + str(c):>8}" for c in counts)
    print(header + f" {'best TF/s':>9} {'torch':>8} {'torch/best':>10}")
    totals = {}
    for row in rows:
        times = [row[f"zcc{c}"] for c in counts]
        best = min(t for t in times if t) if any(times) else None
        flops = 2 * row["m"] * row["n"] * row["k"]
        cells = " ".join(f"{t:8.3f}" if t else f"{'-':>8}" for t in times)
        print(f"{row['product']:8} {row['m']:5} {row['n']:6} {row['k']:5} {cells} "
              f"{flops / best / 1e9 if best else 0:9.1f} {row['torch']:8.3f} "
              f"{row['torch'] / best if best else 0:10.2f}")
        total = totals.setdefault(row["m"], {"torch": 0.0, **{c: 0.0 for c in counts}})
        total["torch"] += row["torch"] * row["uses"]
        for c, t in zip(counts, times):
            total[c] += (t or float("nan")) * row["uses"]
    for m, total in totals.items():
        cells = " ".join(f"{total[c]:8.2f}" for c in counts)
        print(f"{'forward':8} {m:5} {'':6} {'':5} {cells} {'':9} {total['torch']:8.2f}")


if __name__ == "__main__":
    main()
