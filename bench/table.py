"""Prints bench/gpu_bench.sh's results (one JSON object per run) as a table:
each zcc run next to its peer (ZeRO-0 against DDP, ZeRO-3 against FSDP2) with
tokens/s, TFLOP/s per GPU, peak memory per GPU and the ratios zcc / peer."""

import json
import os
import sys

SIZES = {
    "gpt2-medium": (24, 1024),
    "gpt2-xl": (48, 1600),
    "gpt-6.7b": (32, 4096),
    "gpt-13b": (40, 5120),
}
VOCAB, SEQ = 50304, 1024
GPUS = int(os.environ.get("NPROC", 2))  # as bench/gpu_bench.sh


def tflops_per_gpu(model, tokens_per_s):
    layers, width = SIZES[model]
    params = VOCAB * width + SEQ * width + layers * (12 * width * width + 13 * width) + 2 * width
    per_token = 6 * params + 12 * layers * SEQ * width
    return tokens_per_s * per_token / GPUS / 1e12


def fmt_gib(value):
    return f"{value:.2f} GiB" if value else "–"


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip().startswith("{")]
    by = {(r["system"], r["model"]): r for r in rows}
    print(f"| model | zcc | tokens/s | TFLOP/s/GPU | peak GiB/GPU | peer | tokens/s | TFLOP/s/GPU | "
          f"peak GiB/GPU | tokens/s zcc/peer | memory zcc/peer |")
    print("|" + "---|" * 11)
    for (system, model), r in by.items():
        if not system.startswith("zcc-z"):
            continue
        peer_name = "ddp" if system == "zcc-z0" else "fsdp2"
        p = by.get((peer_name, model), {})
        zt, pt = r.get("tokens_per_s") or 0, p.get("tokens_per_s") or 0
        zm, pm = r.get("peak_gib"), p.get("peak_gib")
        fmt = lambda v, f: (f % v) if isinstance(v, (int, float)) and v else "–"
        print(f"| {model} | {system[4:].replace('z', 'ZeRO-')} | {fmt(zt, '%.0f')} | {fmt(tflops_per_gpu(model, zt), '%.0f')} | "
              f"{fmt(zm, '%.1f')} | {peer_name} | {fmt(pt, '%.0f')} | {fmt(tflops_per_gpu(model, pt) if pt else 0, '%.0f')} | "
              f"{fmt(pm, '%.1f')} | {fmt(zt / pt if pt else 0, '%.2f')} | {fmt(zm / pm if zm and pm else 0, '%.2f')} |")
    for (system, model), r in by.items():
        if system.startswith("zcc-z") and r.get("predicted_gib") and r.get("peak_gib"):
            print(f"{model} {system[4:].replace('z', 'ZeRO-')}: planned {r['predicted_gib']:.2f} GiB per GPU, "
                  f"allocated {r['peak_gib']:.2f} ({r['peak_gib'] / r['predicted_gib'] - 1:+.1%}), "
                  f"device in use {fmt_gib(r.get('device_gib'))}; "
                  f"loss {r['loss_first']} -> {r['loss_last']}")
    for key in (("single-infer", "gpt2-xl"), ("torch-pipelining", "gpt2-xl")):
        if key in by:
            r = by[key]
            print(f"{key[0]} {key[1]}: {r['tokens_per_s']:.0f} tokens/s, latency {r['latency_s'] * 1e3:.1f} ms per batch")
    mine, peer = by.get(("zcc-infer", "gpt2-xl")), by.get(("single-infer", "gpt2-xl"))
    if mine:
        ratio = f", {mine['tokens_per_s'] / peer['tokens_per_s']:.2f}x torch on one GPU" if peer else ""
        memory = (f", peak {mine['peak_gib']:.1f} GiB against {peer['peak_gib']:.1f}"
                  if peer and mine.get("peak_gib") and peer.get("peak_gib") else "")
        print(f"zcc-infer gpt2-xl (one GPU, batch 32): {mine['tokens_per_s']:.0f} tokens/s, latency "
              f"{mine['latency_s'] * 1e3:.1f} ms per batch{ratio}{memory}")
    if GPUS < 2:
        return
    peer = by.get(("torch-pipelining", "gpt2-xl"))
    pipelines = [(system, r) for (system, model), r in by.items()
                 if system.startswith("zcc-pipeline:") and r.get("tokens_per_s")]
    for system, mine in pipelines:
        ratio = f", {mine['tokens_per_s'] / peer['tokens_per_s']:.2f}x torch pipelining" if peer else ""
        bubble = (f" ({mine['schedule']}, predicted bubble {mine['predicted_bubble']:.3f})"
                  if mine.get("predicted_bubble") is not None else "")
        print(f"zcc-pipeline gpt2-xl, {system.split(':', 1)[1]}{bubble}: {mine['tokens_per_s']:.0f} tokens/s, "
              f"latency {mine['latency_s'] * 1e3:.1f} ms per batch{ratio}")
    if not pipelines:
        print("zcc pipeline inference: not run or failed (see the *-zcc.log of each pipeline config)")

if __name__ == "__main__":
    main()
