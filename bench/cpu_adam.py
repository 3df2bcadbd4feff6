#!/usr/bin/env python3
"""The host AdamW of CPU offload, zcc against PyTorch, side by side.

  bench/cpu_adam.py [--build build] [--elements 50000000] [--steps 5] [--threads N]

Runs zcc's host optimizer step (zcc-bench-cpu-adam: the cpu kernel,
vectorised, split over N threads, as zrun runs it for offload_optimizer) and
torch.optim.AdamW on the CPU (its default implementation, and foreach=True)
on the same number of fp32 parameters with the same thread count, and prints
seconds per step, elements per second and the ratio zcc / torch.
"""

import argparse
import json
import os
import subprocess
import time

import torch


def torch_step_seconds(elements, steps, threads, foreach):
    torch.set_num_threads(threads)
    param = torch.nn.Parameter(torch.full((elements,), 0.5))
    param.grad = torch.linspace(-0.5, 0.5, elements)
    optimizer = torch.optim.AdamW([param], lr=1e-3, weight_decay=0.01, foreach=foreach)
    optimizer.step()
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.step()
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    parser.add_argument("--elements", type=int, default=50_000_000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    binary = os.path.join(args.build, "bin", "zcc-bench-cpu-adam")
    zcc = json.loads(subprocess.check_output(
        [binary, str(args.elements), str(args.threads), str(args.steps)], text=True))
    rows = [("zcc host AdamW", zcc["seconds_per_step"])]
    for foreach in (False, True):
        rows.append((f"torch.optim.AdamW foreach={foreach}",
                     torch_step_seconds(args.elements, args.steps, args.threads, foreach)))
    print(f"AdamW step, {args.elements:,} fp32 parameters, {args.threads} threads, torch {torch.__version__}")
    print(f"{'implementation':36} {'s/step':>10} {'Melem/s':>10} {'zcc speedup':>12}")
    for name, seconds in rows:
        print(f"{name:36} {seconds:10.4f} {args.elements / seconds / 1e6:10.1f} "
              f"{seconds / rows[0][1]:11.2f}x")


if __name__ == "__main__":
    main()
