"""Compares two weight files (zplan export's safetensors) tensor by tensor:

    compare_weights.py ACTUAL.safetensors EXPECTED.safetensors [--rtol R]

Both must hold the same names and shapes. A tensor's error is its largest
element difference over the expected tensor's largest magnitude. Prints the
tensor with the largest error, then `weights: ok`, or every tensor beyond
--rtol (default 1e-6) and `weights: MISMATCH` (exit status 1).
"""

import argparse
import sys

import numpy as np

from check_export import read_safetensors


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("actual")
    parser.add_argument("expected")
    parser.add_argument("--rtol", type=float, default=1e-6)
    args = parser.parse_args()
    actual, expected = read_safetensors(args.actual), read_safetensors(args.expected)
    if sorted(actual) != sorted(expected):
        print(f"the files hold different tensors: {sorted(set(actual) ^ set(expected))[:5]}")
        print("weights: MISMATCH")
        return 1
    errors = {}
    for name, want in expected.items():
        got = actual[name]
        if got.shape != want.shape:
            print(f"{name}: shape {got.shape}, expected {want.shape}")
            print("weights: MISMATCH")
            return 1
        scale = max(float(np.max(np.abs(want.astype(np.float64)))), 1e-30)
        errors[name] = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale
    worst = max(errors, key=errors.get)
    print(f"{len(errors)} tensors, rtol {args.rtol:g}; largest error {errors[worst]:.3g} ({worst})")
    beyond = sorted(name for name, error in errors.items() if not error <= args.rtol)
    for name in beyond[:10]:
        print(f"  {name}: {errors[name]:.3g}")
    print("weights: MISMATCH" if beyond else "weights: ok")
    return 1 if beyond else 0


if __name__ == "__main__":
    sys.exit(main())
