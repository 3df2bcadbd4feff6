"""Checks a `zcc --report=json` memory plan: the activation region against the
liveness lower bound, and that the categories add up to the arena."""

import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--max-ratio", type=float, default=1.1)
    args = parser.parse_args()
    rank = json.load(open(args.report))["ranks"][0]["peak_device_bytes"]
    ratio = rank["activations"] / rank["peak_live_activations"]
    ok = ratio <= args.max_ratio
    print(f"activations / live lower bound = {ratio:.4f}: {'ok' if ok else 'TOO LARGE'}")
    parts = sum(v for k, v in rank.items() if k not in ("total", "peak_live_activations"))
    # Persistent buffers are aligned one after another: alignment padding is
    # the only slack allowed between the categories and the arena.
    slack = rank["total"] - parts
    summed = 0 <= slack < 256 * 64
    print(f"categories sum to the arena: {'ok' if summed else f'NO (slack {slack})'}")
    return 0 if ok and summed else 1


if __name__ == "__main__":
    sys.exit(main())
