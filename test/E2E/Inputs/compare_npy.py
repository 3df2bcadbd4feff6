"""Compares arrays written by zrun with a reference (torch's outputs):

    compare_npy.py ACTUAL.npy EXPECTED.npy [--rtol R]

prints `max relative error E (limit R): ok` or `...: MISMATCH` and exits 1 on
a mismatch, a shape or dtype difference, or any NaN. The relative error is
max|a - e| / max(max|e|, tiny), so a zero reference element cannot hide a
large absolute error.
"""

import argparse
import sys

import numpy as np


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("actual")
    parser.add_argument("expected")
    parser.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args()
    actual = np.load(args.actual)
    expected = np.load(args.expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        print(f"shape/dtype differ: {actual.shape} {actual.dtype} vs {expected.shape} {expected.dtype}")
        return 1
    if np.isnan(actual).any():
        print("actual has NaN")
        return 1
    scale = max(float(np.max(np.abs(expected))), np.finfo(np.float32).tiny)
    error = float(np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64)))) / scale
    verdict = "ok" if error <= args.rtol else "MISMATCH"
    print(f"max relative error {error:.3g} (limit {args.rtol:g}): {verdict}")
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
