#!/usr/bin/env python3
"""zcc's cuda attention kernels against torch's fused attention, side by side.

  bench/attention.py [--build build-gpu] [--repeats 30] [--dtype bf16]

For the attention shapes of the GPU benchmark's models (causal, sequence
1024: gpt2-medium and gpt2-xl at micro-batch 8, the 6.7 B model at
micro-batch 4 with head size 128; gpt2-xl inference at sequence 2048), runs
zcc-bench-attention (the kernels zrun launches for `attention` and
`attention_grad`) and torch.nn.functional.scaled_dot_product_attention with
each fused backend torch has on the device (flash, cuDNN), and prints the
median milliseconds of the forward and the backward (zcc's reading the
forward's saved log-sum-exp, as training plans run it; the one that
recomputes the statistics in its own pass is in the JSON lines), the same
two through zcc's cuDNN graphs (what zrun's cuda backend runs where cuDNN
takes the shape; "zcc-dnn"), TFLOP/s
(forward 4 B H T^2 d, halved for causal; backward 2.5 times the forward)
and the ratio of torch's time to zcc's (above 1: zcc is faster).
"""

import argparse
import json
import os
import subprocess

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from cuda_timing import median_ms

SHAPES = [
    # name, batch, heads, sequence, head size
    ("gpt2-medium", 8, 16, 1024, 64),
    ("gpt2-xl", 8, 25, 1024, 64),
    ("gpt-6.7b", 4, 32, 1024, 128),
    ("gpt2-xl T=2048", 4, 25, 2048, 64),
]


def forward_flops(batch, heads, seq, head, causal):
    flops = 4 * batch * heads * seq * seq * head
    return flops / 2 if causal else flops


def torch_times(batch, heads, seq, head, dtype, backend, repeats):
    gen = torch.Generator(device="cuda").manual_seed(0)
    sets = []
    for _ in range(3):
        q, k, v, g = (torch.randn(batch, heads, seq, head, device="cuda", dtype=dtype, generator=gen)
                      for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)
        sets.append((q, k, v, g))
    f = torch.nn.functional.scaled_dot_product_attention

    def timed(fn):
        return median_ms(fn, repeats)

    with sdpa_kernel([backend]):
        def fwd(i):
            q, k, v, _ = sets[i]
            with torch.no_grad():
                f(q, k, v, is_causal=True)
        outs = [f(q, k, v, is_causal=True) for q, k, v, _ in sets]

        def bwd(i):
            q, k, v, g = sets[i]
            torch.autograd.grad(outs[i], (q, k, v), g, retain_graph=True)
        return timed(fwd), timed(bwd)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build-gpu"))
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    args = parser.parse_args()
    binary = os.path.join(args.build, "bin", "zcc-bench-attention")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    rows = []
    for name, batch, heads, seq, head in SHAPES:
        zcc = json.loads(subprocess.check_output(
            [binary, str(batch * heads), str(seq), str(seq), str(head), "1", args.dtype,
             str(args.repeats)], text=True))
        flops = forward_flops(batch, heads, seq, head, True)
        row = {"shape": name, "zcc_forward_ms": zcc["forward_ms"], "zcc_backward_ms": zcc["backward_ms"],
               "zcc_backward_recompute_ms": zcc["backward_recompute_ms"], "forward_gflop": flops / 1e9,
               "zccdnn_forward_ms": zcc["cudnn_forward_ms"], "zccdnn_backward_ms": zcc["cudnn_backward_ms"]}
        if "cudnn_declined" in zcc:
            row["zccdnn_declined"] = zcc["cudnn_declined"]
        for label, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                fwd, bwd = torch_times(batch, heads, seq, head, dtype, backend, args.repeats)
            except RuntimeError as error:  # a backend that refuses the shape
                fwd = bwd = None
                row[f"{label}_error"] = str(error).splitlines()[0]
            row[f"{label}_forward_ms"], row[f"{label}_backward_ms"] = fwd, bwd
        rows.append(row)
        print(json.dumps(row), flush=True)

    def tflops(gflop, ms):
        return gflop / ms if ms else float("nan")

    print(f"\nattention, causal, {args.dtype}, torch {torch.__version__}; TFLOP/s: forward 4BHT^2d/2, backward 2.5x")
    print(f"{'shape':16} {'pass':8} {'zcc ms':>8} {'TFLOP/s':>8} {'zcc-dnn':>9} {'flash ms':>9} {'cudnn ms':>9} "
          f"{'flash/zcc':>10} {'cudnn/zcc':>10} {'cudnn/dnn':>10}")
    for row in rows:
        for kind, factor in (("forward", 1.0), ("backward", 2.5)):
            z, dnn = row[f"zcc_{kind}_ms"], row[f"zccdnn_{kind}_ms"]
            fl, cu = row[f"flash_{kind}_ms"], row[f"cudnn_{kind}_ms"]
            fmt = lambda x: f"{x:9.3f}" if x else f"{'-':>9}"
            ratio = lambda x, y: f"{x / y:10.2f}" if x and y else f"{'-':>10}"
            print(f"{row['shape']:16} {kind:8} {z:8.3f} {tflops(row['forward_gflop'] * factor, z):8.1f} "
                  f"{fmt(dnn)} {fmt(fl)} {fmt(cu)} {ratio(fl, z)} {ratio(cu, z)} {ratio(cu, dnn)}")


if __name__ == "__main__":
    main()
